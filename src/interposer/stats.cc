#include "interposer/stats.h"

#include <cstdio>
#include <vector>

#include "transport/mpi/mpi_c.h"

namespace boostcomm::interposer {

std::string_view callName(Call call) {
  static constexpr std::string_view kNames[kNumCalls] = {
      "allreduce",  "bcast",  "allgather",  "allgatherv",  "reduce_scatter_block",  "reduce_scatter",  "barrier",
      "iallreduce", "ibcast", "iallgather", "iallgatherv", "ireduce_scatter_block", "ireduce_scatter", "ibarrier"};
  return kNames[static_cast<std::size_t>(call)];
}

bool isNonblocking(Call call) { return static_cast<int>(call) >= static_cast<int>(Call::kIallreduce); }

std::string_view reasonText(Reason reason) {
  static constexpr std::string_view kText[kNumReasons] = {
      "routed",
      "disabled by BOOSTCOMM_MPI_INTERPOSE",
      "MPI not initialized or finalizing",
      "MPI_COMM_NULL",
      "intercommunicator",
      "single-rank communicator",
      "boostcomm communicator setup failed",
      "communicator not set up, none reserved at its creation",
      "thread level below MPI_THREAD_MULTIPLE (or BOOSTCOMM_PROGRESS=caller)",
      "datatype not reduced by boostcomm",
      "op not supported (user op or logical/loc op)",
      "below BOOSTCOMM_MPI_MIN_BYTES",
      "unequal recvcounts",
      "invalid arguments (PMPI reports them)",
      "selection: native",
  };
  return kText[static_cast<std::size_t>(reason)];
}

namespace {
thread_local int t_lastReason = -1;
}

void setLastReason(Reason reason) { t_lastReason = static_cast<int>(reason); }

Stats& stats() {
  static Stats instance;
  return instance;
}

void Stats::reduceAndPrint() const {
  // One flat array per kind: counts summed over ranks, times maxed.
  std::vector<unsigned long long> calls, ns;
  for (const Row& row : rows_) {
    for (const auto& c : row.calls) calls.push_back(c.load(std::memory_order_relaxed));
    for (const auto& t : row.ns) ns.push_back(t.load(std::memory_order_relaxed));
  }
  std::vector<unsigned long long> callsSum(calls.size()), nsMax(ns.size());
  PMPI_Reduce(calls.data(), callsSum.data(), static_cast<int>(calls.size()), MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  PMPI_Reduce(ns.data(), nsMax.data(), static_cast<int>(ns.size()), MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0,
              MPI_COMM_WORLD);
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) return;
  std::fprintf(stderr, "boostcomm_mpi: calls summed over %d ranks, time of the slowest rank; native: boostcomm's "
               "selection picked MPI's own algorithm, called directly\n", size);
  std::fprintf(stderr, "boostcomm_mpi: %-22s %9s %11s %9s %11s %9s %11s  fell-through reasons\n", "collective", "routed",
               "routed ms", "native", "native ms", "fell", "fell ms");
  const auto native = static_cast<std::size_t>(Reason::kNative);
  for (int c = 0; c < kNumCalls; ++c) {
    const unsigned long long* row = &callsSum[static_cast<std::size_t>(c) * kNumReasons];
    double ms[3];  // routed, native, fell through
    for (int k = 0; k < 3; ++k) ms[k] = static_cast<double>(nsMax[static_cast<std::size_t>(c) * 3 + k]) / 1e6;
    unsigned long long fell = 0;
    for (std::size_t r = 1; r < native; ++r) fell += row[r];
    if (row[0] == 0 && row[native] == 0 && fell == 0) continue;
    std::fprintf(stderr, "boostcomm_mpi: %-22s %9llu %11.3f %9llu %11.3f %9llu %11.3f ",
                 std::string(callName(static_cast<Call>(c))).c_str(), row[0], ms[0], row[native], ms[1], fell, ms[2]);
    for (std::size_t r = 1; r < native; ++r) {
      if (row[r] > 0) std::fprintf(stderr, " [%llu: %s]", row[r], std::string(reasonText(static_cast<Reason>(r))).c_str());
    }
    std::fprintf(stderr, "\n");
  }
}

}  // namespace boostcomm::interposer

extern "C" __attribute__((visibility("default"))) int boostcomm_mpi_last_reason(void) { return boostcomm::interposer::t_lastReason; }
