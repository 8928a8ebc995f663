#include "interposer/requests.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <unordered_map>

#include "interposer/state.h"

namespace boostcomm::interposer {

namespace {

// Requests started here and not yet freed: MPI_Wait looks them up.
std::mutex g_pendingMutex;
std::unordered_map<MPI_Request, std::shared_ptr<Pending>> g_pending;
std::atomic<int> g_pendingCount{0};

std::shared_ptr<Pending> findPending(MPI_Request request) {
  if (g_pendingCount.load(std::memory_order_acquire) == 0 || request == MPI_REQUEST_NULL) return nullptr;
  std::lock_guard lock(g_pendingMutex);
  auto it = g_pending.find(request);
  return it == g_pending.end() ? nullptr : it->second;
}

int queryFn(void* state, MPI_Status* status) {
  auto& pending = **static_cast<std::shared_ptr<Pending>*>(state);
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  const int error = pending.error.load(std::memory_order_acquire);
  status->MPI_ERROR = error;
  return error;
}

int freeFn(void* state) {
  auto* holder = static_cast<std::shared_ptr<Pending>*>(state);
  {
    std::lock_guard lock(g_pendingMutex);
    g_pending.erase((*holder)->request);
    g_pendingCount.store(static_cast<int>(g_pending.size()), std::memory_order_release);
  }
  delete holder;
  return MPI_SUCCESS;
}

// A collective cannot be cancelled (MPI says the same of its own).
int cancelFn(void*, int) { return MPI_SUCCESS; }

}  // namespace

void startRequest(const std::shared_ptr<Pending>& pending) {
  PMPI_Grequest_start(queryFn, freeFn, cancelFn, new std::shared_ptr<Pending>(pending), &pending->request);
  std::lock_guard lock(g_pendingMutex);
  g_pending.emplace(pending->request, pending);
  g_pendingCount.store(static_cast<int>(g_pending.size()), std::memory_order_release);
}

void launch(CommEntry& entry, const std::shared_ptr<Pending>& pending) {
  {
    Guard guard;
    if (!entry.progressThread) {
      entry.comm->useProgressThread();
      entry.progressThread = true;
    }
    pending->work = pending->plan.submit(*entry.comm);
  }
  if (pending->request == MPI_REQUEST_NULL) startRequest(pending);
  pending->launched.store(true, std::memory_order_release);
  const int rank = entry.rank;
  // Runs once, on whichever thread completes the Work (possibly right here).
  pending->work.onComplete([pending, rank](std::exception_ptr error) {
    int rc = MPI_SUCCESS;
    try {
      if (error) std::rethrow_exception(error);
      Guard guard;
      pending->plan.complete();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "boostcomm_mpi: rank %d: %s through boostcomm failed: %s\n", rank, pending->name, e.what());
      rc = MPI_ERR_OTHER;
    }
    completeRequest(*pending, rc);
  });
}

void completeRequest(Pending& pending, int error) {
  pending.error.store(error, std::memory_order_release);
  PMPI_Grequest_complete(pending.request);
}

// Errors surface through the query function.
void drive(MPI_Request request) {
  auto pending = findPending(request);
  // Not launched yet (queued behind a set-up): PMPI_Wait spins until the
  // set-up's thread launched it and the progress thread completed it.
  if (!pending || !pending->launched.load(std::memory_order_acquire)) return;
  Guard guard;
  try {
    pending->work.wait();
  } catch (const std::exception&) {
    // Reported by the completion callback, returned by PMPI_Wait.
  }
}

bool anyPending() { return g_pendingCount.load(std::memory_order_acquire) > 0; }

}  // namespace boostcomm::interposer
