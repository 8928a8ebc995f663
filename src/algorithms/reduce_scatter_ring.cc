// Ring reduce_scatter: the reduce-scatter phase of ring allreduce alone.
// Segment i is block i of the send buffer; rank r's result lands in recv.
//
// Wire format (spec.wire): every message travels 16-bit; each hop decodes
// into float32 and adds in float32 (n-1 roundings of partial sums). The
// owner's block is not rounded again: no other rank holds it.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

void buildReduceScatterRing(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  using executor::BufferId;
  const std::vector<Range> blocks = blockLayout(spec);
  if (spec.size == 1) {
    const std::size_t own = blocks[0].count;
    const StepId copied = schedule.copy(at(BufferId::kRecv, 0, es), at(BufferId::kSend, 0, es), own * es);
    if (spec.op == ReduceOp::kAvg) schedule.divide(at(BufferId::kRecv, 0, es), own, spec.divisor(), {copied});
    return;
  }
  const RingLayout layout = makeRingLayout(spec, blocks);
  const executor::WireScope wire(schedule, spec.wire);
  auto input = [&](int seg, std::size_t e) { return at(BufferId::kSend, layout.segments[seg].offset + e, es); };
  auto out = [&](int, std::size_t e) { return at(BufferId::kRecv, e, es); };
  ringReduceScatter(spec, layout, schedule, input, out, /*tagBase=*/0, OwnedSegment::kKept);
}

}  // namespace boostcomm::algorithms
