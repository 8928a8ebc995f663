// Ring building blocks shared by ring allreduce, ring allgather(v) and ring
// reduce_scatter (no algorithm repeats this logic).
//
// The vector is cut into one segment per rank; every segment into `chunks`
// pipelining chunks. Rank r sends to r+1 and receives from r-1.
//
// Reduce-scatter phase, n-1 steps: at step s rank r sends segment (r-1-s) and
// receives segment (r-2-s), which it combines with its own input. Partial sums
// travel in two scratch slots per chunk (step parity), so the receive of step
// s+2 may start once the send of step s+1 left. After n-1 steps rank r holds
// segment r fully reduced; only rank r ever computes it, so every rank later
// sees the same bits.
//
// Allgather phase, n-1 steps: at step s rank r forwards segment (r-s) and
// receives segment (r-s-1) straight into the output.
#pragma once

#include <functional>
#include <vector>

#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

// Where element `elementInSegment` of segment `segment` lives for one role.
using SegmentRef = std::function<executor::BufRef(int segment, std::size_t elementInSegment)>;

struct RingLayout {
  std::vector<Range> segments;  // one per rank
  int chunks = 1;

  Range chunk(int segment, int c) const;
  // `ref`'s address of chunk c of `segment`.
  executor::BufRef chunkRef(const SegmentRef& ref, int segment, int c) const;
};

RingLayout makeRingLayout(const CollectiveSpec& spec, std::vector<Range> segments);

struct RingReduceScatterResult {
  std::vector<StepId> ownedReady;  // per chunk: step after which segment r's chunk is final
  std::vector<StepId> sends;       // [s * chunks + c]
  std::vector<StepId> reduces;     // [s * chunks + c]
};

// What becomes of the owned segment under a wire format (Schedule::wire()).
enum class OwnedSegment {
  kKept,     // left as reduced in float32 (reduce_scatter: only its owner holds it)
  kRounded,  // rounded through the wire format, for an allgather to copy it bitwise
};

// `input`: this rank's contribution; `out`: where segment r's result goes.
// Applies the kAvg division to the owned segment. Uses tags [tagBase, tagBase + (n-1)*chunks).
RingReduceScatterResult ringReduceScatter(const CollectiveSpec& spec, const RingLayout& layout,
                                          executor::Schedule& schedule, const SegmentRef& input,
                                          const SegmentRef& out, int tagBase, OwnedSegment owned);

// `ownedSource`: where segment r is read from for the first send (ready after
// ownedReady[c]); `out`: where received segments go. recvDeps(s, c) lists
// extra steps a receive must wait for (buffer hazards of in-place calls).
// Under a wire format the caller first makes segment r in `out` what its
// receivers decode (roundOwnedSegment) and sends it from there.
void ringAllgather(const CollectiveSpec& spec, const RingLayout& layout, executor::Schedule& schedule,
                   const SegmentRef& ownedSource, const SegmentRef& out, const std::vector<StepId>& ownedReady,
                   const std::function<std::vector<StepId>(int s, int c)>& recvDeps, int tagBase);

// Under a wire format, rounds segment `segment` of `ref` in place, message by
// message (chunk by chunk, as ringAllgather sends it), after `after`: the
// owner of a block an allgather sends 16-bit keeps what its receivers decode,
// so every rank ends with the same bits. Returns the step per chunk after
// which the chunk is final (`after` itself with no wire format).
std::vector<StepId> roundOwnedSegment(const RingLayout& layout, executor::Schedule& schedule, const SegmentRef& ref,
                                      int segment, StepId after);

}  // namespace boostcomm::algorithms
