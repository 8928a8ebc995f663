#include "torch/worker.h"

#include <chrono>

#include "boostcomm/error.h"

namespace boostcomm::python {
namespace {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool cpuSeconds(clockid_t clock, double& out) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return false;  // the thread has exited
  out = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  return true;
}

// Polls of the oldest op between pauses: the peer we wait for may need our core.
constexpr int kPollsBeforeYield = 64;
// While the trainer thread is computing (its CPU clock advanced by more than
// half the wall time since the last check), the worker polls once per
// kGentlePoll instead of spinning: a spinning poller takes a core's share
// from backward on a machine with as many ranks as cores (2 ranks, 2 cores
// here), which cost more than the overlap won. Once the trainer blocks on the
// result, the worker spins (yielding) to finish as fast as possible.
constexpr auto kGentlePoll = std::chrono::microseconds(200);

}  // namespace

CommWorker::CommWorker(std::shared_ptr<Communicator> comm)
    : comm_(std::move(comm)), rank_(comm_->rank()), thread_([this] { run(); }) {}

CommWorker::~CommWorker() {
  try {
    shutdown();
  } catch (...) {
    // Destructors must not throw; shutdown errors were delivered to the ops.
  }
}

void CommWorker::submit(CommOp op) {
  clockid_t clock{};
  pthread_getcpuclockid(pthread_self(), &clock);
  std::unique_lock lock(mutex_);
  if (stop_) {
    lock.unlock();
    op.finish(std::make_exception_ptr(
        Error(ErrorCategory::kFinalized, rank_, "boostcomm process group used after shutdown")));
    return;
  }
  const std::uint64_t ticket = nextTicket_++;
  queue_.push_back(Queued{std::move(op), clock, ticket});
  wake_.notify_one();
  if (!async_) finished_.wait(lock, [&] { return completedTicket_ >= ticket; });
}

void CommWorker::configure(bool async, int stages) {
  std::lock_guard lock(mutex_);
  async_ = async;
  stages_ = stages < 1 ? 1 : stages;
}

bool CommWorker::async() const {
  std::lock_guard lock(mutex_);
  return async_;
}

int CommWorker::stages() const {
  std::lock_guard lock(mutex_);
  return stages_;
}

OverlapCounters CommWorker::counters(bool reset) {
  std::lock_guard lock(mutex_);
  OverlapCounters out = counters_;
  if (reset) counters_ = OverlapCounters{};
  return out;
}

void CommWorker::shutdown() {
  {
    std::unique_lock lock(mutex_);
    if (stopped_) return;
    stop_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  stopped_ = true;
  // The communicator is not finalised here: finalize() is collective (it
  // frees shared-memory windows with MPI_Win_free), and this runs from a
  // destructor whose timing the garbage collector picks per rank. The
  // package finalises every communicator at exit, in creation order
  // (boostcomm/_state.py), where all ranks agree.
}

void CommWorker::beginBusy(clockid_t callerClock) {
  busy_ = true;
  busyStartSeconds_ = nowSeconds();
  busyClock_ = callerClock;
  busyClockValid_ = cpuSeconds(callerClock, busyStartCpuSeconds_);
}

void CommWorker::endBusy() {
  const double wall = nowSeconds() - busyStartSeconds_;
  double cpu = 0;
  double hidden = 0;
  if (busyClockValid_ && cpuSeconds(busyClock_, cpu)) hidden = std::min(wall, std::max(0.0, cpu - busyStartCpuSeconds_));
  busy_ = false;
  std::lock_guard lock(mutex_);
  counters_.commSeconds += wall;
  counters_.hiddenSeconds += hidden;
  counters_.busyPeriods += 1;
}

void CommWorker::startOne(Queued& q, std::deque<InFlight>& inFlight) {
  if (!busy_) beginBusy(q.callerClock);
  InFlight f{Work(), std::move(q.op), q.ticket, nullptr};
  try {
    f.work = f.op.start(*comm_);
  } catch (...) {
    // Failed to launch: completed (after the ones before it) with the error.
    f.launchError = std::current_exception();
  }
  inFlight.push_back(std::move(f));
}

void CommWorker::completeOldest(std::deque<InFlight>& inFlight, std::exception_ptr error) {
  InFlight done = std::move(inFlight.front());
  inFlight.pop_front();
  if (inFlight.empty()) endBusy();
  try {
    done.op.finish(error);
  } catch (...) {
    // finish() completes a c10d future; its callbacks' errors stay with the future.
  }
  std::lock_guard lock(mutex_);
  counters_.ops += 1;
  completedTicket_ = done.ticket;
  finished_.notify_all();
}

bool CommWorker::trainerComputing() {
  if (!busyClockValid_) return false;
  double cpu = 0;
  if (!cpuSeconds(busyClock_, cpu)) return false;
  const double wall = nowSeconds();
  const bool computing = lastCheckWall_ > 0 && (cpu - lastCheckCpu_) > 0.5 * (wall - lastCheckWall_);
  lastCheckCpu_ = cpu;
  lastCheckWall_ = wall;
  return computing;
}

void CommWorker::run() {
  std::deque<InFlight> inFlight;
  std::deque<Queued> local;
  int polls = 0;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      if (inFlight.empty() && local.empty()) {
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty() && stop_) return;
      }
      while (!queue_.empty()) {
        local.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const int stages = this->stages();
    while (!local.empty() && static_cast<int>(inFlight.size()) < stages) {
      startOne(local.front(), inFlight);
      local.pop_front();
    }
    if (inFlight.empty()) continue;
    InFlight& oldest = inFlight.front();
    if (!oldest.work.valid()) {
      completeOldest(inFlight, oldest.launchError);
      continue;
    }
    bool done = false;
    std::exception_ptr error;
    try {
      done = oldest.work.test();
    } catch (...) {
      done = true;
      error = std::current_exception();
    }
    if (done) {
      completeOldest(inFlight, error);
      polls = 0;
    } else if (gentle_) {
      // One poll per pause while backward computes (each poll posts whatever
      // became possible); the trainer is re-checked every time.
      gentle_ = trainerComputing();
      if (gentle_) std::this_thread::sleep_for(kGentlePoll);
    } else if (++polls >= kPollsBeforeYield) {
      polls = 0;
      gentle_ = trainerComputing();
      if (!gentle_) std::this_thread::yield();
    }
  }
}

}  // namespace boostcomm::python
