// Ring allgather(v): rank r's block travels n-1 hops around the ring, in
// chunks so a forward can start before the whole block arrived. Varying
// counts need nothing special: segments are the blocks.
//
// Wire format (spec.wire): every message travels 16-bit. The owner rounds
// its block in recv through the wire format and sends that (one encoding
// per chunk); receivers decode the same values and forward them exactly
// (core/wire.h, "Idempotence"), so every rank holds the same bits: each
// value rounded once.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

void buildAllgatherRing(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  using executor::BufferId;
  const std::vector<Range> blocks = blockLayout(spec);
  const Range own = blocks[static_cast<std::size_t>(spec.rank)];
  // Own block into place (skipped when the call is in place).
  const StepId placed = schedule.copy(at(BufferId::kRecv, own.offset, es), at(BufferId::kSend, 0, es), own.count * es);
  if (spec.size == 1) return;
  const RingLayout layout = makeRingLayout(spec, blocks);
  auto fromSend = [&](int, std::size_t e) { return at(BufferId::kSend, e, es); };
  auto out = [&](int seg, std::size_t e) { return at(BufferId::kRecv, layout.segments[seg].offset + e, es); };
  if (spec.wire == WireFormat::kOff) {
    ringAllgather(spec, layout, schedule, fromSend, out, /*ownedReady=*/{}, /*recvDeps=*/nullptr, /*tagBase=*/0);
    return;
  }
  const executor::WireScope wire(schedule, spec.wire);
  const std::vector<StepId> rounded = roundOwnedSegment(layout, schedule, out, spec.rank, placed);
  ringAllgather(spec, layout, schedule, out, out, rounded, /*recvDeps=*/nullptr, /*tagBase=*/0);
}

}  // namespace boostcomm::algorithms
