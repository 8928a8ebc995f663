#include "interposer/deferred_setup.h"

#include <cstdio>
#include <exception>

#include "core/thread_name.h"
#include "interposer/setup.h"

namespace boostcomm::interposer {

DeferredSetup::DeferredSetup(CommEntry& entry) : reserved_(entry.reserved) {
  entry.reserved = MPI_COMM_NULL;
  thread_ = std::thread([this, e = &entry] {
    core::nameThisThread("bc-mpi-setup");
    run(e);
  });
}

DeferredSetup::~DeferredSetup() { join(); }

void DeferredSetup::run(CommEntry* entry) {
  // Every MPI call of this thread is boostcomm's own (state.h).
  Guard guard;
  const bool ok = buildRouted(*entry, reserved_, true);
  if (ok) {
    try {
      entry->comm->useProgressThread();  // its calls are nonblocking ones
    } catch (const std::exception& e) {
      // Then only MPI_Wait / MPI_Waitall advance its calls.
      std::fprintf(stderr, "boostcomm_mpi: rank %d: no progress thread: %s\n", entry->rank, e.what());
    }
    entry->progressThread = true;
  }
  std::vector<std::shared_ptr<Pending>> relayed;
  {
    std::lock_guard lock(mutex_);
    for (const std::shared_ptr<Pending>& pending : queue_) {
      if (ok) {
        try {
          launch(*entry, pending);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "boostcomm_mpi: rank %d: %s through boostcomm failed: %s\n", entry->rank, pending->name,
                       e.what());
          completeRequest(*pending, MPI_ERR_OTHER);
        }
      } else {
        const int rc = pending->pmpi(reserved_, &pending->inner);
        if (rc == MPI_SUCCESS) relayed.push_back(pending);
        else completeRequest(*pending, rc);
      }
    }
    queue_.clear();
    state_.store(ok ? State::kReady : State::kFailed, std::memory_order_release);
  }
  ended_.notify_all();
  // A failed set-up: the queued calls' own requests complete theirs.
  for (const std::shared_ptr<Pending>& pending : relayed) {
    MPI_Status status;
    const int rc = PMPI_Wait(&pending->inner, &status);
    completeRequest(*pending, rc);
  }
}

DeferredSetup::State DeferredSetup::enqueue(const std::shared_ptr<Pending>& pending) {
  std::lock_guard lock(mutex_);
  const State state = state_.load(std::memory_order_acquire);
  if (state == State::kRunning) {
    startRequest(pending);
    queue_.push_back(pending);
  }
  return state;
}

DeferredSetup::State DeferredSetup::wait() {
  std::unique_lock lock(mutex_);
  ended_.wait(lock, [this] { return state_.load(std::memory_order_acquire) != State::kRunning; });
  return state_.load(std::memory_order_acquire);
}

void DeferredSetup::join() {
  if (thread_.joinable()) thread_.join();
}

void DeferredSetup::freeReserved() {
  if (reserved_ != MPI_COMM_NULL) PMPI_Comm_free(&reserved_);
}

MPI_Comm settleForBlocking(CommEntry& entry) {
  if (entry.shortcut || !entry.deferred) return MPI_COMM_NULL;
  if (entry.deferred->wait() == DeferredSetup::State::kFailed) return entry.deferred->fallbackComm();
  entry.shortcut = true;
  return MPI_COMM_NULL;
}

}  // namespace boostcomm::interposer
