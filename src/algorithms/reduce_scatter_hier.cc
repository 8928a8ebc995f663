// Hierarchical reduce_scatter (rank (b, l) = local rank l of node b receives
// block B(b, l), reduced over every rank):
//   1. intra-node: for every node b', a ring reduce-scatter over this node's
//      ranks, with segments B(b', 0..L-1), leaves local rank l with its node's
//      partial sum of B(b', l) in scratch. These N rings run in parallel.
//   2. inter-node: the ranks with local rank l ring-reduce-scatter those N
//      partial blocks; node b's member ends with B(b, l) in recv.
// Each node sends (N-1)/N of the vector across the slow links, the minimum.
// kAvg sums in phase 1 and divides by the world size in phase 2.
//
// Wire format (spec.wire): only phase 2 crosses the slow link, so only its
// messages travel 16-bit (N-1 roundings of partial sums); phase 1 moves
// float32.
#include "algorithms/hier.h"
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;
using executor::Frame;

void buildReduceScatterHier(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const HierContext ctx = makeHierContext(spec, 1);
  const std::size_t es = spec.elementSize();
  const std::vector<Range> blocks = blockLayout(spec);
  const NodeLayout& layout = ctx.layout;
  const int tagsPerRing = spec.tagSpan / (1 + ctx.nodes);  // the inter ring, then one intra ring per node
  auto block = [&](int node, int local) {
    return blocks[static_cast<std::size_t>(layout.members[static_cast<std::size_t>(node)][static_cast<std::size_t>(local)])];
  };
  // Scratch for this rank's N partial blocks, B(b', l) for every node b'.
  std::vector<std::size_t> partial(static_cast<std::size_t>(ctx.nodes));
  for (int b = 0; b < ctx.nodes; ++b) {
    partial[static_cast<std::size_t>(b)] = schedule.reserveScratch(block(b, ctx.localRank).count * es);
  }

  CollectiveSpec intraSpec = subSpec(spec, ctx, executor::kIntraComm, tagsPerRing);
  intraSpec.op = spec.op == ReduceOp::kAvg ? ReduceOp::kSum : spec.op;
  std::vector<StepId> summed;
  for (int b = 0; b < ctx.nodes; ++b) {
    std::vector<Range> segments;
    for (int j = 0; j < ctx.perNode; ++j) segments.push_back(block(b, j));
    const RingLayout ring = makeRingLayout(intraSpec, segments);
    const std::size_t dst = partial[static_cast<std::size_t>(b)];
    const auto done = inFrame(schedule, Frame{executor::kIntraComm, tagsPerRing * (1 + b), {BufferId::kSend, 0}, {BufferId::kRecv, 0}, {}}, [&] {
      ringReduceScatter(
          intraSpec, ring, schedule,
          [&](int seg, std::size_t e) { return BufRef{BufferId::kSend, (ring.segments[static_cast<std::size_t>(seg)].offset + e) * es}; },
          [&, dst](int, std::size_t e) { return BufRef{BufferId::kScratch, dst + e * es}; }, 0,
          OwnedSegment::kKept);
    });
    summed.insert(summed.end(), done.begin(), done.end());
  }

  CollectiveSpec interSpec = subSpec(spec, ctx, executor::kInterComm, tagsPerRing);
  interSpec.avgDivisor = spec.size;
  std::vector<Range> segments;
  for (int b = 0; b < ctx.nodes; ++b) segments.push_back(Range{0, block(b, ctx.localRank).count});
  const RingLayout ring = makeRingLayout(interSpec, segments);
  inFrame(schedule, Frame{executor::kInterComm, 0, {BufferId::kSend, 0}, {BufferId::kRecv, 0}, summed}, [&] {
    const executor::WireScope wire(schedule, interSpec.wire);
    ringReduceScatter(
        interSpec, ring, schedule,
        [&](int seg, std::size_t e) { return BufRef{BufferId::kScratch, partial[static_cast<std::size_t>(seg)] + e * es}; },
        [&](int, std::size_t e) { return BufRef{BufferId::kRecv, e * es}; }, 0, OwnedSegment::kKept);
  });
}

}  // namespace boostcomm::algorithms
