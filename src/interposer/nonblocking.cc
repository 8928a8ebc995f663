// The nonblocking collectives. A routed call returns a generalized request
// that its boostcomm Work completes (requests.h). Something must advance the
// Work while the application waits in MPI: the Communicator's progress
// thread (started on the first routed nonblocking call; hence these calls
// fall through below MPI_THREAD_MULTIPLE or with BOOSTCOMM_PROGRESS=caller),
// and MPI_Wait / MPI_Waitall, wrapped here, which drive it on the caller's
// thread. The thread also keeps MPI's progress rule: a rank blocked in some
// other MPI call (a PMPI_Recv) still advances its part of the collective, as
// MPI's own nonblocking collectives do. A communicator whose first call is
// one of these is set up in the background (deferred_setup.h).
#include <exception>
#include <memory>

#include "interposer/deferred_setup.h"
#include "interposer/plan.h"
#include "interposer/requests.h"
#include "interposer/route.h"

using namespace boostcomm::interposer;

namespace {

// Pmpi: the call as PMPI on a given communicator, capturing its arguments by
// value (a call queued behind a set-up that then fails runs it later).
template <typename MakePlan, typename Pmpi>
int nonblockingCall(Call call, const char* name, MPI_Comm comm, MPI_Request* request, MakePlan makePlan, Pmpi pmpi) {
  if (Guard::active()) return pmpi(comm, request);
  CallTimer timer(call);
  Reason reason = Reason::kRouted;
  CommEntry* entry = routeComm(call, comm, false, reason);
  if (entry != nullptr) {
    auto pending = std::make_shared<Pending>();
    pending->name = name;
    Plan& plan = pending->plan;
    plan.comm = comm;
    try {
      reason = sizeRules(makePlan(plan, *entry), *entry, plan);
      if (reason == Reason::kRouted) {
        if (entry->deferred && !entry->deferred->ready()) {
          pending->pmpi = pmpi;
          const DeferredSetup::State state = entry->deferred->enqueue(pending);
          if (state == DeferredSetup::State::kRunning) {
            *request = pending->request;
            timer.done(Reason::kRouted);
            return MPI_SUCCESS;
          }
          if (state == DeferredSetup::State::kFailed) {
            const MPI_Comm fallback = entry->deferred->fallbackComm();
            return passThrough(timer, true, Reason::kCreateFailed, [&] { return pmpi(fallback, request); });
          }
        }
        launch(*entry, pending);
        *request = pending->request;
        timer.done(Reason::kRouted);
        return MPI_SUCCESS;
      }
    } catch (const std::exception& e) {
      timer.done(Reason::kRouted);
      return reportError(comm, name, e);
    }
  }
  return passThrough(timer, entry != nullptr, reason, [&] { return pmpi(comm, request); });
}

}  // namespace

extern "C" {

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return nonblockingCall(
      Call::kIallreduce, "MPI_Iallreduce", comm, request,
      [&](Plan& p, const CommEntry&) { return p.allreduce(sendbuf, recvbuf, count, datatype, op); },
      [=](MPI_Comm c, MPI_Request* r) { return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, c, r); });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIbcast, "MPI_Ibcast", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.bcast(buffer, count, datatype, root, e); },
      [=](MPI_Comm c, MPI_Request* r) { return PMPI_Ibcast(buffer, count, datatype, root, c, r); });
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIallgather, "MPI_Iallgather", comm, request,
      [&](Plan& p, const CommEntry& e) {
        return p.allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, e);
      },
      [=](MPI_Comm c, MPI_Request* r) {
        return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, c, r);
      });
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIallgatherv, "MPI_Iallgatherv", comm, request,
      [&](Plan& p, const CommEntry& e) {
        return p.allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, e);
      },
      [=](MPI_Comm c, MPI_Request* r) {
        return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, c, r);
      });
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIreduceScatterBlock, "MPI_Ireduce_scatter_block", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatterBlock(sendbuf, recvbuf, recvcount, datatype, op, e); },
      [=](MPI_Comm c, MPI_Request* r) {
        return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, c, r);
      });
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIreduceScatter, "MPI_Ireduce_scatter", comm, request,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, e); },
      [=](MPI_Comm c, MPI_Request* r) {
        return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, c, r);
      });
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return nonblockingCall(
      Call::kIbarrier, "MPI_Ibarrier", comm, request, [&](Plan& p, const CommEntry&) { return p.barrier(); },
      [](MPI_Comm c, MPI_Request* r) { return PMPI_Ibarrier(c, r); });
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (request != nullptr && !Guard::active()) drive(*request);
  return PMPI_Wait(request, status);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (requests != nullptr && !Guard::active() && anyPending()) {
    for (int i = 0; i < count; ++i) drive(requests[i]);
  }
  return PMPI_Waitall(count, requests, statuses);
}

}  // extern "C"
