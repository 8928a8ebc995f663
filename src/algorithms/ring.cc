#include "algorithms/ring.h"

#include <algorithm>

namespace boostcomm::algorithms {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

// This rank's place in the ring.
struct RingPosition {
  int n;
  int r;
  int k;  // chunks per segment
  std::size_t es;
  int right;
  int left;
  RingPosition(const CollectiveSpec& spec, const RingLayout& layout)
      : n(spec.size), r(spec.rank), k(layout.chunks), es(spec.elementSize()), right(mod(r + 1, n)),
        left(mod(r - 1, n)) {}
};

}  // namespace

executor::BufRef RingLayout::chunkRef(const SegmentRef& ref, int segment, int c) const {
  return ref(segment, chunk(segment, c).offset - segments[static_cast<std::size_t>(segment)].offset);
}

Range RingLayout::chunk(int segment, int c) const {
  const Range& seg = segments[static_cast<std::size_t>(segment)];
  const Range part = evenPart(seg.count, chunks, c);
  return Range{seg.offset + part.offset, part.count};
}

RingLayout makeRingLayout(const CollectiveSpec& spec, std::vector<Range> segments) {
  std::size_t maxCount = 0;
  for (const Range& s : segments) maxCount = std::max(maxCount, s.count);
  RingLayout layout;
  layout.segments = std::move(segments);
  // Two phases of (n-1) steps each use distinct tags per chunk.
  layout.chunks = chunksFor(spec, maxCount * spec.elementSize(), 2 * std::max(spec.size - 1, 1));
  return layout;
}

RingReduceScatterResult ringReduceScatter(const CollectiveSpec& spec, const RingLayout& layout,
                                          executor::Schedule& schedule, const SegmentRef& input,
                                          const SegmentRef& out, int tagBase, OwnedSegment owned) {
  const RingPosition pos(spec, layout);
  const auto [n, r, k, es, right, left] = pos;

  // Two scratch slots (step parity). Inside a slot, chunk c always occupies
  // the same fixed-stride region, whatever segment it belongs to: segments
  // may differ in length, and their chunk boundaries with them, so regions
  // placed by offset within the segment would overlap between chunk c of one
  // step and chunk c+1 of another, which run concurrently (dependencies are
  // per chunk index).
  std::size_t maxSegment = 0;
  for (const Range& s : layout.segments) maxSegment = std::max(maxSegment, s.count);
  const std::size_t chunkStride = (maxSegment + static_cast<std::size_t>(k) - 1) / static_cast<std::size_t>(k);
  const std::size_t slotBytes = chunkStride * static_cast<std::size_t>(k) * es;
  const std::size_t scratchBase = schedule.reserveScratch(2 * slotBytes);
  auto slot = [&](int s, int /*segment*/, int c) {
    return executor::BufRef{executor::BufferId::kScratch, scratchBase + static_cast<std::size_t>(s % 2) * slotBytes +
                                                              static_cast<std::size_t>(c) * chunkStride * es};
  };
  auto chunkRef = [&layout](const SegmentRef& ref, int segment, int c) { return layout.chunkRef(ref, segment, c); };

  RingReduceScatterResult result;
  const std::size_t steps = static_cast<std::size_t>(std::max(n - 1, 0)) * static_cast<std::size_t>(k);
  result.sends.resize(steps);
  result.reduces.resize(steps);
  result.ownedReady.resize(static_cast<std::size_t>(k));
  auto idx = [&](int s, int c) { return static_cast<std::size_t>(s) * static_cast<std::size_t>(k) + c; };

  for (int s = 0; s < n - 1; ++s) {
    const int sendSeg = mod(r - 1 - s, n);
    const int recvSeg = mod(r - 2 - s, n);
    const bool last = s == n - 2;
    for (int c = 0; c < k; ++c) {
      const Range recvChunk = layout.chunk(recvSeg, c);
      const Range sendChunk = layout.chunk(sendSeg, c);
      const int tag = tagBase + s * k + c;
      // Send: step 0 sends raw input; later steps forward the partial sum
      // reduced in the previous step's slot.
      if (s == 0) {
        result.sends[idx(s, c)] = schedule.send(chunkRef(input, sendSeg, c), sendChunk.count * es, right, tag);
      } else {
        result.sends[idx(s, c)] = schedule.send(slot(s - 1, sendSeg, c), sendChunk.count * es, right, tag,
                                                {result.reduces[idx(s - 1, c)]});
      }
      // Receive into this step's slot, once its previous content (step s-2's
      // partial sum) has been sent on by step s-1. (With a wire format the
      // message stays in the receive's staging and the reduce below, which
      // depends on it, is what writes the slot.)
      const StepId recv = schedule.recv(slot(s, recvSeg, c), recvChunk.count * es, left, tag);
      if (s >= 2) schedule.addDependency(result.sends[idx(s - 1, c)]);
      const executor::BufRef dst = last ? chunkRef(out, recvSeg, c) : slot(s, recvSeg, c);
      result.reduces[idx(s, c)] =
          schedule.reduceReceived(dst, chunkRef(input, recvSeg, c), slot(s, recvSeg, c), recvChunk.count, recv);
      result.ownedReady[static_cast<std::size_t>(c)] = result.reduces[idx(s, c)];
      if (last && spec.op == ReduceOp::kAvg) {
        result.ownedReady[static_cast<std::size_t>(c)] =
            schedule.divide(dst, recvChunk.count, spec.divisor(), {result.reduces[idx(s, c)]});
      }
      if (last && owned == OwnedSegment::kRounded) {
        // With a wire format the owner keeps what its allgather sends decode to.
        result.ownedReady[static_cast<std::size_t>(c)] =
            schedule.wireRound(dst, recvChunk.count, result.ownedReady[static_cast<std::size_t>(c)]);
      }
    }
  }
  return result;
}

void ringAllgather(const CollectiveSpec& spec, const RingLayout& layout, executor::Schedule& schedule,
                   const SegmentRef& ownedSource, const SegmentRef& out, const std::vector<StepId>& ownedReady,
                   const std::function<std::vector<StepId>(int s, int c)>& recvDeps, int tagBase) {
  const RingPosition pos(spec, layout);
  const auto [n, r, k, es, right, left] = pos;
  auto chunkRef = [&layout](const SegmentRef& ref, int segment, int c) { return layout.chunkRef(ref, segment, c); };

  std::vector<StepId> prevRecv(static_cast<std::size_t>(k));
  for (int s = 0; s < n - 1; ++s) {
    const int sendSeg = mod(r - s, n);
    const int recvSeg = mod(r - s - 1, n);
    for (int c = 0; c < k; ++c) {
      const int tag = tagBase + s * k + c;
      const std::size_t sendBytes = layout.chunk(sendSeg, c).count * es;
      if (s == 0) {
        schedule.send(chunkRef(ownedSource, sendSeg, c), sendBytes, right, tag);
        if (!ownedReady.empty()) schedule.addDependency(ownedReady[static_cast<std::size_t>(c)]);
      } else {
        schedule.send(chunkRef(out, sendSeg, c), sendBytes, right, tag, {prevRecv[static_cast<std::size_t>(c)]});
      }
      prevRecv[static_cast<std::size_t>(c)] =
          schedule.recv(chunkRef(out, recvSeg, c), layout.chunk(recvSeg, c).count * es, left, tag);
      if (recvDeps) schedule.addDependencies(recvDeps(s, c));
    }
  }
}

std::vector<StepId> roundOwnedSegment(const RingLayout& layout, executor::Schedule& schedule, const SegmentRef& ref,
                                      int segment, StepId after) {
  std::vector<StepId> ready(static_cast<std::size_t>(layout.chunks), after);
  for (int c = 0; c < layout.chunks; ++c) {
    ready[static_cast<std::size_t>(c)] =
        schedule.wireRound(layout.chunkRef(ref, segment, c), layout.chunk(segment, c).count, after);
  }
  return ready;
}

}  // namespace boostcomm::algorithms
