// Ring allreduce = ring reduce-scatter + ring allgather (see ring.h).
//
// Bandwidth-optimal: each rank sends and receives 2(n-1)/n of the vector, in
// 2(n-1) latency steps, so it suits large messages. Segments are the n even
// parts of the vector; rank r finishes segment r into the receive buffer and
// the allgather phase copies it to everyone, so ranks agree bitwise.
//
// In place (send == recv) the allgather's receive of a segment waits until
// this rank's own input of that segment has been consumed by the
// reduce-scatter phase (same step index, same chunk).
//
// Wire format (spec.wire): every message travels 16-bit; each hop decodes
// into float32 and adds in float32; the owner rounds its finished chunk
// through the wire format before the allgather, which then forwards exact
// copies (core/wire.h, "Idempotence").
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace boostcomm::algorithms {

void buildAllreduceRing(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const int n = spec.size;
  const std::size_t es = spec.elementSize();
  using executor::BufferId;
  if (n == 1) {
    schedule.copy(at(BufferId::kRecv, 0, es), at(BufferId::kSend, 0, es), spec.count * es);
    return;
  }
  std::vector<Range> segments(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) segments[static_cast<std::size_t>(i)] = evenPart(spec.count, n, i);
  const RingLayout layout = makeRingLayout(spec, segments);
  const executor::WireScope wire(schedule, spec.wire);
  auto inSend = [&](int seg, std::size_t e) { return at(BufferId::kSend, layout.segments[seg].offset + e, es); };
  auto inRecv = [&](int seg, std::size_t e) { return at(BufferId::kRecv, layout.segments[seg].offset + e, es); };

  const RingReduceScatterResult rs =
      ringReduceScatter(spec, layout, schedule, inSend, inRecv, /*tagBase=*/0, OwnedSegment::kRounded);
  const int k = layout.chunks;
  auto hazards = [&](int s, int c) {
    // Segment received at allgather step s was read at reduce-scatter step s
    // (its send at s == 0, its reduce at s - 1 otherwise).
    const std::size_t i = static_cast<std::size_t>(s == 0 ? 0 : s - 1) * k + c;
    return std::vector<StepId>{s == 0 ? rs.sends[i] : rs.reduces[i]};
  };
  ringAllgather(spec, layout, schedule, inRecv, inRecv, rs.ownedReady, hazards, /*tagBase=*/(n - 1) * k);
}

}  // namespace boostcomm::algorithms
