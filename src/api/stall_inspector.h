// StallInspector: what one communicator knows about a wait that takes long.
//
// It reads the call status (core/call_status.h) of this rank and of every
// peer whose status it can see — the ranks of a shared-memory node
// communicator, through the engine segment; none otherwise (ranks on other
// nodes are not visible: there is no side channel across nodes yet) — and
// answers three questions:
//   - mismatch(): do two ranks disagree on a call they both started? (the
//     always-on fingerprint check for calls whose data path cannot carry it:
//     native backend collectives, point-to-point schedules);
//   - report(): which ranks have not reached the call this rank waits in, and
//     what they last started and completed (the stall warning and the
//     timeout error both carry it);
//   - tick(): the watchdog's periodic look (api/watchdog.h): one warning at
//     the warning threshold, and, for a rank stuck inside a blocking backend
//     call (which cannot return an error), the error and the end of the
//     process at the deadline, or as soon as a mismatch is seen.
// A mismatch seen by the watchdog after the calls completed (a backend that
// returned with mismatched counts) poisons the communicator: its next call
// raises Error{kMismatch} with the same words.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/call_status.h"
#include "executor/progress_engine.h"

namespace boostcomm::detail {

class StallInspector final : public executor::WaitMonitor {
 public:
  // peers[r]: rank r's status, null where not visible (own rank: `own`).
  StallInspector(int rank, core::CallStatus* own, std::vector<core::CallStatus*> peers, std::int64_t warnMs,
                 std::int64_t deadlineMs);

  // WaitMonitor (the waiting caller, engine lock held).
  void check(std::chrono::steady_clock::duration waited) override;
  std::string report() override;

  // The first disagreement among calls [fromSeq, toSeq) this rank started,
  // in words; empty if none is visible.
  std::string mismatch(std::uint64_t fromSeq, std::uint64_t toSeq) const;
  // The watchdog thread (one caller at a time).
  void tick(std::chrono::steady_clock::time_point now);
  // Set by the watchdog; raised by the next call (cheap to test).
  bool poisoned() const { return poisoned_.load(std::memory_order_relaxed); }
  // Communicator::abort(): a waiting caller leaves its wait with
  // Error{kFinalized} at its next check (within microseconds).
  void abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // Poisoned or aborted: the call path's one test.
  bool unusable() const { return poisoned() || aborted(); }
  std::string poisonMessage() const;
  void setDeadlineMs(std::int64_t ms) { deadlineMs_.store(ms, std::memory_order_relaxed); }
  std::int64_t warnMs() const { return warnMs_; }
  std::int64_t deadlineMs() const { return deadlineMs_.load(std::memory_order_relaxed); }
  int rank() const { return rank_; }
  // The flight recorder as JSON (this rank's ring and counters).
  std::string flightJson() const;
  // Writes flightJson() to $BOOSTCOMM_TRACE_DIR/rank-<rank>.json if set;
  // returns the path written, or empty.
  std::string dumpFlight(const char* reason) const;

 private:
  void poison(const std::string& message);
  [[noreturn]] void terminate(const std::string& message);

  const int rank_;
  core::CallStatus* const own_;
  const std::vector<core::CallStatus*> peers_;
  const std::int64_t warnMs_;
  std::atomic<std::int64_t> deadlineMs_;

  // Watchdog state (tick only).
  std::uint64_t seenStarted_ = 0;
  std::uint64_t seenCompleted_ = 0;
  std::chrono::steady_clock::time_point since_{};
  bool warned_ = false;
  std::uint64_t checkedUpTo_ = 0;  // calls below this compared with every visible peer

  std::atomic<bool> poisoned_{false};
  std::atomic<bool> aborted_{false};
  mutable std::mutex poisonMutex_;
  std::string poisonMessage_;
};

}  // namespace boostcomm::detail
