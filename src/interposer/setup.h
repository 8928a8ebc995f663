// Setting a boostcomm Communicator up over an application's MPI communicator:
// inline at a first blocking call (entryForBlocking, state.h), or in the
// background at a first nonblocking one (deferred_setup.h); both end in
// buildRouted.
#pragma once

#include "interposer/state.h"

namespace boostcomm::interposer {

// Collective over `over` (the application's communicator inline, the
// private duplicate of a background set-up): creates entry.comm over it,
// agrees across ranks (one PMPI_Allreduce on `over`) and probes the range
// boostcomm's selection sends to MPI's own algorithm. False on every rank
// alike when any rank failed; entry.comm then stays empty.
// reserved: `over` was reserved at creation (no communicator may be created
// over it: createCommunicatorOverReservedMpi), else it is duplicated.
bool buildRouted(CommEntry& entry, MPI_Comm over, bool reserved);

}  // namespace boostcomm::interposer
