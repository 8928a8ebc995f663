// Internal (not installed): a Communicator over an MPI communicator that the
// library did not create. Used by the MPI interposer (src/interposer/), which
// gives every application communicator it accelerates a boostcomm
// Communicator of its own.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstddef>
#include <memory>
#include <optional>

#include "boostcomm/communicator.h"

namespace boostcomm::detail {

// Collective over `comm`: duplicates it (boostcomm's traffic never matches
// the application's messages on it), attaches shared memory where every rank
// shares a node, and detects the layout. `comm` itself stays the caller's;
// finalize() frees the duplicate and never finalizes MPI.
std::shared_ptr<Communicator> createCommunicatorOverMpi(MPI_Comm comm);

// The same without creating any MPI communicator, for the interposer's
// set-up in the background (src/interposer/deferred_setup.h): Open MPI 4.1
// allocates context ids one at a time per process, so a communicator
// creation waiting for its peers blocks the application's own
// MPI_Comm_dup / split elsewhere, and a peer may wait in those for us.
// `reserved`: a communicator made for boostcomm's traffic alone, every rank
// on one node (the caller checked both when it made it); used directly, never
// freed here (the caller frees it after finalize()), its error handler the
// caller's to set (MPI_ERRORS_RETURN). The shared-memory engine sits on a
// POSIX segment instead of an MPI window (a window creates a communicator).
// Collective; throws on every rank alike when shared memory cannot be
// attached (without it, boostcomm would create a control-channel communicator).
std::shared_ptr<Communicator> createCommunicatorOverReservedMpi(MPI_Comm reserved);

// The largest payload up to which `comm`'s selection sends `coll` to the
// backend's own collective by default (the route table, api/route.h);
// nullopt when it does not even at 0 bytes. Where it does, the interposer
// calls PMPI on the application's communicator instead.
std::optional<std::size_t> backendUpTo(Communicator& comm, Collective coll);

}  // namespace boostcomm::detail
