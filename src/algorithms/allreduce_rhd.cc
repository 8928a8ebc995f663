// Rabenseifner allreduce: recursive-halving reduce-scatter, then
// recursive-doubling allgather, on the p = 2^k ranks left after the fold (fold.h).
//
// The vector is cut into p blocks. Halving stage with distance d: partners
// (new ranks x and x^d) split their current window of blocks; the one with bit
// d clear keeps the lower half. Each sends the half it gives up and reduces
// the half it keeps. After log2(p) stages new rank x owns block x, reduced by
// it alone; the doubling stages then exchange windows back in reverse order.
// Each rank moves 2(p-1)/p of the vector in 2 log2(p) steps: as little data as
// the ring with far fewer latency steps.
//
// Stages run strictly one after another (each step waits for the previous
// stage), which rules out every buffer hazard, in place included.
//
// Wire format (spec.wire): every message travels 16-bit and is reduced in
// float32; after the halving stages (and the kAvg division) the owner rounds
// its block through the wire format, so the doubling stages and the fold-out
// copy values every rank then holds bitwise.
#include "algorithms/fold.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;

void buildAllreduceRhd(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  if (spec.size == 1) {
    schedule.copy(at(BufferId::kRecv, 0, es), at(BufferId::kSend, 0, es), spec.count * es);
    return;
  }
  const executor::WireScope wire(schedule, spec.wire);
  const Fold fold = makeFold(spec.rank, spec.size);
  int stages = 0;
  while ((1 << stages) < fold.p) ++stages;
  const int backTag = 2 * stages + 1;
  const std::size_t scratch = schedule.reserveScratch(spec.count * es);
  bool inputInRecv = false;
  std::vector<StepId> prev = foldIn(spec, fold, schedule, scratch, /*tag=*/0, backTag, inputInRecv);
  if (fold.sitsOut()) return;

  const int x = fold.newRank;
  auto blockStart = [&](int b) { return b == fold.p ? spec.count : evenPart(spec.count, fold.p, b).offset; };
  auto bytesOf = [&](int lo, int hi) { return (blockStart(hi) - blockStart(lo)) * es; };
  int lo = 0;
  int hi = fold.p;
  int tag = 1;
  for (int d = fold.p / 2; d >= 1; d /= 2, ++tag) {
    const int peer = fold.realRank(x ^ d);
    const int mid = (lo + hi) / 2;
    const bool keepLow = (x & d) == 0;
    const int keepLo = keepLow ? lo : mid;
    const int keepHi = keepLow ? mid : hi;
    const int giveLo = keepLow ? mid : lo;
    const int giveHi = keepLow ? hi : mid;
    const BufferId src = inputInRecv ? BufferId::kRecv : BufferId::kSend;
    const StepId sent = schedule.send(at(src, blockStart(giveLo), es), bytesOf(giveLo, giveHi), peer, tag);
    dependOn(schedule, prev);
    const StepId got = schedule.recv(BufRef{BufferId::kScratch, scratch}, bytesOf(keepLo, keepHi), peer, tag);
    dependOn(schedule, prev);
    // Lower new rank's contribution first, so partners would agree bitwise.
    const BufRef mine = at(src, blockStart(keepLo), es);
    const BufRef theirs{BufferId::kScratch, scratch};
    const std::size_t count = blockStart(keepHi) - blockStart(keepLo);
    const StepId red = schedule.reduce(at(BufferId::kRecv, blockStart(keepLo), es), keepLow ? mine : theirs,
                                       keepLow ? theirs : mine, count, {got});
    prev = {sent, red};
    inputInRecv = true;
    lo = keepLo;
    hi = keepHi;
  }
  if (spec.op == ReduceOp::kAvg) {
    const StepId divided =
        schedule.divide(at(BufferId::kRecv, blockStart(lo), es), blockStart(hi) - blockStart(lo), spec.divisor());
    dependOn(schedule, prev);
    prev = {divided};
  }
  if (spec.wire != WireFormat::kOff) {
    const StepId rounded = schedule.wireRound(at(BufferId::kRecv, blockStart(lo), es), blockStart(hi) - blockStart(lo),
                                              prev.front());
    dependOn(schedule, std::vector<StepId>(prev.begin() + 1, prev.end()));
    prev = {rounded};
  }
  for (int d = 1; d < fold.p; d *= 2, ++tag) {
    const int peer = fold.realRank(x ^ d);
    const int width = hi - lo;
    const int otherLo = (x & d) == 0 ? hi : lo - width;
    const StepId sent = schedule.send(at(BufferId::kRecv, blockStart(lo), es), bytesOf(lo, hi), peer, tag);
    dependOn(schedule, prev);
    const StepId got =
        schedule.recv(at(BufferId::kRecv, blockStart(otherLo), es), bytesOf(otherLo, otherLo + width), peer, tag);
    dependOn(schedule, prev);
    prev = {sent, got};
    lo = std::min(lo, otherLo);
    hi = lo + 2 * width;
  }
  foldOut(spec, fold, schedule, prev, backTag);
}

}  // namespace boostcomm::algorithms
