// CommunicatorImpl, progress (declared in communicator_impl.h): a Work's
// test, wait and completion callback, one progress sweep for clients, and
// the progress thread. Everything advances in the one progress engine
// (executor/progress_engine.h); these only decide who drives it when.
#include <cstdio>
#include <functional>
#include <mutex>

#include "api/communicator_impl.h"
#include "core/check.h"
#include "transport/mpi/mpi_transport.h"

namespace boostcomm::detail {

bool CommunicatorImpl::test(WorkState& work) {
  {
    executor::EngineLock lock(*engine_);
    if (!work.isDone()) {
      checkUsable();
      engine_->progress();
    }
  }
  // Done first: the error is published before done and may still be being
  // written while the operation is not done.
  if (!work.isDone()) return false;
  if (work.error()) std::rethrow_exception(work.error());
  return true;
}

void CommunicatorImpl::wait(WorkState& work, std::optional<std::chrono::milliseconds> timeout) {
  {
    executor::EngineLock lock(*engine_);
    if (!work.isDone()) {
      checkUsable();
      engine_->driveUntilDone(work.id, timeout ? timeout : deadlineFor({}), "Work::wait", rank_);
    }
  }
  if (work.error()) std::rethrow_exception(work.error());
}

void CommunicatorImpl::onComplete(WorkState& work, std::function<void(std::exception_ptr)> callback) {
  executor::EngineLock lock(*engine_);
  engine_->addCallback(work, std::move(callback));
}

void CommunicatorImpl::progressOnce() {
  executor::EngineLock lock(*engine_);
  if (finalized_ || engine_->failure() || (engine_->idle() && !engine_->messagesPending())) return;
  engine_->progress();
}

void CommunicatorImpl::setProgressThread(bool on) {
  {
    std::lock_guard lock(mutex_);
    checkUsable();
    BC_INVALID(!on || transport_->callableFromAnyThread(), rank_,
               "setProgressThread: a progress thread needs MPI_THREAD_MULTIPLE, but MPI was initialised with level "
                   << transport::mpiThreadLevel()
                   << " (initialise it with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or use "
                      "BOOSTCOMM_PROGRESS=caller)");
  }
  engine_->setThreadEnabled(on);
}

bool CommunicatorImpl::progressThread() const { return engine_->threadEnabled(); }

void CommunicatorImpl::useProgressThread() {
  if (progressMode_ == ProgressMode::kCaller) return;
  if (!transport_->callableFromAnyThread()) {
    // Correct without a thread, only less overlapped: say so once.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      if (rank_ == 0)
        std::fprintf(stderr,
                     "boostcomm: warning: MPI is not initialised with MPI_THREAD_MULTIPLE, so no progress thread "
                     "runs; collectives advance only inside boostcomm calls (less overlap)\n");
    });
    return;
  }
  setProgressThread(true);
}

}  // namespace boostcomm::detail
