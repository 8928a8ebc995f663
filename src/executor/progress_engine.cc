#include "executor/progress_engine.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "core/check.h"
#include "core/clock.h"
#include "core/thread_name.h"

namespace boostcomm::executor {
namespace {

// Caller-driven waits: polls without progress before yielding the core.
// Short enough to keep oversubscribed runs moving (more ranks than cores, or
// threads of the in-process transport), long enough not to add latency when
// a message is a few microseconds away.
constexpr std::uint32_t kIdlePollsBeforeYield = 64;

// Progress thread back-off while nothing advances, by the time since
// anything last advanced: spin, then yield, then sleep, doubling from
// kThreadMinSleep to kThreadMaxSleep. How long it spins and yields depends on
// how often things have been advancing (a moving average of the gaps):
// - gaps under kThreadFrequentGap (shared-memory hand-offs between ranks of
//   one node, each waiting for the other's progress): spin 100 us, yield
//   until 1 ms, so a hand-off is seen while the peer is still awake. With
//   the short window below, one-host DDP overhead on resnet50 was 0.55-0.66x
//   gloo's; with this one 0.41-0.45x.
// - longer gaps (messages crossing a network): spin 20 us, yield until
//   100 us, then sleep. On the MPI transport with peers on other nodes each
//   poll is an MPI_Test whose progress runs poll(2) over every TCP socket:
//   the earlier fixed 64 spins + 256 yields after each completion lasted
//   milliseconds, so on the emulated 2 x 2 cluster the thread never slept
//   (150-220 ms of CPU per DDP step against gloo's 40-75; now 65-80).
// Why sleep at all: on a machine with as many ranks as cores (2 and 2 here)
// a thread that spins or yields takes a core's share from the caller's
// compute; the c10d worker thread this engine replaced measured that cost as
// larger than the overlap it won. 200 us bounds the added completion latency
// to a fraction of a bucket's transfer. A wait that has lasted longer sleeps
// longer, up to an eighth of the time since anything last advanced
// (kThreadLongSleep at most): a DDP bucket crossing a 1 Gbit/s link for
// 100-300 ms then costs a few hundred wake-ups instead of thousands, and
// completion is seen at most 12.5% late. A new operation, or a message,
// wakes the thread at once.
constexpr auto kThreadSpinFor = std::chrono::microseconds(20);
constexpr auto kThreadYieldFor = std::chrono::microseconds(100);
constexpr auto kThreadSpinForFrequent = std::chrono::microseconds(100);
constexpr auto kThreadYieldForFrequent = std::chrono::microseconds(1000);
constexpr auto kThreadFrequentGap = std::chrono::microseconds(1000);
constexpr auto kThreadMinSleep = std::chrono::microseconds(10);
constexpr auto kThreadMaxSleep = std::chrono::microseconds(200);
constexpr auto kThreadLongSleep = std::chrono::microseconds(2000);

}  // namespace

ProgressEngine::ProgressEngine(transport::Transport& world, core::SpinMutex& lock) : mutex_(lock), world_(world) {
  inFlight_.reserve(64);
  retired_.reserve(64);
  signalFrom(world_);
  nativesInTurn_ = world_.runsNativesInTurn();
}

ProgressEngine::~ProgressEngine() {
  try {
    setThreadEnabled(false);
  } catch (...) {
    // Destroyed from the progress thread itself (its last owner went away
    // inside a callback): the thread cannot join itself; let it go.
    if (thread_.joinable()) thread_.detach();
  }
  stopCompletionSignals();  // after the thread, which reads signalling_
}

std::unique_ptr<Execution> ProgressEngine::acquireExecution() {
  if (freeExecutions_.empty()) return std::make_unique<Execution>();
  std::unique_ptr<Execution> exec = std::move(freeExecutions_.back());
  freeExecutions_.pop_back();
  return exec;
}

std::uint64_t ProgressEngine::launch(std::unique_ptr<Execution> exec, std::shared_ptr<const Schedule> schedule,
                                     Binding binding, std::uint64_t sequence, int tagBase, bool blockingNative,
                                     std::shared_ptr<OpState> state) {
  // The cap keeps every in-flight operation in a tag window of its own
  // (inFlight_ is in issue order, so its front is the oldest).
  while (!inFlight_.empty() && sequence - inFlight_.front().sequence >= maxInFlight_) progress();
  binding.scratch = scratch_.acquire(schedule->scratchBytes());
  exec->start(schedule, binding, tagBase, blockingNative);
  Operation op;
  op.execution = exec.release();
  op.schedule = std::move(schedule);
  op.scratch = binding.scratch;
  op.id = nextId_++;
  op.sequence = sequence;
  op.polled = !signals(&world_) || binding.peerStatus != nullptr || !op.schedule->onWorldMessagesOnly();
  // Advanced first: the ones in flight shared the time up to now.
  if (shareClock_) startShare(op, advanceShares(), anyInTurn());
  if (state) state->id = op.id;
  op.state = std::move(state);
  inFlight_.push_back(std::move(op));
  publishCount();
  wakeThread();
  return inFlight_.back().id;
}

std::uint64_t ProgressEngine::track(transport::Transport& transport, const transport::Request& request,
                                    bool anySource, std::shared_ptr<OpState> state) {
  BC_INTERNAL(state != nullptr, "track: a message needs a state");
  state->id = nextId_++;
  messages_.push_back(Message{&transport, request, anySource, state, !signals(&transport)});
  publishCount();
  wakeThread();
  return state->id;
}

bool ProgressEngine::progressMessages() {
  bool any = false;
  for (Message& m : messages_) {
    std::exception_ptr error;
    bool done = false;
    try {
      done = m.anySource ? m.transport->testAnySource(m.request, &m.state->source) : m.transport->test(m.request);
    } catch (...) {
      error = std::current_exception();
      done = true;
    }
    if (done) {
      complete(*m.state, error);
      m.state = nullptr;
      any = true;
    }
  }
  if (any) {
    std::erase_if(messages_, [](const Message& m) { return m.state == nullptr; });
    publishCount();
  }
  return any;
}

void ProgressEngine::wakeThread() {
  if (threadRunning_.load(std::memory_order_acquire)) {
    // Through the mutex: the thread checks the count and blocks atomically
    // under it, so this wake-up cannot fall between the two.
    {
      std::lock_guard lock(sleepMutex_);
      posted_.fetch_add(1, std::memory_order_relaxed);
      if (sleepingOn_ != nullptr) sleepingOn_->ring();
    }
    sleepCv_.notify_all();
  }
}

bool ProgressEngine::progress() {
  bool advanced = !messages_.empty() && progressMessages();
  try {
    for (Operation& op : inFlight_) {
      if (op.execution->progress(world_, ledger_, &advanced)) {
        retired_.push_back(std::move(op));
        op.execution = nullptr;
      }
    }
  } catch (...) {
    // Operations that finished earlier in this sweep did finish: complete
    // them before failing the rest.
    finishRetired();
    fail(std::current_exception());
    throw;
  }
  if (retired_.empty()) return advanced;
  finishRetired();
  return true;
}

void ProgressEngine::onSignal() {
  signals_.fetch_add(1, std::memory_order_seq_cst);
  // Only a thread asleep until a signal is woken: one that polls keeps its
  // back-off exactly as without signals (see awaitingSignal_).
  if (!awaitingSignal_.load(std::memory_order_seq_cst)) return;
  {
    // The thread is asleep (on the condition variable or a doorbell), or
    // has seen signals_ change.
    std::lock_guard lock(sleepMutex_);
    if (sleepingOn_ != nullptr) sleepingOn_->ring();
  }
  sleepCv_.notify_all();
}

void ProgressEngine::signalFrom(transport::Transport& transport) {
  if (signals(&transport)) return;
  if (transport.signalCompletions([this] { onSignal(); })) signalling_.push_back(&transport);
}

void ProgressEngine::stopCompletionSignals() {
  // Each returns once a call in progress has returned.
  for (transport::Transport* t : signalling_) t->signalCompletions({});
  signalling_.clear();
  // No more sleeps on a doorbell: the memory it lives in may go next. A
  // thread asleep on one is woken, and waited for until it left it.
  std::unique_lock lock(sleepMutex_);
  bellsAllowed_ = false;
  if (sleepingOn_ != nullptr) sleepingOn_->ring();
  sleepCv_.wait(lock, [&] { return sleepingOn_ == nullptr; });
}

bool ProgressEngine::mustPoll(Execution::WakeSources& wakes) const {
  wakes = {};
  for (const Message& m : messages_) {
    if (m.polled) return true;
  }
  for (const Operation& op : inFlight_) {
    if (!op.polled) {
      wakes.signals = true;  // on the signalling world transport alone
    } else if (!op.execution->sleepsUntilWoken(world_, signalling_, wakes)) {
      return true;
    }
  }
  return false;
}

void ProgressEngine::enableShareClock() {
  if (shareClock_) return;
  shareClock_ = true;
  shareOrigin_ = std::chrono::steady_clock::now();
  // Those already in flight share from now on, as if launched now.
  bool inTurnAhead = false;
  for (Operation& op : inFlight_) {
    startShare(op, 0.0, inTurnAhead);
    inTurnAhead = inTurnAhead || op.inTurn;
  }
}

void ProgressEngine::startShare(Operation& op, double now, bool inTurnAhead) {
  // Backend collectives alone, on the world transport: they run in turn with
  // the world's other native-only operations.
  const Schedule& s = *op.schedule;
  op.inTurn = nativesInTurn_ && s.nativeOnly() && s.onWorldMessagesOnly() &&
              s.issueCount(issueLane(StepKind::kNative), kWorldComm) > 0;
  op.waiting = op.inTurn && inTurnAhead;
  if (op.waiting) return;
  op.shareStart = now;
  ++sharing_;
}

bool ProgressEngine::anyInTurn() const {
  return std::any_of(inFlight_.begin(), inFlight_.end(), [](const Operation& o) { return o.inTurn; });
}

void ProgressEngine::shareInTurn(double shareNow) {
  // In-turn operations that retire in one sweep: the first ran since its
  // shareStart, the ones still waiting behind it ran after it, unseen by the
  // engine: they split the first's share evenly (each gets a time, so a
  // quick native is not left without one).
  Operation* first = nullptr;
  int n = 0;
  for (Operation& op : retired_) {
    if (!op.inTurn) continue;
    if (first == nullptr && !op.waiting) first = &op;
    ++n;
  }
  if (first == nullptr || n < 2 || first->shareStart < 0) return;
  const double each = (shareNow - first->shareStart) / n;
  for (Operation& op : retired_) {
    if (op.inTurn) op.shareStart = shareNow - each;
  }
}

double ProgressEngine::advanceShares(core::Clock::time_point now) {
  return shares_.advance(core::usBetween(shareOrigin_, now), sharing_);
}

void ProgressEngine::finishRetired() {
  if (retired_.empty()) return;
  // Before the erase: the retired operations shared the time up to now.
  const core::Clock::time_point seen = shareClock_ ? core::Clock::now() : core::Clock::time_point{};
  const double shareNow = shareClock_ ? advanceShares(seen) : 0.0;
  std::erase_if(inFlight_, [](const Operation& op) { return op.execution == nullptr; });
  publishCount();
  if (shareClock_) {
    for (const Operation& op : retired_) {
      if (!op.waiting && op.shareStart >= 0) --sharing_;
    }
    shareInTurn(shareNow);
    // The first native-only operation left is the one the transport runs now.
    auto first = std::find_if(inFlight_.begin(), inFlight_.end(), [](const Operation& o) { return o.inTurn; });
    if (first != inFlight_.end() && first->waiting) {
      first->waiting = false;
      first->shareStart = shareNow;
      ++sharing_;
    }
  }
  for (Operation& op : retired_) {
    if (status_) status_->recordEnd(op.sequence);
    scratch_.release(op.scratch);
    freeExecutions_.emplace_back(op.execution);
    if (op.state && op.shareStart >= 0) op.state->sharedUs = shareNow - op.shareStart;
    if (op.state) op.state->completedAt = seen;
    if (op.state) complete(*op.state, nullptr);
  }
  retired_.clear();
}

bool ProgressEngine::retired(std::uint64_t id) const {
  for (const Operation& op : inFlight_) {
    if (op.id == id) return false;
  }
  for (const Message& m : messages_) {
    if (m.state->id == id) return false;
  }
  return true;
}

void ProgressEngine::driveUntilDone(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout,
                                    const char* what, int rank) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::uint32_t spins = 0;
  std::uint32_t idlePolls = 0;
  while (true) {
    idlePolls = progress() ? 0 : idlePolls + 1;
    if (retired(id)) return;
    if (idlePolls >= kIdlePollsBeforeYield) std::this_thread::yield();
    // Reading the clock costs ~20 ns; check it every 256 polls.
    if ((timeout || monitor_) && (++spins & 0xff) == 0) {
      const auto waited = Clock::now() - start;
      const bool late = timeout && waited > *timeout;
      if (late || monitor_) {
        checkWait(waited, late,
                  late ? std::string(what) + " did not complete within " + std::to_string(timeout->count()) + " ms"
                       : std::string(),
                  rank);
      }
    }
  }
}

void ProgressEngine::drain(std::optional<std::chrono::milliseconds> timeout, const char* what, int rank) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::uint32_t spins = 0;
  while (!inFlight_.empty()) {
    if (!progress()) std::this_thread::yield();
    if ((timeout || monitor_) && (++spins & 0xff) == 0 && !inFlight_.empty()) {
      const auto waited = Clock::now() - start;
      const bool late = timeout && waited > *timeout;
      if (late || monitor_) {
        checkWait(waited, late,
                  late ? std::string(what) + ": " + std::to_string(inFlight_.size()) +
                             " operation(s) still in flight after " + std::to_string(timeout->count()) + " ms"
                       : std::string(),
                  rank);
      }
    }
  }
}

void ProgressEngine::checkWait(std::chrono::steady_clock::duration waited, bool timedOut, const std::string& text,
                               int rank) {
  std::exception_ptr error;
  try {
    if (monitor_) monitor_->check(waited);
  } catch (...) {
    error = std::current_exception();
  }
  if (!error && timedOut) {
    std::string message = text;
    const std::string report = monitor_ ? monitor_->report() : std::string();
    message += report.empty() ? " (another rank may not have called it, or called it with different arguments)"
                              : "; " + report;
    error = std::make_exception_ptr(Error(ErrorCategory::kTimeout, rank, message));
  }
  if (!error) return;
  fail(error);
  std::rethrow_exception(error);
}

void ProgressEngine::checkDeadlines() {
  const auto now = std::chrono::steady_clock::now();
  // The wait monitor's checks (a peer's mismatch or rejection, poison,
  // abort, an exited peer), as a waiting caller would run them: work that
  // nobody waits for (the c10d backend's ops, whose callers sleep on their
  // Work) must fail on them too, not only at its deadline.
  if (monitor_ && !inFlight_.empty() && inFlight_.front().seenAt != std::chrono::steady_clock::time_point{}) {
    std::exception_ptr error;
    try {
      monitor_->check(now - inFlight_.front().seenAt);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      fail(error);
      std::rethrow_exception(error);
    }
  }
  for (Operation& op : inFlight_) {
    if (op.seenAt == std::chrono::steady_clock::time_point{}) {
      op.seenAt = now;
      continue;
    }
    if (!op.state || op.state->deadlineMs <= 0) continue;
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - op.seenAt);
    if (age.count() <= op.state->deadlineMs) continue;
    std::string message = std::string("asynchronous ") + op.state->algorithm + " call (seq " +
                          std::to_string(op.sequence) + ") did not complete within " +
                          std::to_string(op.state->deadlineMs) +
                          " ms (seen by the progress thread; nobody was waiting for it)";
    const std::string report = monitor_ ? monitor_->report() : std::string();
    if (!report.empty()) message += "; " + report;
    std::exception_ptr error = std::make_exception_ptr(Error(ErrorCategory::kTimeout, world_.rank(), message));
    fail(error);
    std::rethrow_exception(error);
  }
}

void ProgressEngine::complete(OpState& state, std::exception_ptr error) {
  if (state.isDone()) return;
  state.error_ = error;
  state.done_.store(true, std::memory_order_release);
  if (state.callback_) {
    due_.push_back({std::move(state.callback_), error});
    state.callback_ = nullptr;
  }
}

void ProgressEngine::fail(std::exception_ptr error) {
  if (!failure_) {
    failure_ = error;
    if (monitor_) monitor_->failed(error);
  }
  abandon(error);
  scratch_.abandon();
}

void ProgressEngine::abandon(std::exception_ptr error) {
  for (Operation& op : inFlight_) {
    if (op.state) complete(*op.state, error);
  }
  inFlight_.clear();
  sharing_ = 0;
  for (Message& m : messages_) complete(*m.state, error);  // their requests are leaked, as executions are
  messages_.clear();
  inFlightCount_.store(0, std::memory_order_release);
  ledger_.clear();  // places of abandoned executions will never be issued
}

void ProgressEngine::releaseMemory() {
  BC_INTERNAL(inFlight_.empty(), "releaseMemory with operations in flight");
  scratch_.clear();
  freeExecutions_.clear();
}

void ProgressEngine::addCallback(OpState& state, CompletionCallback callback) {
  if (state.isDone()) {
    due_.push_back({std::move(callback), state.error_});
    return;
  }
  BC_INTERNAL(!state.callback_, "a second completion callback on one operation");
  state.callback_ = std::move(callback);
}

void ProgressEngine::takeCallbacks(std::vector<Due>& out) {
  if (due_.empty()) return;
  // Moved element by element: due_ keeps its capacity, so completions with
  // callbacks do not allocate once warm.
  for (Due& d : due_) out.push_back(std::move(d));
  due_.clear();
}

void ProgressEngine::runCallbacks(std::vector<Due>& due) {
  for (Due& d : due) {
    try {
      d.callback(d.error);
    } catch (const std::exception& e) {
      // The callback completes someone else's handle; its own error stays
      // there. Said once per throw, so a broken callback is never silent.
      std::fprintf(stderr, "boostcomm: warning: a completion callback threw (ignored; its operation completed): %s\n",
                   e.what());
    } catch (...) {
      std::fprintf(stderr, "boostcomm: warning: a completion callback threw a non-standard exception (ignored)\n");
    }
  }
  due.clear();
}

void ProgressEngine::setThreadEnabled(bool on) {
  std::lock_guard guard(threadMutex_);
  if (on == thread_.joinable()) return;
  BC_INVALID(std::this_thread::get_id() != thread_.get_id(), -1,
             "the progress thread cannot be stopped from itself (from a completion callback it runs)");
  if (on) {
    {
      std::lock_guard lock(sleepMutex_);
      stop_ = false;
    }
    thread_ = std::thread([this] { threadMain(); });
    threadRunning_.store(true, std::memory_order_release);
    return;
  }
  {
    std::lock_guard lock(sleepMutex_);
    stop_ = true;
    if (sleepingOn_ != nullptr) sleepingOn_->ring();
  }
  sleepCv_.notify_all();
  thread_.join();
  threadRunning_.store(false, std::memory_order_release);
}

void ProgressEngine::threadMain() {
  core::nameThisThread("bc-progress");
  std::vector<Due> due;
  using Clock = std::chrono::steady_clock;
  std::uint32_t deadlineChecks = 0;
  auto sleep = kThreadMinSleep;
  Clock::time_point lastAdvance = Clock::now();
  // The recent gap between advances (a moving average, 1/4 weight to the
  // newest; it starts on the "messages crossing a network" side). The first
  // advance after a wake-up is usually the new operation's first step, a
  // gap of nothing: it restarts the back-off but is not averaged.
  Clock::duration recentGap = kThreadFrequentGap * 2;
  bool woken = true;
  bool signalWait = false;  // the last wait was for a signal or a ring (see below)
  // The shared-memory engine whose doorbell the last idle sweep found to
  // sleep on (Execution::sleepsUntilWoken), and the bell's value, which each
  // sweep reads first: a ring after that read ends the sleep at once.
  transport::SharedMemoryEngine* shm = nullptr;
  // Whether the last advance moved shared memory (a hand-off between the
  // node's ranks, which come in quick succession while both run), rather
  // than a message or a new operation.
  bool shmMoved = false;
  while (true) {
    {
      std::unique_lock lock(sleepMutex_);
      if (stop_) return;
      if (inFlightCount_.load(std::memory_order_acquire) == 0) {
        sleepCv_.wait(lock, [&] { return stop_ || inFlightCount_.load(std::memory_order_acquire) > 0; });
        lastAdvance = Clock::now();
        woken = true;
        sleep = kThreadMinSleep;
        continue;
      }
    }
    bool advanced = false;
    bool awaitSignal = false;
    bool bellChanged = false;
    core::Doorbell* bell = nullptr;  // shm's, read under the engine lock
    bool alsoSignals = false;        // this sweep found waits on messages too
    std::uint32_t rung = 0;
    std::uint64_t shmAdvances = 0;
    // Posts seen before this sweep: one that lands after it wakes the sleep below.
    const std::uint64_t posted = posted_.load(std::memory_order_relaxed);
    const std::uint64_t signalsSeen = signals_.load(std::memory_order_seq_cst);
    // A caller waiting for the lock will progress everything itself.
    std::unique_lock engineLock(mutex_, std::defer_lock);
    if (!mutex_.contended() && engineLock.try_lock()) {
      try {
        // Under the engine lock: the engine and its bell are there while
        // bellsAllowed_ (stopCompletionSignals clears it before they may go).
        if (!bellsAllowed_) shm = nullptr;
        if (shm != nullptr) {
          bell = shm->doorbell();
          rung = bell->value();
          shmAdvances = shm->advances();
        }
        advanced = progress();
        if (advanced) shmMoved = shm != nullptr && shm->advances() != shmAdvances;
        // Asynchronous work nobody waits for has no waiter to time it out:
        // the thread does (every 64 idle sweeps; after a wait for a signal,
        // every idle sweep: those come at most every kThreadLongSleep).
        if (!advanced && (signalWait || (++deadlineChecks & 0x3f) == 0)) checkDeadlines();
        Execution::WakeSources wakes;
        awaitSignal =
            !advanced && !mustPoll(wakes) && (wakes.shm != nullptr ? bellsAllowed_ : !signalling_.empty());
        alsoSignals = wakes.signals;
        if (awaitSignal && wakes.shm != shm) {
          // Another engine's bell, not read before this sweep: one more
          // sweep first. (None: the condition variable, below.)
          bellChanged = wakes.shm != nullptr;
          shm = wakes.shm;
          bell = nullptr;
        }
      } catch (...) {
        // progress() failed the engine: every in-flight operation completed
        // with the error, which its waiters and callbacks now report.
        advanced = true;
      }
      takeCallbacks(due);
      engineLock.unlock();
      if (!due.empty()) runCallbacks(due);
    }
    if (advanced) {
      const Clock::time_point now = Clock::now();
      if (!woken) recentGap = (recentGap * 3 + (now - lastAdvance)) / 4;
      woken = false;
      lastAdvance = now;
      sleep = kThreadMinSleep;
      continue;
    }
    if (bellChanged) continue;
    signalWait = false;
    if (awaitSignal && bell != nullptr) {
      // Shared-memory hand-offs wait on the node's other processes, which
      // ring this rank's bell when they move anything (and this process's
      // wakers ring it too). Right after a hand-off, while they come often
      // and nothing else is in flight (one host's buckets: both ranks
      // run), it spins and yields as a polling wait does, since a wake-up
      // costs more than the gap. Otherwise (after a message's completion or
      // a new operation, or with messages in flight beside it: a
      // hierarchical call, whose node peers are as likely to wait on the
      // network themselves) a short spin and yield, then it sleeps until a
      // ring. (The long window there took 29-40 ms of CPU per 2 x 2 DDP
      // step against 23-30 with the short one.)
      const auto idle = Clock::now() - lastAdvance;
      const bool frequent = shmMoved && !alsoSignals && recentGap < kThreadFrequentGap;
      if (idle < (frequent ? kThreadSpinForFrequent : kThreadSpinFor)) continue;
      if (idle < (frequent ? kThreadYieldForFrequent : kThreadYieldFor)) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock lock(sleepMutex_);
      awaitingSignal_.store(true, std::memory_order_seq_cst);
      if (!stop_ && bellsAllowed_ && posted_.load(std::memory_order_relaxed) == posted &&
          signals_.load(std::memory_order_seq_cst) == signalsSeen) {
        sleepingOn_ = bell;
        lock.unlock();
        bell->sleep(rung, kThreadLongSleep);
        lock.lock();
        sleepingOn_ = nullptr;
        signalWait = true;
      }
      awaitingSignal_.store(false, std::memory_order_relaxed);
      lock.unlock();
      sleepCv_.notify_all();  // stopCompletionSignals may wait for it to leave the bell
      // lastAdvance stays: a wake that moves nothing (a timeout, a ring for
      // something else) goes back to sleep without another spin; an advance
      // opens the window again.
      woken = true;
      continue;
    }
    signalWait = awaitSignal;
    if (awaitSignal) {
      // Nothing can advance before the transport signals a completion (or
      // a caller posts work): no spinning, yielding or short sleeps, whose
      // CPU an oversubscribed node takes from the caller's compute and
      // whose share the scheduler then holds against this thread when a
      // message does complete. The timeout bounds the deadline checks'
      // cadence (each idle sweep after it checks).
      std::unique_lock lock(sleepMutex_);
      awaitingSignal_.store(true, std::memory_order_seq_cst);
      sleepCv_.wait_for(lock, kThreadLongSleep, [&] {
        return stop_ || posted_.load(std::memory_order_relaxed) != posted ||
               signals_.load(std::memory_order_seq_cst) != signalsSeen;
      });
      awaitingSignal_.store(false, std::memory_order_relaxed);
      lastAdvance = Clock::now();
      woken = true;
      sleep = kThreadMinSleep;
      continue;
    }
    const Clock::time_point now = Clock::now();
    const auto idle = now - lastAdvance;
    const bool frequent = recentGap < kThreadFrequentGap;
    if (idle < (frequent ? kThreadSpinForFrequent : kThreadSpinFor)) continue;
    if (idle < (frequent ? kThreadYieldForFrequent : kThreadYieldFor)) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock lock(sleepMutex_);
    if (sleepCv_.wait_for(lock, sleep, [&] { return stop_ || posted_.load(std::memory_order_relaxed) != posted; })) {
      // New work (or stop): back to spinning, as after progress.
      lastAdvance = Clock::now();
      woken = true;
      sleep = kThreadMinSleep;
      continue;
    }
    const auto cap = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(idle) / 8, kThreadMaxSleep,
                                kThreadLongSleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, cap);
  }
}

}  // namespace boostcomm::executor
