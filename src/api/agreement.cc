#include "api/agreement.h"

#include <sstream>
#include <thread>
#include <vector>

#include "core/check.h"
#include "transport/transport.h"

namespace boostcomm::detail {

namespace {

// The allgatherv layout of `fields` words per rank.
struct WordLayout {
  WordLayout(int size, int fields) : counts(static_cast<std::size_t>(size), fields), displs(counts.size()) {
    for (int i = 0; i < size; ++i) displs[static_cast<std::size_t>(i)] = i * fields;
  }
  std::vector<int> counts;
  std::vector<int> displs;
};

}  // namespace

std::vector<long long> gatherWords(transport::Transport& transport, const long long* mine, int fields) {
  BC_INTERNAL(fields > 0, "gatherWords of " << fields << " fields");
  const WordLayout layout(transport.size(), fields);
  std::vector<long long> all(static_cast<std::size_t>(fields * transport.size()));
  transport.nativeAllgatherv(mine, static_cast<std::size_t>(fields), all.data(), layout.counts.data(),
                             layout.displs.data(), DataType::kInt64, nullptr);
  return all;
}

std::optional<std::vector<long long>> gatherWordsPosted(transport::Transport& transport, const long long* mine,
                                                        int fields, std::optional<std::chrono::milliseconds> deadline) {
  BC_INTERNAL(fields > 0, "gatherWordsPosted of " << fields << " fields");
  const WordLayout layout(transport.size(), fields);
  std::vector<long long> all(static_cast<std::size_t>(fields * transport.size()));
  transport::Request req;
  transport.nativeAllgatherv(mine, static_cast<std::size_t>(fields), all.data(), layout.counts.data(),
                             layout.displs.data(), DataType::kInt64, &req);
  const auto start = std::chrono::steady_clock::now();
  for (unsigned polls = 0; !transport.test(req); ++polls) {
    if (polls > 1000) std::this_thread::yield();
    if (deadline && std::chrono::steady_clock::now() - start > *deadline) return std::nullopt;
  }
  return all;
}

int firstDifferentRank(const std::vector<long long>& all, const long long* mine, int fields) {
  BC_INTERNAL(fields > 0, "firstDifferentRank of " << fields << " fields");
  const int size = static_cast<int>(all.size()) / fields;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < fields; ++i) {
      if (all[static_cast<std::size_t>(r * fields + i)] != mine[i]) return r;
    }
  }
  return -1;
}

void agreeAcrossRanks(Communicator& comm, std::uint64_t signature, const std::string& localError, const char* what) {
  // Two int64 per rank: the signature and a local-error flag. One small
  // allgather, so a rank with bad input fails together with the others
  // instead of leaving them waiting in the first data collective.
  const int size = comm.size();
  const std::int64_t mine[2] = {static_cast<std::int64_t>(signature), localError.empty() ? 0 : 1};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size));
  comm.allgather(ConstView(mine, 2, DataType::kInt64), View(all.data(), all.size(), DataType::kInt64));
  BC_INVALID(localError.empty(), comm.rank(), what << ": " << localError);
  std::ostringstream bad;
  int badCount = 0;
  for (int r = 0; r < size; ++r)
    if (all[2 * static_cast<std::size_t>(r) + 1] != 0) bad << (badCount++ ? ", " : "") << r;
  BC_INVALID(badCount == 0, comm.rank(), what << ": invalid input on rank(s) " << bad.str() << " (see their error)");
  std::ostringstream differ;
  int differCount = 0;
  for (int r = 1; r < size; ++r)
    if (all[2 * static_cast<std::size_t>(r)] != all[0]) differ << (differCount++ ? ", " : "") << r;
  BC_CHECK(differCount == 0, ErrorCategory::kMismatch, comm.rank(),
           what << ": ranks passed different inputs (counts, dtypes, order or options): rank(s) " << differ.str()
                << " differ from rank 0");
}

}  // namespace boostcomm::detail
