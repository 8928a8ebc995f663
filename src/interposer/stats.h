// What the interposer did: per intercepted MPI call, how many calls it routed
// through boostcomm, how many it handed to PMPI and why, and the time spent
// in each. Counted only with BOOSTCOMM_MPI_STATS=1 (the counters and the two
// clock reads would otherwise sit on every small call's path).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "boostcomm/mpi_interposer.h"

namespace boostcomm::interposer {

// The intercepted collectives, blocking then nonblocking, in one order.
enum class Call : std::uint8_t {
  kAllreduce, kBcast, kAllgather, kAllgatherv, kReduceScatterBlock, kReduceScatter, kBarrier,
  kIallreduce, kIbcast, kIallgather, kIallgatherv, kIreduceScatterBlock, kIreduceScatter, kIbarrier,
};
inline constexpr int kNumCalls = 14;
// "allreduce", "ibcast", ...: the names BOOSTCOMM_MPI_INTERPOSE takes.
std::string_view callName(Call call);
bool isNonblocking(Call call);

// Why a call went to PMPI unchanged. Every reason is decided from arguments
// that MPI requires to be the same on every rank (or from the communicator),
// so all ranks of a collective take the same path (docs/MPI_INTERPOSER.md).
enum class Reason : std::uint8_t {
  kRouted,          // not a fall-through
  kDisabled,        // BOOSTCOMM_MPI_INTERPOSE leaves this collective out
  kNotActive,       // before MPI_Init or after MPI_Finalize began
  kNullComm,        // MPI_COMM_NULL: PMPI reports the error
  kIntercomm,       // intercommunicator
  kSingleRank,      // a communicator of one rank (nothing to accelerate)
  kCreateFailed,    // boostcomm could not set up a communicator over it
  kNotSeen,         // nonblocking call on a communicator not set up, none reserved at its creation
  kThreadLevel,     // nonblocking call below MPI_THREAD_MULTIPLE (needs the progress thread)
  kDatatype,        // a reduction over a type boostcomm does not reduce (derived, complex, pairs, ...)
  kOp,              // a user op or one boostcomm lacks (MPI_LAND, MPI_MAXLOC, ...)
  kSmall,           // below BOOSTCOMM_MPI_MIN_BYTES
  kCounts,          // MPI_Reduce_scatter with unequal recvcounts
  kArguments,       // arguments MPI would reject: PMPI reports the error
  kNative,          // boostcomm's selection picks MPI's own algorithm: PMPI called directly
};
inline constexpr int kNumReasons = 15;
static_assert(static_cast<int>(Reason::kArguments) == BOOSTCOMM_MPI_ARGUMENTS &&
                  static_cast<int>(Reason::kNotSeen) == BOOSTCOMM_MPI_NOT_SEEN &&
                  static_cast<int>(Reason::kNative) == BOOSTCOMM_MPI_NATIVE,
              "Reason and enum boostcomm_mpi_reason (include/boostcomm/mpi_interposer.h) must agree");
std::string_view reasonText(Reason reason);

// The outcome of this thread's last application call (boostcomm_mpi_last_reason).
void setLastReason(Reason reason);

class Stats {
 public:
  void record(Call call, Reason reason, std::uint64_t ns) {
    Row& row = rows_[static_cast<std::size_t>(call)];
    row.calls[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
    const std::size_t kind = reason == Reason::kRouted ? 0 : reason == Reason::kNative ? 1 : 2;
    row.ns[kind].fetch_add(ns, std::memory_order_relaxed);
  }
  // Collective over MPI_COMM_WORLD (sums over ranks, the slowest rank's
  // time); rank 0 prints the table on stderr. Called during MPI_Finalize.
  void reduceAndPrint() const;

 private:
  struct Row {
    std::array<std::atomic<std::uint64_t>, kNumReasons> calls{};
    std::array<std::atomic<std::uint64_t>, 3> ns{};  // routed, native, fell through
  };
  std::array<Row, kNumCalls> rows_{};
};

Stats& stats();

}  // namespace boostcomm::interposer
