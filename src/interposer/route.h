// The decision every intercepted call makes, in one place, and the timing
// around it. A call goes to PMPI unchanged when the guard is active (it is
// boostcomm's own), on a communicator marked internal, or for one of the
// Reasons in stats.h; every one of those is the same on every rank.
#pragma once

#include <chrono>
#include <cstdint>

#include "interposer/state.h"
#include "interposer/stats.h"

namespace boostcomm::interposer {

// Times a call when BOOSTCOMM_MPI_STATS is on, and records its outcome.
// active() first: the settings are read on the first call that finds MPI
// initialized, which would otherwise leave that call itself uncounted.
class CallTimer {
 public:
  explicit CallTimer(Call call) : call_(call), on_(active() && settings().stats) {
    if (on_) start_ = std::chrono::steady_clock::now();
  }
  void done(Reason reason) {
    setLastReason(reason);
    if (!on_) return;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
    stats().record(call_, reason, static_cast<std::uint64_t>(ns.count()));
  }

 private:
  Call call_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

// The communicator-level decision. Returns the routed entry, or null with
// `reason` set (kRouted and null: boostcomm's own call, not counted).
inline CommEntry* routeComm(Call call, MPI_Comm comm, bool blocking, Reason& reason) {
  reason = Reason::kRouted;
  if (Guard::active()) return nullptr;
  if (!active()) {
    reason = Reason::kNotActive;
    return nullptr;
  }
  if (!settings().enabled[static_cast<std::size_t>(call)]) {
    reason = Reason::kDisabled;
    return nullptr;
  }
  if (comm == MPI_COMM_NULL) {
    reason = Reason::kNullComm;
    return nullptr;
  }
  CommEntry* entry = blocking ? &entryForBlocking(comm) : entryForNonblocking(comm);
  if (entry == nullptr) {
    // Nonblocking, and not set up: no reservation (or none possible below
    // MPI_THREAD_MULTIPLE); a blocking call will set it up.
    reason = settings().nonblocking ? Reason::kNotSeen : Reason::kThreadLevel;
    return nullptr;
  }
  if (entry->kind == CommKind::kInternal) return nullptr;
  if (entry->kind == CommKind::kUnroutable) {
    reason = entry->reason;
    return nullptr;
  }
  if (!blocking && !settings().nonblocking) {
    reason = Reason::kThreadLevel;
    return nullptr;
  }
  return entry;
}

// The PMPI call of a call not routed; `counted`: the application's (not
// boostcomm's own call on an internal communicator), so its reason is recorded.
template <typename Pmpi>
int passThrough(CallTimer& timer, bool counted, Reason reason, Pmpi pmpi) {
  const int rc = pmpi();
  if (counted || reason != Reason::kRouted) timer.done(reason);
  return rc;
}

}  // namespace boostcomm::interposer
