// CallRecord: what every route records of a call and checks around it
// (docs/RELIABILITY.md, "Who owns each mechanism").
//
//   recorded  the caller's stack, the started entry of this rank's call
//             status (its fingerprint, read by node peers and the watchdog),
//             the blocking flag, the ended entry; a call this rank's checks
//             rejected;
//   checked   after a backend call returned: the node peers' entries of it
//             (verifyReturned); the small broadcasts this rank rooted, whose
//             receivers it never read (the pending-root check); a node
//             peer's failed mark on the current call; a backend error in a
//             call a peer made differently, named as the mismatch it is.
//
// The routes (api/route.h): kDirect and kSmall begin and end a call here
// (CommunicatorImpl::runWithoutSchedule); kEngine begins it here (launch) and
// the progress engine ends it when its schedule completes (the same
// CallStatus::recordEnd). The checks a route carries in its data (a
// schedule's fingerprint headers, the small slots' fingerprints, the stamp of
// a checked allreduce) are the executor's, the shm engine's and the
// transport's.
#pragma once

#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "core/call_status.h"
#include "watch/stall_inspector.h"

namespace boostcomm::executor {
class ProgressEngine;
}

namespace boostcomm::detail {

class CallRecord {
 public:
  // `status`: this rank's entry (in the node's shm segment where there is
  // one); `nodeStatus`: every node peer's there, else empty. `fingerprints`:
  // BOOSTCOMM_FINGERPRINTS (the checks above; the entries are written always).
  void configure(int rank, core::CallStatus* status, std::vector<core::CallStatus*> nodeStatus,
                 StallInspector* inspector, executor::ProgressEngine* engine, bool fingerprints) {
    rank_ = rank;
    status_ = status;
    nodeStatus_ = std::move(nodeStatus);
    inspector_ = inspector;
    engine_ = engine;
    fingerprints_ = fingerprints;
  }
  bool fingerprints() const { return fingerprints_; }
  core::CallStatus* status() const { return status_; }
  // Empty where node peers' status is unreadable (several nodes, shm off).
  const std::vector<core::CallStatus*>& nodeStatus() const { return nodeStatus_; }

  // Before call `next` starts (launch, runWithoutSchedule): the pending-root check,
  // in full, except for a further small broadcast this rank roots
  // (`rootsAgain`), which checks only once kRootPendingBatch are pending.
  void beforeCall(std::uint64_t next, bool rootsAgain = false) {
    if (rootPendingFrom_ == 0) [[likely]] return;
    if (!rootsAgain) {
      verifyPendingRoot(next);
    } else if (next + 1 - rootPendingFrom_ >= kRootPendingBatch) {
      verifyPendingRoot(next, /*complete=*/false);
    }
  }
  // Call `seq` starts: the caller's stack (core/caller_stack.h) and the
  // started entry; `blocking`: the rank is about to block inside a backend
  // call (the watchdog's cue; cleared by a Blocking guard).
  void start(std::uint64_t seq, const core::Fingerprint& fingerprint, const char* algorithm, std::uint32_t wire,
             bool blocking) {
    inspector_->callers().bind(seq);
    status_->recordStart(seq, fingerprint, algorithm, wire);
    if (blocking) status_->blocking.store(1, std::memory_order_relaxed);
  }
  // Call `seq` ended on this rank (kDirect, kSmall; kEngine: the progress engine).
  void end(std::uint64_t seq) { status_->recordEnd(seq); }
  // Call `seq` was rejected by this rank's own argument checks: its entry
  // says so, for peers that wait in it (core/call_status.h).
  void rejected(std::uint64_t seq, const core::Fingerprint& fingerprint) {
    inspector_->callers().bind(seq);
    status_->recordRejected(seq, fingerprint);
  }
  // Clears the blocking flag however the call ends.
  struct Blocking {
    core::CallStatus* status;
    ~Blocking() { status->blocking.store(0, std::memory_order_release); }
  };
  Blocking blockingGuard() const { return Blocking{status_}; }

  // Where the post-return check will read node peers' entries of `seq`:
  // starts fetching them, so the line transfers overlap the call.
  void prefetch(std::uint64_t seq) const {
    if (fingerprints_) inspector_->prefetchPeers(seq);
  }
  // After a backend call `seq` returned on this rank: Error{kMismatch} (the
  // engine failed) if a node peer made another call, so a wrong result is
  // never returned (StallInspector::verifyReturned).
  void verifyReturned(std::uint64_t seq,
                      const char* seen = "seen when the backend call returned; its result is not valid");
  // Call `seq` failed with `error`: marks it failed for node peers
  // (`markFailed`: a small call, which peers may complete later and must not
  // return normally), fails the engine and throws `error`; a backend error
  // (not already a mismatch) in a call a node peer made differently is
  // raised as that mismatch instead, naming both sides, with the backend's
  // words after it.
  [[noreturn]] void failed(std::uint64_t seq, bool markFailed, std::exception_ptr error);
  // Error{kTimeout} if a node peer marked call `seq` failed
  // (CallStatus::failed): a small collective must not succeed here then.
  void raiseIfPeerFailed(std::uint64_t seq, Collective collective) const;

  // Call `seq`, a small broadcast this rank rooted, read no slot: its
  // receivers' entries are compared later (beforeCall, finish).
  void rootedSmallBroadcast(std::uint64_t seq) {
    if (fingerprints_ && rootPendingFrom_ == 0) rootPendingFrom_ = seq + 1;
  }
  // At finalize (`next`: the calls issued): every pending root check.
  void finish(std::uint64_t next) {
    if (rootPendingFrom_ != 0) verifyPendingRoot(next);
  }

 private:
  // The small broadcasts this rank rooted in [rootPendingFrom_ - 1, next):
  // all of them (`complete`), or those its receivers have reached.
  void verifyPendingRoot(std::uint64_t next, bool complete = true);

  int rank_ = 0;
  core::CallStatus* status_ = nullptr;
  std::vector<core::CallStatus*> nodeStatus_;
  StallInspector* inspector_ = nullptr;
  executor::ProgressEngine* engine_ = nullptr;
  bool fingerprints_ = true;
  // sequence + 1 of the first of the small broadcasts this rank rooted
  // whose receivers' fingerprints are not compared yet (0: none); every
  // call from it on is one.
  std::uint64_t rootPendingFrom_ = 0;
  // 32: a check per 8 calls cost a broadcast root 2-4% at 8 B-1 KiB (its
  // reads of the receivers' lines, 2 ranks), per 32 calls under 2%
  // (docs/PERFORMANCE_HISTORY.md 24). Well inside the flight ring (256 calls).
  static constexpr std::uint64_t kRootPendingBatch = 32;
};

}  // namespace boostcomm::detail
