#include "watch/call_record.h"

#include <exception>
#include <string>

#include "core/check.h"
#include "executor/progress_engine.h"

namespace boostcomm::detail {

void CallRecord::verifyReturned(std::uint64_t seq, const char* seen) {
  if (!fingerprints_) return;
  const std::string mismatch = inspector_->verifyReturned(seq);
  if (mismatch.empty()) return;
  inspector_->dumpFlight("mismatch");
  const Error named(ErrorCategory::kMismatch, rank_, mismatch + " (" + seen + ")");
  engine_->fail(std::make_exception_ptr(named));
  throw named;
}

void CallRecord::failed(std::uint64_t seq, bool markFailed, std::exception_ptr error) {
  // Peers that complete this small call later must not return it normally.
  if (markFailed) status_->failed.store(seq + 1, std::memory_order_release);
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // A backend error in a call a peer made differently (a truncation when
    // its count is smaller): the mismatch is the cause, so say that, naming
    // both sides, with the backend's words after it. (A mismatch found by
    // the small allreduce or the watchdog already says so.)
    const std::string mismatch =
        e.category() == ErrorCategory::kMismatch ? std::string() : inspector_->mismatch(seq, seq + 1);
    if (mismatch.empty()) {
      engine_->fail(std::current_exception());
      throw;
    }
    const Error named(ErrorCategory::kMismatch, rank_, mismatch + " (the backend reported: " + e.detail() + ")");
    engine_->fail(std::make_exception_ptr(named));
    throw named;
  } catch (...) {
    engine_->fail(std::current_exception());
    throw;
  }
}

void CallRecord::raiseIfPeerFailed(std::uint64_t seq, Collective collective) const {
  for (std::size_t r = 0; r < nodeStatus_.size(); ++r) {
    const core::CallStatus* peer = nodeStatus_[r];
    if (peer == nullptr || peer == status_ || peer->failed.load(std::memory_order_acquire) != seq + 1) continue;
    core::raise(ErrorCategory::kTimeout, rank_,
                std::string(toString(collective)) + " (seq " + std::to_string(seq) + ") failed on rank " +
                    std::to_string(r) +
                    " before this rank completed it (its deadline passed, or it was aborted): the call failed");
  }
}

void CallRecord::verifyPendingRoot(std::uint64_t next, bool complete) {
  // The root of small broadcasts [from, next) returned without reading
  // anything; its receivers published their fingerprints before they read
  // its entries, and by now (kRootPendingBatch calls later, or its next
  // other call) they have usually done so. Those later than
  // StallInspector::kRootWaitUs are left to the watchdog, which compares
  // every call all ranks started. Ranks that disagreed on the root all took
  // themselves for it: each finds the other here. Their entries are found
  // by sequence (shm/small_collective.cc), so no later call can take the
  // data of a call the ranks disagreed on.
  // A batch costs one line per peer: its digest of every call through its
  // latest one (StallInspector::agreedThrough). Calls a receiver has not
  // reached stay pending, unless `complete`: a root that waited for its
  // receivers to catch up would lose the lead the ring gives it. Only
  // where a digest differs (or a receiver is far behind) are the calls
  // checked one by one, to name the call.
  const std::uint64_t from = rootPendingFrom_ - 1;
  const std::uint64_t last = next - 1;
  const std::uint64_t agreed = inspector_->agreedThrough(complete ? last : from, last);
  if (agreed != 0) {
    rootPendingFrom_ = agreed > last ? 0 : agreed + 1;
    return;
  }
  rootPendingFrom_ = 0;
  for (std::uint64_t seq = from; seq < next; ++seq) inspector_->prefetchPeers(seq);
  for (std::uint64_t seq = from; seq < next; ++seq) {
    verifyReturned(seq, "seen by the broadcast's root when it checked its receivers, calls later");
  }
}

}  // namespace boostcomm::detail
