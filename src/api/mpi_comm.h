// Internal (not installed): a Communicator over an MPI communicator that the
// library did not create. Used by the MPI interposer (src/interposer/), which
// gives every application communicator it accelerates a boostcomm
// Communicator of its own.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <memory>

#include "boostcomm/communicator.h"

namespace boostcomm::detail {

// Collective over `comm`: duplicates it (boostcomm's traffic never matches
// the application's messages on it), attaches shared memory where every rank
// shares a node, and detects the layout. `comm` itself stays the caller's;
// finalize() frees the duplicate and never finalizes MPI.
std::shared_ptr<Communicator> createCommunicatorOverMpi(MPI_Comm comm);

}  // namespace boostcomm::detail
