// Gives a transport its shared-memory engine when it can have one.
#pragma once

#include "transport/transport.h"

namespace boostcomm::shm {

// Collective over the transport's group. Attaches a ShmEngine when every
// rank is on this node and BOOSTCOMM_SHM is not 0; otherwise leaves the
// transport without one. Every rank reaches the same decision. The segment
// follows the transport: an MPI shared window for MPI (MPI_COMM_TYPE_SHARED
// must span the communicator), a POSIX shared-memory object for the store
// transport (every rank's node id equal). Other transports get none.
void attachSharedMemory(transport::Transport& transport);

// For a group known to be on one node that must not create MPI communicators
// (api/mpi_comm.h, createCommunicatorOverReservedMpi): a POSIX segment over
// the transport whatever the transport. Collective; true when attached,
// alike on every rank (a segment failure is agreed, and then false).
bool attachPosixSharedMemory(transport::Transport& transport);

}  // namespace boostcomm::shm
