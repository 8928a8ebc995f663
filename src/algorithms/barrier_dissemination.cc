// Dissemination barrier: in round i every rank signals rank + 2^i and waits
// for rank - 2^i; after ceil(log2 n) rounds everyone has heard, transitively,
// from everyone. Zero-byte messages; works for any n.
#include "algorithms/fold.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;

void buildBarrierDissemination(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const int n = spec.size;
  std::vector<StepId> prev;
  int tag = 0;
  for (int d = 1; d < n; d *= 2, ++tag) {
    const StepId sent = schedule.send(BufRef{BufferId::kRecv, 0}, 0, (spec.rank + d) % n, tag);
    dependOn(schedule, prev);
    const StepId got = schedule.recv(BufRef{BufferId::kRecv, 0}, 0, (spec.rank - d + n) % n, tag);
    dependOn(schedule, prev);
    prev = {sent, got};
  }
}

}  // namespace boostcomm::algorithms
