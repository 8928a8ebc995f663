// What a backend (MPI) collective is modelled as: the simulator runs its
// schedule in place of the backend call (simulate/program.h), and link
// accounting (executor/link_meter.h) counts its sends as the bytes that call
// put on each level, since the backend's own messages are not visible.
//
// Open MPI 4.1's fixed decision rules (coll/tuned), simplified to their main
// regimes. Allreduce: recursive doubling below 64 KiB, Rabenseifner (rhd) on
// fewer than 4 ranks from 64 KiB, ring otherwise (the real rules switch at
// thresholds that vary with the rank count).
// Allgather and reduce-scatter: ring. Broadcast: binomial. Barrier:
// dissemination. A backend that is not Open MPI (NCCL's rings and trees,
// MPICH) is a different model; docs/SIMULATOR.md lists this as a limit.
#pragma once

#include <cstddef>

#include "algorithms/node_layout.h"
#include "boostcomm/types.h"
#include "executor/link_meter.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

const char* nativeModelOf(Collective collective, std::size_t bytes, int ranks);

// Send bytes per level of a backend/shm step `call` on communicator `comm`
// (executor::kWorldComm / kIntraComm / kInterComm) for world rank `rank` of
// `layout`, per the model above. Every step of a kIntraComm call is intra-node,
// of a kInterComm call inter-node; a world call's sends go by the peer's node.
executor::LevelBytes nativeLinkBytes(const executor::NativeCall& call, int comm, DataType dtype, const NodeLayout& layout,
                                     int rank);

}  // namespace boostcomm::algorithms
