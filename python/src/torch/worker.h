// CommWorker: the thread that runs a c10d process group's collectives.
//
// Why a thread: a boostcomm Work progresses only while someone calls
// test()/wait() on its communicator, and c10d's contract is the opposite:
// allreduce() returns at once and the Work's future completes by itself
// while the caller computes (DDP launches bucket k and goes on with backward).
// The worker owns the Communicator for the process group's lifetime; ops are
// started in submission order, which is the same on every rank because c10d
// issues collectives in program order, so every rank's communicator sees the
// same sequence (boostcomm's matching rule).
//
// Up to `stages` ops are in flight at once (launched, not yet complete); the
// worker polls the oldest, and completes ops strictly in order. With
// async=false, submit() returns only after the op completed (a synchronous
// backend, the "no overlap" baseline of configure_overlap(enable=False)).
//
// Overlap accounting (the backend cannot see when backward ends: DDP waits
// on the c10::ivalue::Future, a final class): communication time is the
// union of the intervals with at least one op in flight; hidden time is the
// CPU time the submitting thread (the one running backward) consumed during
// those intervals, i.e. communication that ran while the trainer computed.
// On an oversubscribed machine the trainer shares its core with this thread,
// so hidden time is a lower bound.
#pragma once

#include <pthread.h>
#include <time.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "boostcomm/communicator.h"

namespace boostcomm::python {

struct CommOp {
  // Launches the collective on the worker's communicator (worker thread).
  std::function<Work(Communicator&)> start;
  // Called once, on the worker thread, after the collective completed (null)
  // or failed (its error): copy results out, complete the c10d future.
  std::function<void(std::exception_ptr)> finish;
};

struct OverlapCounters {
  double commSeconds = 0;    // union of in-flight intervals
  double hiddenSeconds = 0;  // trainer CPU time inside those intervals
  std::uint64_t ops = 0;
  std::uint64_t busyPeriods = 0;
};

class CommWorker {
 public:
  explicit CommWorker(std::shared_ptr<Communicator> comm);
  ~CommWorker();  // drains and stops the thread (see shutdown)
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  void submit(CommOp op);
  void configure(bool async, int stages);
  bool async() const;
  int stages() const;
  OverlapCounters counters(bool reset);
  // Completes queued ops and stops the thread (idempotent; local, no
  // communication). The communicator stays alive for its owner to finalise.
  void shutdown();
  int rank() const { return rank_; }

 private:
  struct Queued {
    CommOp op;
    clockid_t callerClock;
    std::uint64_t ticket;
  };
  struct InFlight {
    Work work;
    CommOp op;  // kept until completion: its closures own the op's buffers
    std::uint64_t ticket;
    std::exception_ptr launchError;  // set when start() threw (work is then empty)
  };
  void run();
  void startOne(Queued& q, std::deque<InFlight>& inFlight);
  void completeOldest(std::deque<InFlight>& inFlight, std::exception_ptr error);
  void beginBusy(clockid_t callerClock);
  // Whether the submitting thread used CPU since the previous call (worker thread).
  bool trainerComputing();
  void endBusy();

  std::shared_ptr<Communicator> comm_;
  const int rank_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // worker: new ops or stop
  std::condition_variable finished_; // synchronous submitters, shutdown
  std::deque<Queued> queue_;
  bool stop_ = false;
  bool stopped_ = false;
  bool async_ = true;
  int stages_ = 2;
  std::uint64_t nextTicket_ = 1;
  std::uint64_t completedTicket_ = 0;  // every op up to this one completed
  // Busy-period bookkeeping (worker thread; copied out under mutex_).
  bool busy_ = false;
  double busyStartSeconds_ = 0;
  double busyStartCpuSeconds_ = 0;
  clockid_t busyClock_{};
  bool busyClockValid_ = false;
  double lastCheckCpu_ = 0;
  double lastCheckWall_ = 0;
  bool gentle_ = false;  // the trainer was computing at the last check: poll once per pause
  OverlapCounters counters_;
  std::thread thread_;
};

}  // namespace boostcomm::python
