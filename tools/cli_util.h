// Small helpers shared by the `boostcomm` subcommands: byte-size parsing and
// printing, comma-separated lists, the usage-error type, and the rank a launcher assigned to us.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace boostcomm::tools {

// A bad command-line value that every rank detects identically (so rank 0
// alone reports it and all ranks exit cleanly, instead of aborting the job).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "4096", "4K", "4KB", "4KiB", "1.5M", "2g": K/M/G are powers of 1024 as in
// nccl-tests. Empty when the text is not a size or overflows.
std::optional<std::size_t> parseBytes(std::string_view text);

// parseBytes, for an option that needs a positive size: throws UsageError
// naming `option` when `text` is not one.
std::size_t positiveBytes(const std::string& text, const char* option);

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> splitList(const std::string& text);

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> values);

// 1536 -> "1.5K", 67108864 -> "64M", 100 -> "100" (for tables; exact bytes go to JSON).
std::string formatBytes(std::size_t bytes);

// The rank the launcher (mpirun, srun) gave this process, read from its
// environment before MPI is initialised; 0 when not launched by one. Used to
// print command-line errors once rather than once per rank.
int launcherRank();

}  // namespace boostcomm::tools
