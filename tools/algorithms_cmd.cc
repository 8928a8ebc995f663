// `boostcomm algorithms`: what can run here and what the selection table
// picks. The table depends on the world size, so it is printed for the world
// this command runs in (1 rank without mpirun).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli_internal.h"
#include "boostcomm/communicator.h"
#include "cli_util.h"
#include "commands.h"

namespace boostcomm::tools {
namespace {

constexpr Collective kSwept[] = {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                                 Collective::kReduceScatter};
// 0 B, then powers of two from 1 B to 4 GiB: every rule boundary of interest
// for gradients lies on (or is reported between) these points.
constexpr int kMaxLog2Bytes = 32;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "(none)" : out;
}

}  // namespace

int runAlgorithms(Communicator& comm) {
  if (comm.rank() == 0) {
    std::printf("# %d rank%s; selection depends on the world size and on BOOSTCOMM_ALGO / BOOSTCOMM_SELECTION\n",
                comm.size(), comm.size() == 1 ? "" : "s");
    for (const char* env : {core::kTunableAlgo, core::kTunableSelectionTable}) {
      if (const char* v = std::getenv(env); v != nullptr) std::printf("# %s='%s' is set\n", env, v);
    }
    for (Collective coll : kSwept) {
      std::printf("\n%s\n  available: %s\n  selection:\n", std::string(toString(coll)).c_str(),
                  joined(comm.algorithms(coll)).c_str());
      // Collapse the sweep into ranges of sizes with the same choice.
      std::vector<std::size_t> sizes{0};
      for (int e = 0; e <= kMaxLog2Bytes; ++e) sizes.push_back(std::size_t{1} << e);
      std::size_t first = 0;
      std::string current = comm.selectedAlgorithm(coll, 0);
      for (std::size_t i = 1; i <= sizes.size(); ++i) {
        const std::string next = i < sizes.size() ? comm.selectedAlgorithm(coll, sizes[i]) : std::string();
        if (i < sizes.size() && next == current) continue;
        const std::string upper = i < sizes.size() ? formatBytes(sizes[i - 1]) : formatBytes(sizes[i - 1]) + "+";
        std::printf("    %8s .. %-8s  %s\n", formatBytes(sizes[first]).c_str(), upper.c_str(), current.c_str());
        first = i;
        current = next;
      }
    }
  }
  comm.finalize();
  return 0;
}

}  // namespace boostcomm::tools
