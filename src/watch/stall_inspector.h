// StallInspector: what one communicator knows about a wait that takes long.
//
// It reads the call status (core/call_status.h) of this rank and of every
// peer whose status it can see — the ranks of a shared-memory node
// communicator, through the engine segment; ranks on other nodes through
// the control channel (watch/control_channel.h, MPI communicators only): a
// call that waits longer than queryAfterMs() asks them for their status and
// keeps the answers in mirrors, read like a node peer's status — and
// answers three questions:
//   - mismatch(): do two ranks disagree on a call they both started? (the
//     always-on fingerprint check for calls whose data path cannot carry it:
//     native backend collectives, point-to-point schedules);
//   - report(): which ranks have not reached the call this rank waits in, and
//     what they last started and completed (the stall warning and the
//     timeout error both carry it);
//   - tick(): the watchdog's periodic look (watch/watchdog.h): one warning at
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
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/call_status.h"
#include "core/caller_stack.h"
#include "executor/progress_engine.h"
#include "transport/pending_messages.h"

namespace boostcomm::detail {

class ControlChannel;  // watch/control_channel.h
struct ControlMessage;

class StallInspector final : public executor::WaitMonitor {
 public:
  // peers[r]: rank r's status, null where not visible (own rank: `own`).
  StallInspector(int rank, core::CallStatus* own, std::vector<core::CallStatus*> peers, std::int64_t warnMs,
                 std::int64_t deadlineMs);
  ~StallInspector() override;

  // How the watchdog's deadline ends the job after its report, before this
  // process aborts (the communicator's Transport::abortJob: MPI_Abort where
  // MPI runs). Set once, before the inspector is watched.
  void setJobEnd(std::function<void()> end) { jobEnd_ = std::move(end); }

  // WaitMonitor (the waiting caller, engine lock held).
  void check(std::chrono::steady_clock::duration waited) override;
  std::string report() override;
  // A mismatch this rank saw is sent to every rank over the channel.
  void failed(const std::exception_ptr& error) override;

  // The side channel to the ranks of a `worldSize` communicator that peers
  // (constructor) does not show. Before watch(); closeChannel() before MPI
  // is finalized (sends a pending notice first).
  void attachChannel(std::unique_ptr<ControlChannel> channel, int worldSize);
  void closeChannel();
  bool hasChannel() const { return channelSize_ > 0; }
  // How long a call waits before the ranks on other nodes are asked.
  std::int64_t queryAfterMs() const;

  // The first disagreement among calls [fromSeq, toSeq) this rank started,
  // in words; empty if none is visible.
  std::string mismatch(std::uint64_t fromSeq, std::uint64_t toSeq) const;
  // After a blocking backend call `seq` returned on this rank: its node
  // peers' fingerprints of that call, compared with ours; the mismatch in
  // words, or empty. A peer publishes its fingerprint before it enters the
  // backend call, and our call could not return before every peer it
  // depends on had entered (every rank, for a reduction or a barrier; the
  // root, for a broadcast), so those fingerprints are already in shared
  // memory: the check is a few loads per peer, and no message. A broadcast
  // root depends on nobody: it waits for its peers' fingerprints at most
  // kRootWaitUs (a peer that is later than that is left to the watchdog).
  std::string verifyReturned(std::uint64_t seq) const;
  // How far every node peer's calls are known to equal this rank's, up to
  // call `last`: each peer's latest started call q, checked by its digest
  // of every call through q (FlightEntry::digest): one line per peer, and
  // no wait for a peer that is behind, unless it has not started call
  // `least` (waited for at most kRootWaitUs). Returns the smallest such
  // q + 1 over the peers, or 0 where a digest differs or a peer stayed
  // behind `least`: verifyReturned, call by call, then says which.
  std::uint64_t agreedThrough(std::uint64_t least, std::uint64_t last) const;
  // Starts fetching the node peers' entries of call `seq` into this core's
  // cache, so verifyReturned finds them there (a peer's entry is a cache
  // line transfer, ~0.15 us on these VMs, otherwise paid after the call).
  void prefetchPeers(std::uint64_t seq) const {
    for (const core::CallStatus* peer : peers_) {
      if (peer != nullptr && peer != own_) __builtin_prefetch(&peer->ring[seq % core::kFlightRingEntries]);
    }
  }
  static constexpr std::int64_t kRootWaitUs = 20000;
  static constexpr std::chrono::seconds kAuditRetry{5};
  static constexpr std::chrono::seconds kAuditBackoff{1};
  // The watchdog thread (one caller at a time).
  void tick(std::chrono::steady_clock::time_point now);
  // Set by the watchdog; raised by the next call (cheap to test).
  bool poisoned() const { return poisoned_.load(std::memory_order_relaxed); }
  // Communicator::abort(): a waiting caller leaves its wait with
  // Error{kAborted} at its next check (within microseconds).
  void abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // A node peer's process exited (the watchdog probes their pids while this
  // rank waits): waits raise Error{kTransport} naming it, and so do later calls.
  bool peerExited() const { return peerExited_.load(std::memory_order_acquire); }
  std::string peerExitedMessage() const;
  // Poisoned, aborted or a peer gone: the call path's one test.
  bool unusable() const { return poisoned() || aborted() || peerExited(); }
  std::string poisonMessage() const;
  void setDeadlineMs(std::int64_t ms) { deadlineMs_.store(ms, std::memory_order_relaxed); }
  std::int64_t warnMs() const { return warnMs_; }
  std::int64_t deadlineMs() const { return deadlineMs_.load(std::memory_order_relaxed); }
  int rank() const { return rank_; }
  // The flight recorder as JSON (this rank's ring and counters; `reason`:
  // why it is written, null on demand).
  std::string flightJson(const char* reason = nullptr) const;
  // Writes the flight record (with reason and dump number) to a new file in
  // $BOOSTCOMM_TRACE_DIR if set; returns the path written, or empty.
  //
  // Dump files. A dump never replaces an earlier one of the same process:
  // the first that explains a failure (a stall at the moment a peer was
  // missing) is often followed by less telling ones (the same call dumped
  // again when the stopped peer, resumed, exited: by then it had started
  // the call too), and `boostcomm trace analyze` reads them all and picks.
  // Dump k of this communicator goes to rank-<rank>.json (k = 1) or
  // rank-<rank>.<k>.json (k = 2 .. kFlightDumpsKept); beyond that each dump
  // replaces rank-<rank>.<kFlightDumpsKept>.json, so a long job that stalls
  // now and then keeps its first dumps and its latest, and a bounded number
  // of files. The JSON's "dump" field holds k (also past the cap).
  std::string dumpFlight(const char* reason) const;
  // The same with the transports' messages already read (one snapshot for a
  // warning and its dump).
  std::string dumpFlight(const char* reason, const std::vector<transport::PendingMessage>& pending) const;
  static constexpr std::uint64_t kFlightDumpsKept = 8;
  // The same from a signal handler (watch/flight_signals.h): async-signal-safe,
  // into `buffer`, to the next dump's path (from the prefix that
  // prepareSignalDump() formatted beforehand).
  void dumpFlightFromSignal(const char* reason, char* buffer, std::size_t capacity) const;
  void prepareSignalDump();
  // Bytes the JSON can take (entries, peers, callers' stacks).
  std::size_t flightCapacity() const;
  // Callers' stacks of this rank's calls, parallel to own_'s ring (process-local).
  core::CallerRing& callers() { return callers_; }

 private:
  // withCallers: each entry's "python_stack" (not from a signal handler:
  // formatting callers' stacks is not async-signal-safe).
  // dump: the dump's number k (0: not a dump, no "dump" field).
  void writeFlight(core::FixedWriter& w, const char* reason, std::uint64_t dump, bool withCallers) const;
  // "<dir>/rank-<rank>" + the suffix of dump k (".json", ".<k>.json", capped).
  static void putDumpSuffix(core::FixedWriter& w, std::uint64_t dump);
  void poison(const std::string& message);
  // The watchdog's liveness probe of node peers (while this rank waits):
  // true, with the words, once a peer's process is gone or a zombie.
  bool findExitedPeer(std::string& message) const;
  // tick()'s three looks: notices, audits and fingerprints (mismatches);
  // node peers that exited while a call waits; how long the current wait
  // has lasted (remote queries, the warning, the blocking deadline).
  void checkFingerprints(std::uint64_t started, std::uint64_t completed, bool blocking,
                         std::chrono::steady_clock::time_point now);
  void checkPeersAlive(std::uint64_t started, std::uint64_t completed, bool blocking);
  void checkWait(std::uint64_t started, std::uint64_t completed, bool blocking, std::chrono::steady_clock::time_point now);
  // The watchdog's side of the channel (channelMutex_ held): answers
  // queries, takes statuses into mirrors, takes notices; sends a pending
  // notice. True when a status arrived; a notice lands in noticeReceived_.
  bool pollChannel();
  void queryRemotes(std::uint64_t waitingSeq);
  // The cross-node audit (watch/control_channel.h): sends auditPeer_ the
  // fingerprints of this rank's completed calls from auditedUpTo_ on
  // (channelMutex_ held); answerAudit compares a peer's with ours.
  void sendAudit(std::uint64_t completed);
  void answerAudit(const ControlMessage& m);
  void sendNotice(const std::string& text);
  // What this rank can see of rank r: its shm status, an answered mirror, or null.
  const core::CallStatus* statusOf(std::size_t r) const;
  std::size_t worldSize() const { return channelSize_ > 0 ? static_cast<std::size_t>(channelSize_) : peers_.size(); }
  // A mismatch seen with a peer or mirror, or told by a notice: poison, say
  // so, tell everyone (tellOthers), and end the job if this rank is inside a
  // blocking backend call. channelMutex_ not held.
  void onMismatch(const std::string& m, bool blocking, bool tellOthers);
  [[noreturn]] void terminate(const std::string& message);
  // True if this rank is still inside the same blocking backend call after `grace`.
  bool stillBlocking(std::chrono::milliseconds grace) const;

  const int rank_;
  core::CallStatus* const own_;
  core::CallerRing callers_;
  const std::vector<core::CallStatus*> peers_;
  const std::int64_t warnMs_;
  std::atomic<std::int64_t> deadlineMs_;

  // Watchdog state (tick only).
  std::uint64_t seenStarted_ = 0;
  std::uint64_t seenCompleted_ = 0;
  std::chrono::steady_clock::time_point since_{};
  bool warned_ = false;
  std::uint64_t checkedUpTo_ = 0;  // calls below this compared with every visible peer

  // The channel (watchdog thread; closeChannel/failed under the mutex).
  std::mutex channelMutex_;
  std::unique_ptr<ControlChannel> channel_;
  std::function<void()> jobEnd_;  // setJobEnd
  int channelSize_ = 0;
  std::string pendingNotice_;   // a mismatch this rank saw, to tell everyone
  std::string noticeReceived_;  // a mismatch another rank told us about
  // Per rank: the last answer of a rank shm does not show (pid 0: none yet).
  std::vector<std::unique_ptr<core::CallStatus>> mirrors_;
  std::atomic<bool> queried_{false};  // this stall's query went out
  // The audit: every tick, the calls this rank completed since the last
  // answer go to the next rank whose status this rank cannot see, which
  // compares them (so the checks chain every rank).
  int auditPeer_ = -1;
  std::uint64_t auditedUpTo_ = 0;  // calls below this were compared by auditPeer_ (or fell out of the ring)
  // When the next audit may go: kAuditRetry after a send (one in flight; a
  // peer that never answers is asked again), at once after an answer that
  // made progress, kAuditBackoff after one that did not.
  std::chrono::steady_clock::time_point auditNextAt_{};
  std::string auditMismatch_;  // what answerAudit found, raised by tick

  // When this communicator was created (wall ns): with the pid, tells a
  // dump of this communicator from one of an earlier job in the same
  // directory (pids repeat, across containers above all).
  const std::uint64_t createdNs_;
  char signalPrefix_[512] = {};  // "<dir>/rank-<rank>" for the signal handler ("" none)
  mutable std::atomic<std::uint64_t> dumps_{0};  // dumps written or begun (lock-free: signal handlers take one)

  std::atomic<bool> poisoned_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> peerExited_{false};
  std::string peerExitedMessage_;  // under poisonMutex_
  mutable std::mutex poisonMutex_;
  std::string poisonMessage_;
};

}  // namespace boostcomm::detail
