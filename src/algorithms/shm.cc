// shm: the node's shared-memory engine runs the whole call (src/shm/).
//
// One kShm step; the engine pipelines copy-in, reduction and copy-out over
// chunks itself (src/shm/engine.h), and finishes kAvg. Available when the
// communicator's transport has a shared-memory engine: every rank on one node,
// over MPI, with BOOSTCOMM_SHM=1.
#include <climits>

#include "algorithms/registry.h"

namespace boostcomm::algorithms {

std::string shmUnsupported(const CollectiveSpec& spec) {
  if (!spec.sharedMemory) {
    return "the transport has no shared-memory engine (ranks on several nodes, the in-process transport, or "
           "BOOSTCOMM_SHM=0)";
  }
  // allgatherv counts and displacements travel as int (as for native).
  if (spec.collective == Collective::kAllgather && spec.payloadBytes() / spec.elementSize() > INT_MAX) {
    return "allgather of more than INT_MAX elements";
  }
  return {};
}

void buildShm(const CollectiveSpec& spec, executor::Schedule& schedule) {
  executor::NativeCall call;
  call.collective = spec.collective;
  call.root = spec.root;
  call.count = spec.collective == Collective::kAllgather && !spec.counts.empty()
                   ? spec.counts[static_cast<std::size_t>(spec.rank)]
                   : spec.count;
  schedule.shm(call, spec.divisor());
}

}  // namespace boostcomm::algorithms
