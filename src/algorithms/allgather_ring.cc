// Ring allgather(v): rank r's block travels n-1 hops around the ring, in
// chunks so a forward can start before the whole block arrived. Varying
// counts need nothing special: segments are the blocks.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

void buildAllgatherRing(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  using executor::BufferId;
  const std::vector<Range> blocks = blockLayout(spec);
  const Range own = blocks[static_cast<std::size_t>(spec.rank)];
  // Own block into place (skipped when the call is in place).
  schedule.copy(at(BufferId::kRecv, own.offset, es), at(BufferId::kSend, 0, es), own.count * es);
  if (spec.size == 1) return;
  const RingLayout layout = makeRingLayout(spec, blocks);
  auto fromSend = [&](int, std::size_t e) { return at(BufferId::kSend, e, es); };
  auto out = [&](int seg, std::size_t e) { return at(BufferId::kRecv, layout.segments[seg].offset + e, es); };
  ringAllgather(spec, layout, schedule, fromSend, out, /*ownedReady=*/{}, /*recvDeps=*/nullptr, /*tagBase=*/0);
}

}  // namespace boostcomm::algorithms
