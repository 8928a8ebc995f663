// The blocking collectives: MPI_Allreduce, MPI_Bcast, MPI_Allgather,
// MPI_Allgatherv, MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Barrier.
// Each either runs through the communicator's boostcomm Communicator or calls
// its PMPI_ twin with the arguments untouched.
#include <exception>

#include "interposer/deferred_setup.h"
#include "interposer/plan.h"
#include "interposer/route.h"

using namespace boostcomm::interposer;

namespace {

// One Plan per thread, reused: its staging vectors keep their capacity, so
// the routed path allocates nothing after warm-up. A plain pointer (the Plan
// lives as long as the process): a thread_local with a destructor would add
// a TLS-init call to every access.
thread_local Plan* t_plan = nullptr;

// Pmpi: the call as PMPI on a given communicator (the application's, or the
// private duplicate of a failed background set-up).
template <typename MakePlan, typename Pmpi>
int blockingCall(Call call, const char* name, MPI_Comm comm, MakePlan makePlan, Pmpi pmpi) {
  if (Guard::active()) return pmpi(comm);  // boostcomm's own call: not counted, not timed
  CallTimer timer(call);
  Reason reason = Reason::kRouted;
  CommEntry* entry = routeComm(call, comm, true, reason);
  if (entry != nullptr) {
    // Set up in the background (deferred_setup.h): wait for it to end.
    const MPI_Comm fallback = entry->shortcut ? MPI_COMM_NULL : settleForBlocking(*entry);
    if (t_plan == nullptr) t_plan = new Plan;
    Plan& plan = *t_plan;
    plan.comm = comm;
    try {
      reason = sizeRules(makePlan(plan, *entry), *entry, plan);
      if (reason == Reason::kRouted && fallback != MPI_COMM_NULL) {
        return passThrough(timer, true, Reason::kCreateFailed, [&] { return pmpi(fallback); });
      }
      if (reason == Reason::kRouted) {
        Guard guard;
        plan.run(*entry->comm);
        plan.complete();
        timer.done(Reason::kRouted);
        return MPI_SUCCESS;
      }
    } catch (const std::exception& e) {
      timer.done(Reason::kRouted);
      return reportError(comm, name, e);
    }
  }
  return passThrough(timer, entry != nullptr, reason, [&] { return pmpi(comm); });
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return blockingCall(
      Call::kAllreduce, "MPI_Allreduce", comm,
      [&](Plan& p, const CommEntry&) { return p.allreduce(sendbuf, recvbuf, count, datatype, op); },
      [&](MPI_Comm c) { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, c); });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return blockingCall(
      Call::kBcast, "MPI_Bcast", comm, [&](Plan& p, const CommEntry& e) { return p.bcast(buffer, count, datatype, root, e); },
      [&](MPI_Comm c) { return PMPI_Bcast(buffer, count, datatype, root, c); });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return blockingCall(
      Call::kAllgather, "MPI_Allgather", comm,
      [&](Plan& p, const CommEntry& e) {
        return p.allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, e);
      },
      [&](MPI_Comm c) { return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, c); });
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return blockingCall(
      Call::kAllgatherv, "MPI_Allgatherv", comm,
      [&](Plan& p, const CommEntry& e) {
        return p.allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, e);
      },
      [&](MPI_Comm c) {
        return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, c);
      });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return blockingCall(
      Call::kReduceScatterBlock, "MPI_Reduce_scatter_block", comm,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatterBlock(sendbuf, recvbuf, recvcount, datatype, op, e); },
      [&](MPI_Comm c) { return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, c); });
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return blockingCall(
      Call::kReduceScatter, "MPI_Reduce_scatter", comm,
      [&](Plan& p, const CommEntry& e) { return p.reduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, e); },
      [&](MPI_Comm c) { return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, c); });
}

int MPI_Barrier(MPI_Comm comm) {
  return blockingCall(
      Call::kBarrier, "MPI_Barrier", comm, [&](Plan& p, const CommEntry&) { return p.barrier(); },
      [&](MPI_Comm c) { return PMPI_Barrier(c); });
}

}  // extern "C"
