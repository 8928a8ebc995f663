// The MPI_Request of a routed nonblocking call: a generalized request
// (MPI_Grequest_start) that the call's boostcomm Work completes. The Work's
// completion callback finishes the plan (unpacking) and calls
// MPI_Grequest_complete; Open MPI's MPI_Wait on a generalized request only
// spins its own progress until then, so MPI_Wait / MPI_Waitall (nonblocking.cc)
// drive a launched Work on the caller's thread instead of waiting for the
// progress thread's next poll.
//
// Launched: submitted to boostcomm. A call queued behind a background set-up
// (deferred_setup.h) has its request at once and is launched later, by the
// set-up's thread, or, should the set-up fail, runs as the same PMPI call on
// the set-up's private duplicate.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <atomic>
#include <functional>
#include <memory>

#include "boostcomm/work.h"
#include "interposer/plan.h"

namespace boostcomm::interposer {

struct CommEntry;

struct Pending {
  Plan plan;
  Work work;                        // valid once `launched`
  std::atomic<bool> launched{false};
  MPI_Request request = MPI_REQUEST_NULL;  // what the application holds
  std::atomic<int> error{MPI_SUCCESS};     // reported through the request's status
  const char* name = "";                   // "MPI_Iallreduce", for messages
  // Queued behind a background set-up: the call as PMPI on another
  // communicator, and its request there, for a failed set-up.
  std::function<int(MPI_Comm, MPI_Request*)> pmpi;
  MPI_Request inner = MPI_REQUEST_NULL;
};

// Starts the generalized request (pending.request) and lists it for MPI_Wait.
void startRequest(const std::shared_ptr<Pending>& pending);
// Submits the plan to entry's boostcomm Communicator (its progress thread on
// from the first call) and completes the request when the Work completes.
// Starts the request first when not yet started. Throws what boostcomm throws.
void launch(CommEntry& entry, const std::shared_ptr<Pending>& pending);
// Completes the request with `error` (MPI_SUCCESS or an MPI error class).
void completeRequest(Pending& pending, int error);
// MPI_Wait's help: runs a launched routed request's Work on this thread.
void drive(MPI_Request request);
// Whether any routed request is listed (one atomic load).
bool anyPending();

}  // namespace boostcomm::interposer
