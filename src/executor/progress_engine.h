// ProgressEngine: the one place where in-flight collectives advance.
//
// A communicator owns one engine. Every asynchronous or blocking call becomes
// an Operation (an Execution of a Schedule, its scratch lease and, for
// asynchronous calls, an OpState shared with the caller's Work handle). The
// engine progresses all operations in issue order, retires finished ones and
// completes their OpState, and runs completion callbacks.
//
// Who calls progress():
// - the caller, inside a blocking collective, Work::test/wait, or any other
//   call of the communicator (caller-driven progress, always on); and
// - optionally a progress thread (setThreadEnabled), which advances work while
//   no caller does, so Works complete and their callbacks fire while the
//   caller computes (the overlap engine and the c10d backend rely on it).
//
// Locking: one lock (mutex(), the owning communicator's) guards the engine
// and that communicator. Every member except the thread's own loop, setThreadEnabled and
// runCallbacks is called with it held. The thread only ever try_locks, so a
// caller driving a blocking call is never slowed by it; it backs off (spin,
// then yield, then sleeps that grow with the wait) while nothing advances,
// or, where everything in flight waits on transports that signal their
// completions (Transport::signalCompletions: Gloo's; the world and the
// splits given to signalFrom) or on shared-memory steps, whose peers ring
// this rank's doorbell (core/doorbell.h), sleeps until a signal or a ring.
//
// Completion callbacks run exactly once, outside the lock (they may call the
// communicator again), on whichever thread retired the operation: the
// caller collects them with takeCallbacks() under the lock and runs them with
// runCallbacks() after unlocking.
//
// In-flight cap: operation number q (the caller's call sequence number)
// starts only when every operation still in flight has a number above
// q - maxInFlight() (launch() progresses older ones until they retire). The
// communicator sets the cap to its number of tag windows and gives call q
// window q % windows, so two operations in flight never share a tag window
// and can never match each other's messages. (Counting in-flight operations
// would not do: they finish out of order, so calls 0 and 8 may be in flight
// together while only two are.)
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/call_status.h"
#include "core/clock.h"
#include "core/doorbell.h"
#include "core/intervals.h"
#include "core/spin_mutex.h"
#include "executor/executor.h"
#include "executor/scratch_pool.h"

namespace boostcomm::executor {

using CompletionCallback = std::function<void(std::exception_ptr)>;

// Completion state of one asynchronous operation, shared with its Work.
// `done` is published with release order after `error` is written, so a
// reader that sees done (acquire) sees the error too, without the lock.
class OpState {
 public:
  virtual ~OpState() = default;
  bool isDone() const { return done_.load(std::memory_order_acquire); }
  std::exception_ptr error() const { return error_; }  // valid once isDone()
  const char* algorithm = "";
  std::uint64_t id = 0;
  // Its share of the time from launch (or its turn: see
  // ProgressEngine::enableShareClock) until the engine saw it complete (us;
  // < 0: not measured; valid once isDone()): what online selection times
  // asynchronous calls by. See ProgressEngine::enableShareClock.
  double sharedUs = -1.0;
  // When the engine saw it complete, while the share clock runs (the
  // clock's epoch: not seen): online selection's step check reads an
  // epoch's span from it (tuning/online_selection.h).
  core::Clock::time_point completedAt{};
  // The call's deadline (ms; 0: none): the progress thread fails an
  // operation that nobody waits for once it is this old (see threadMain).
  std::int64_t deadlineMs = 0;
  // A point-to-point receive from any rank: its sender (valid once isDone()).
  int source = -1;

 private:
  friend class ProgressEngine;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  CompletionCallback callback_;  // [engine lock]
};

// What a waiting caller consults while it waits (the communicator's stall
// inspector, watch/stall_inspector.h): check() may throw an Error (e.g. a
// mismatch seen through the peers' call status), which fails the engine like
// a transport error; report() is appended to a timeout's message.
class WaitMonitor {
 public:
  virtual ~WaitMonitor() = default;
  virtual void check(std::chrono::steady_clock::duration waited) = 0;
  virtual std::string report() = 0;
  // The engine failed with `error` (the first failure only; engine lock
  // held): a monitor may tell other ranks (a mismatch, watch/control_channel.h).
  virtual void failed(const std::exception_ptr& error) { (void)error; }
};

class ProgressEngine {
 public:
  // `world` is the transport the schedules' world-communicator steps use;
  // `lock` is the owner's lock, which the engine's thread takes too.
  ProgressEngine(transport::Transport& world, core::SpinMutex& lock);
  ~ProgressEngine();  // stops the thread; operations still in flight are leaked (see fail)
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  core::SpinMutex& mutex() { return mutex_; }

  // [lock] An execution to bind (its nativeCounts/nativeDispls may be filled
  // before launch); launch() or recycle() gives it back.
  std::unique_ptr<Execution> acquireExecution();
  // [lock] Waits for the in-flight cap, leases scratch for the schedule,
  // starts the execution and queues it. `sequence`: the call's number (the
  // cap's unit). `state` is null for blocking calls. Returns the operation's id.
  std::uint64_t launch(std::unique_ptr<Execution> exec, std::shared_ptr<const Schedule> schedule, Binding binding,
                       std::uint64_t sequence, int tagBase, bool blockingNative, std::shared_ptr<OpState> state);
  // [lock] A point-to-point message (Communicator::sendAsync / recvAsync)
  // already posted on `transport`: not a schedule, outside the collectives'
  // issue order and in-flight cap. progress() tests it and completes
  // `state`; a failed message completes with its own error and does not
  // fail the engine (the collectives run elsewhere). anySource: tested with
  // testAnySource, the sender stored in state->source. Returns its id.
  std::uint64_t track(transport::Transport& transport, const transport::Request& request, bool anySource,
                      std::shared_ptr<OpState> state);
  // [lock] Whether point-to-point messages are still pending.
  bool messagesPending() const { return !messages_.empty(); }
  // [lock] One sweep over every in-flight operation, in issue order; retires
  // finished ones. True when any step started or finished. Throws (after
  // fail()) on a transport error.
  bool progress();
  // [lock] Progresses until operation `id` retired. With a timeout, fails the
  // engine with Error{kTimeout} (message: `what` ...) when it passes.
  void driveUntilDone(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout, const char* what, int rank);
  // [lock] Progresses until nothing is in flight. With a timeout, fails the
  // engine with Error{kTimeout} (naming `what`) when it passes.
  void drain(std::optional<std::chrono::milliseconds> timeout = std::nullopt, const char* what = "drain",
             int rank = -1);
  bool idle() const { return inFlight_.empty(); }
  bool retired(std::uint64_t id) const;
  std::size_t maxInFlight() const { return maxInFlight_; }
  void setMaxInFlight(std::size_t n) { maxInFlight_ = n < 1 ? 1 : n; }

  // [lock] Completes every in-flight operation with `error` (their
  // executions and scratch are leaked on purpose: the backend cannot cancel
  // a collective and may still write into them) and remembers it: the
  // engine, and so its communicator, is unusable from then on, whichever
  // thread saw the error.
  void fail(std::exception_ptr error);
  // [lock] The error that failed the engine; null while it is healthy.
  std::exception_ptr failure() const { return failure_; }
  bool failed() const { return static_cast<bool>(failure_); }
  // [lock] Completes every in-flight operation with `error` and forgets it
  // (finalize after a failure, or an orderly finalize that drained first).
  void abandon(std::exception_ptr error);
  // [lock] Frees pooled scratch and executions; nothing may be in flight.
  void releaseMemory();

  // [lock] Registers `callback` on `state`: it runs when the operation
  // completes, or (already complete) is handed back through takeCallbacks().
  void addCallback(OpState& state, CompletionCallback callback);
  // [lock] Moves the callbacks that are due into `out` (reused storage).
  struct Due {
    CompletionCallback callback;
    std::exception_ptr error;
  };
  void takeCallbacks(std::vector<Due>& out);
  // Without the lock: runs and clears `due`. A throwing callback is ignored
  // (its error belongs to whoever it completes).
  static void runCallbacks(std::vector<Due>& due);

  // Starts or stops the progress thread (not with the lock held; any thread
  // but the progress thread itself, e.g. not from a completion callback it
  // runs: that is Error{kInvalidArgument}).
  void setThreadEnabled(bool on);
  bool threadEnabled() const { return threadRunning_.load(std::memory_order_acquire); }
  // [lock] What driveUntilDone and drain run while they wait, for a caller
  // that waits outside the engine (the shared-memory small allreduce): fails
  // the engine with the monitor's error, or with kTimeout (message: `text`
  // plus the monitor's report) when `timedOut`, and throws it.
  void checkWait(std::chrono::steady_clock::duration waited, bool timedOut, const std::string& text, int rank);
  // [lock] Consulted by driveUntilDone and drain while they wait (may be null).
  void setWaitMonitor(WaitMonitor* monitor) { monitor_ = monitor; }
  // [lock] The share clock, for online selection's trials: while it runs,
  // an operation launched records its share of the engine's time in flight,
  // the integral of dt / k over its life with k operations in flight
  // (OpState::sharedUs). Operations in flight together share the link, so
  // a call's wall time counts the others' bytes too (DDP's buckets run side
  // by side); its share is about its time alone, whatever ran beside it.
  // Where the world transport runs its native collectives in turn
  // (Transport::runsNativesInTurn: Gloo's), a native-only operation behind
  // another in flight is waiting, not sharing: it is charged nothing, and
  // not counted in k, until the ones ahead of it have retired. (Charged
  // while they ran, DDP's 25 MiB bucket at 2 x 2 took a 196 ms share of the
  // 334 ms it ran alone, because the next bucket, queued behind it, took
  // half of every millisecond; native then beat hier's 222 ms.) Such
  // operations seen to retire in one sweep split the first one's share
  // evenly: the later ones ran after it, unseen.
  // Off by default
  // (it reads the clock at every launch and retire); it stays on once set.
  void enableShareClock();
  // [lock] Completions of `transport` (a split of the world: the hierarchical
  // levels, the point-to-point channel) wake the thread too, where the
  // transport signals them; call stopCompletionSignals before it goes.
  void signalFrom(transport::Transport& transport);
  // [lock] Before the world transport or a split given to signalFrom goes
  // (the communicator's finalize): they no longer signal completions to this
  // engine, which polls from then on.
  void stopCompletionSignals();
  // [lock] Where retiring operation number q records completion (may be null).
  void setCallStatus(core::CallStatus* status) { status_ = status; }

 private:
  struct Operation {
    Execution* execution = nullptr;
    std::shared_ptr<const Schedule> schedule;
    void* scratch = nullptr;
    std::shared_ptr<OpState> state;  // null for blocking calls
    std::uint64_t id = 0;
    std::uint64_t sequence = 0;
    // When the progress thread first saw it in flight (its deadline check
    // stamps it, so launch() reads no clock).
    std::chrono::steady_clock::time_point seenAt{};
    // The share clock when its share began: at launch, when the clock was
    // turned on, or when its turn came (< 0: clock off, or still waiting).
    double shareStart = -1.0;
    // [share clock] A native-only operation behind another (Transport::
    // runsNativesInTurn): its shareStart waits until it is the first.
    bool inTurn = false;   // such an operation (in turn with the others)
    bool waiting = false;  // behind another such one: charged nothing yet
    // Whether polling may be needed to see it advance: a step on a transport
    // that does not signal completions (signalling_), shared memory, or a node
    // peer's header read from its call status. Where set, each idle sweep asks
    // its execution (Execution::sleepsUntilWoken).
    bool polled = true;
  };
  // [lock] The progress thread's deadline check: fails the engine with
  // Error{kTimeout} when an operation with a deadline is older than it.
  void checkDeadlines();
  struct Message {
    transport::Transport* transport = nullptr;
    transport::Request request;
    bool anySource = false;
    std::shared_ptr<OpState> state;
    bool polled = true;  // on a transport that does not signal completions
  };
  void complete(OpState& state, std::exception_ptr error);
  // Tests the pending messages once; true when any completed.
  bool progressMessages();
  void wakeThread();  // after publishCount(): the thread may be asleep
  // The world transport's completion signal: counts it, and wakes the thread
  // only where it sleeps until one (awaitingSignal_).
  void onSignal();
  void publishCount() { inFlightCount_.store(inFlight_.size() + messages_.size(), std::memory_order_release); }
  // Recycles the operations moved to retired_ and completes their states.
  void finishRetired();
  // [share clock on] Advances it to `now` with sharing_ operations open.
  double advanceShares(core::Clock::time_point now = core::Clock::now());
  // [share clock on] op, about to join inFlight_, starts its share at `now`
  // (the clock's reading), or waits (Operation::waiting) where an in-turn
  // operation is ahead of it.
  void startShare(Operation& op, double now, bool inTurnAhead);
  bool anyInTurn() const;
  // [share clock on] Gives in-turn operations retired together (retired_) their shares.
  void shareInTurn(double shareNow);
  void threadMain();
  // [lock] Whether an operation or message in flight needs polling now (see
  // Operation::polled); when none does, the thread sleeps until a signal,
  // or on the doorbell of wakes.shm (set where shared-memory steps wait).
  bool mustPoll(Execution::WakeSources& wakes) const;
  bool signals(const transport::Transport* t) const {
    return std::find(signalling_.begin(), signalling_.end(), t) != signalling_.end();
  }

  core::SpinMutex& mutex_;
  transport::Transport& world_;
  // The transports that signal their completions to this engine
  // (Transport::signalCompletions): the world's first where it does, then
  // those given to signalFrom. They wake the thread, which then need not
  // poll work that waits on them alone.
  std::vector<transport::Transport*> signalling_;
  IssueLedger ledger_;  // issue order of collective steps across operations
  ScratchPool scratch_;
  std::vector<std::unique_ptr<Execution>> freeExecutions_;
  std::vector<Operation> inFlight_;
  std::vector<Operation> retired_;  // reused by progress()
  std::vector<Message> messages_;   // point-to-point, in posting order
  std::vector<Due> due_;            // callbacks to run after unlocking
  std::uint64_t nextId_ = 1;
  std::size_t maxInFlight_ = 1 << 20;
  std::exception_ptr failure_;
  WaitMonitor* monitor_ = nullptr;
  core::CallStatus* status_ = nullptr;
  bool shareClock_ = false;
  std::chrono::steady_clock::time_point shareOrigin_{};  // when it was set
  core::ShareClock<double> shares_;                      // us since shareOrigin_
  std::size_t sharing_ = 0;  // operations in flight the clock charges (not waiting)
  bool nativesInTurn_ = false;  // world_.runsNativesInTurn()
  // Published count of in-flight operations: the thread sleeps while it is 0.
  std::atomic<std::size_t> inFlightCount_{0};

  std::mutex sleepMutex_;
  std::condition_variable sleepCv_;
  bool stop_ = false;  // [sleepMutex_]
  // Operations and messages posted (bumped under sleepMutex_): a sleeping
  // thread wakes when it differs from what it read before its last sweep.
  std::atomic<std::uint64_t> posted_{0};
  // Completions the world transport signalled, and whether the thread is
  // asleep until one. A thread that polls is not woken by them: it keeps
  // its back-off exactly as without signals.
  std::atomic<std::uint64_t> signals_{0};
  std::atomic<bool> awaitingSignal_{false};
  // The doorbell the thread sleeps on (a shared-memory engine's), which the
  // wakers above ring [sleepMutex_]; and whether it may sleep on one at all
  // [sleepMutex_ and the engine lock: either reads it]: not once
  // stopCompletionSignals ran (the memory may go).
  core::Doorbell* sleepingOn_ = nullptr;
  bool bellsAllowed_ = true;
  std::mutex threadMutex_;  // serialises setThreadEnabled
  std::atomic<bool> threadRunning_{false};
  std::thread thread_;  // [threadMutex_]
};

// A lock on an engine that runs the due callbacks after unlocking.
class EngineLock {
 public:
  explicit EngineLock(ProgressEngine& engine) : engine_(engine) { engine_.mutex().lock(); }
  ~EngineLock() {
    engine_.takeCallbacks(due_);
    engine_.mutex().unlock();
    if (!due_.empty()) ProgressEngine::runCallbacks(due_);
  }
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;

 private:
  ProgressEngine& engine_;
  std::vector<ProgressEngine::Due> due_;
};

}  // namespace boostcomm::executor
