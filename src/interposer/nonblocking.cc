// The nonblocking collectives. A routed call returns a generalized request
// (MPI_Grequest_start) that the boostcomm Work completes: the Work's
// completion callback finishes the plan (unpacking) and calls
// MPI_Grequest_complete. Open MPI's MPI_Wait on a generalized request only
// spins its own progress until that happens, so something must advance the
// boostcomm Work meanwhile: the Communicator's progress thread (started on
// the first routed nonblocking call; hence these calls fall through below
// MPI_THREAD_MULTIPLE or with BOOSTCOMM_PROGRESS=caller), and MPI_Wait /
// MPI_Waitall, wrapped here, drive it directly on the caller's thread instead
// of waiting for the thread's next poll. A thread also keeps MPI's progress
// rule: a rank blocked in some other MPI call (a PMPI_Recv) still advances
// its part of the collective, as MPI's own nonblocking collectives do.
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/tunables.h"
#include "interposer/plan.h"
#include "interposer/route.h"

using namespace boostcomm::interposer;

namespace {

struct Pending {
  Plan plan;
  boostcomm::Work work;
  MPI_Request request = MPI_REQUEST_NULL;
  std::atomic<int> error{MPI_SUCCESS};
};

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

bool progressAvailable() {
  static const bool available =
      settings().threadMultiple && boostcomm::core::tunableEnum(boostcomm::core::kTunableProgress) != "caller";
  return available;
}

template <typename MakePlan, typename Pmpi>
int nonblockingCall(Call call, const char* name, MPI_Comm comm, MPI_Request* request, MakePlan makePlan, Pmpi pmpi) {
  if (Guard::active()) return pmpi();
  CallTimer timer(call);
  Reason reason = Reason::kRouted;
  CommEntry* entry = routeComm(call, comm, false, reason);
  if (entry != nullptr && !progressAvailable()) {
    entry = nullptr;
    reason = Reason::kThreadLevel;
  }
  if (entry != nullptr) {
    auto pending = std::make_shared<Pending>();
    Plan& plan = pending->plan;
    plan.comm = comm;
    try {
      reason = sizeRules(makePlan(plan, *entry), *entry, plan);
      if (reason == Reason::kRouted) {
        {
          Guard guard;
          if (!entry->progressThread) {
            entry->comm->useProgressThread();
            entry->progressThread = true;
          }
          pending->work = plan.submit(*entry->comm);
        }
        PMPI_Grequest_start(queryFn, freeFn, cancelFn, new std::shared_ptr<Pending>(pending), &pending->request);
        *request = pending->request;
        {
          std::lock_guard lock(g_pendingMutex);
          g_pending.emplace(pending->request, pending);
          g_pendingCount.store(static_cast<int>(g_pending.size()), std::memory_order_release);
        }
        const int rank = entry->rank;
        // Runs once, on whichever thread completes the Work (possibly right here).
        pending->work.onComplete([pending, rank, name](std::exception_ptr error) {
          try {
            if (error) std::rethrow_exception(error);
            Guard guard;
            pending->plan.complete();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "boostcomm_mpi: rank %d: %s through boostcomm failed: %s\n", rank, name, e.what());
            pending->error.store(MPI_ERR_OTHER, std::memory_order_release);
          }
          PMPI_Grequest_complete(pending->request);
        });
        timer.done(Reason::kRouted);
        return MPI_SUCCESS;
      }
    } catch (const std::exception& e) {
      timer.done(Reason::kRouted);
      return reportError(comm, name, e);
    }
  }
  return passThrough(timer, entry != nullptr, reason, pmpi);
}

// Drives a routed request's Work on this thread (its callback completes the
// generalized request); errors surface through the query function.
void drive(MPI_Request request) {
  if (auto pending = findPending(request)) {
    Guard guard;
    try {
      pending->work.wait();
    } catch (const std::exception&) {
      // Reported by the completion callback, returned by PMPI_Wait.
    }
  }
}

}  // namespace

extern "C" {

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return nonblockingCall(
      Call::kIallreduce, "MPI_Iallreduce", comm, request,
      [&](Plan& p, const CommEntry&) { return p.allreduce(sendbuf, recvbuf, count, datatype, op); },
      [&] { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request); });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIbcast, "MPI_Ibcast", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.bcast(buffer, count, datatype, root, e); },
      [&] { return PMPI_Ibcast(buffer, count, datatype, root, comm, request); });
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIallgather, "MPI_Iallgather", comm, request,
      [&](Plan& p, const CommEntry& e) {
        return p.allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, e);
      },
      [&] { return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request); });
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIallgatherv, "MPI_Iallgatherv", comm, request,
      [&](Plan& p, const CommEntry& e) {
        return p.allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, e);
      },
      [&] {
        return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
      });
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIreduceScatterBlock, "MPI_Ireduce_scatter_block", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatterBlock(sendbuf, recvbuf, recvcount, datatype, op, e); },
      [&] { return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request); });
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIreduceScatter, "MPI_Ireduce_scatter", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, e); },
      [&] { return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request); });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIbarrier, "MPI_Ibarrier", comm, request, [&](Plan& p, const CommEntry&) { return p.barrier(); },
      [&] { return PMPI_Ibarrier(comm, request); });
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (request != nullptr && !Guard::active()) drive(*request);
  return PMPI_Wait(request, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (requests != nullptr && !Guard::active() && g_pendingCount.load(std::memory_order_acquire) > 0) {
    for (int i = 0; i < count; ++i) drive(requests[i]);
  }
  return PMPI_Waitall(count, requests, statuses);
}

}  // extern "C"
