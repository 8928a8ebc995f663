// Hierarchical allgather(v):
//   1. inter-node: the ranks with local rank l on every node ring-allgather
//      their own blocks (L such rings run in parallel, one per local rank), so
//      each node sends its L blocks across the slow links once per other node;
//   2. intra-node: for every node b, a ring allgather over this node's ranks
//      spreads the blocks of node b's ranks (local rank l holds the one of
//      node b's local rank l since phase 1). These N rings run in parallel.
// Blocks keep world-rank order in recv, whatever the rank-to-node mapping:
// ring segments are arbitrary ranges.
//
// Wire format (spec.wire): phase 1's messages travel 16-bit; each rank
// first rounds its own block in recv (what its receivers decode), and
// phase 2 copies float32, so every rank holds the same bits.
#include "algorithms/hier.h"
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;
using executor::Frame;

void buildAllgatherHier(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const HierContext ctx = makeHierContext(spec, 1);
  const std::size_t es = spec.elementSize();
  const std::vector<Range> blocks = blockLayout(spec);
  const NodeLayout& layout = ctx.layout;
  const int tagsPerRing = spec.tagSpan / (1 + ctx.nodes);  // the inter ring, then one intra ring per node
  auto member = [&](int node, int local) {
    return layout.members[static_cast<std::size_t>(node)][static_cast<std::size_t>(local)];
  };
  auto out = [&](const RingLayout& ring) {
    return [&ring, es](int seg, std::size_t e) {
      return BufRef{BufferId::kRecv, (ring.segments[static_cast<std::size_t>(seg)].offset + e) * es};
    };
  };
  const Range own = blocks[static_cast<std::size_t>(spec.rank)];
  const StepId placed = schedule.copy(BufRef{BufferId::kRecv, own.offset * es}, BufRef{BufferId::kSend, 0}, own.count * es);

  std::vector<Range> interSegments;
  for (int b = 0; b < ctx.nodes; ++b) interSegments.push_back(blocks[static_cast<std::size_t>(member(b, ctx.localRank))]);
  const CollectiveSpec interSpec = subSpec(spec, ctx, executor::kInterComm, tagsPerRing);
  const RingLayout interRing = makeRingLayout(interSpec, interSegments);
  const auto crossed = inFrame(schedule, Frame{executor::kInterComm, 0, {BufferId::kSend, 0}, {BufferId::kRecv, 0}, {placed}}, [&] {
    if (interSpec.wire == WireFormat::kOff) {
      ringAllgather(interSpec, interRing, schedule, [&](int, std::size_t e) { return BufRef{BufferId::kSend, e * es}; },
                    out(interRing), {}, nullptr, 0);
      return;
    }
    const executor::WireScope wire(schedule, interSpec.wire);
    const std::vector<StepId> rounded = roundOwnedSegment(interRing, schedule, out(interRing), ctx.node, placed);
    ringAllgather(interSpec, interRing, schedule, out(interRing), out(interRing), rounded, nullptr, 0);
  });

  const CollectiveSpec intraSpec = subSpec(spec, ctx, executor::kIntraComm, tagsPerRing);
  for (int b = 0; b < ctx.nodes; ++b) {
    std::vector<Range> segments;
    for (int j = 0; j < ctx.perNode; ++j) segments.push_back(blocks[static_cast<std::size_t>(member(b, j))]);
    const RingLayout ring = makeRingLayout(intraSpec, segments);
    inFrame(schedule, Frame{executor::kIntraComm, tagsPerRing * (1 + b), {BufferId::kSend, 0}, {BufferId::kRecv, 0}, crossed}, [&] {
      ringAllgather(intraSpec, ring, schedule, out(ring), out(ring), {}, nullptr, 0);
    });
  }
}

}  // namespace boostcomm::algorithms
