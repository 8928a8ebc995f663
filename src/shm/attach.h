// Gives an MPI transport its shared-memory engine when it can have one.
#pragma once

#include "transport/mpi/mpi_transport.h"

namespace boostcomm::shm {

// Collective over the transport's communicator. Attaches a ShmEngine when
// every rank is on this node (MPI_COMM_TYPE_SHARED spans the communicator)
// and BOOSTCOMM_SHM is not 0; otherwise leaves the transport without one.
// Every rank reaches the same decision.
void attachSharedMemory(transport::MpiTransport& transport);

}  // namespace boostcomm::shm
