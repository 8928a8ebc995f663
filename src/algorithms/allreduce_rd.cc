// Recursive-doubling allreduce: log2(p) stages, each exchanging the whole
// vector with the partner at distance d and combining. Latency-optimal
// (log2 p steps) but moves log2(p) whole vectors: for small messages only.
// Non-powers of two fold in and out (fold.h). Partners combine the lower new
// rank's data first, so both compute the same bits.
#include "algorithms/fold.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;

void buildAllreduceRecursiveDoubling(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const std::size_t es = spec.elementSize();
  const std::size_t bytes = spec.count * es;
  if (spec.size == 1) {
    schedule.copy(BufRef{BufferId::kRecv, 0}, BufRef{BufferId::kSend, 0}, bytes);
    return;
  }
  const Fold fold = makeFold(spec.rank, spec.size);
  int stages = 0;
  while ((1 << stages) < fold.p) ++stages;
  const int backTag = stages + 1;
  const std::size_t scratch = schedule.reserveScratch(bytes);
  bool inputInRecv = false;
  std::vector<StepId> prev = foldIn(spec, fold, schedule, scratch, /*tag=*/0, backTag, inputInRecv);
  if (fold.sitsOut()) return;

  const BufRef theirs{BufferId::kScratch, scratch};
  int tag = 1;
  for (int d = 1; d < fold.p; d *= 2, ++tag) {
    const int partner = fold.newRank ^ d;
    const int peer = fold.realRank(partner);
    const BufRef mine{inputInRecv ? BufferId::kRecv : BufferId::kSend, 0};
    const StepId sent = schedule.send(mine, bytes, peer, tag);
    dependOn(schedule, prev);
    const StepId got = schedule.recv(theirs, bytes, peer, tag);
    dependOn(schedule, prev);
    const bool mineFirst = fold.newRank < partner;
    prev = {schedule.reduce(BufRef{BufferId::kRecv, 0}, mineFirst ? mine : theirs, mineFirst ? theirs : mine,
                            spec.count, {sent, got})};
    inputInRecv = true;
  }
  if (spec.op == ReduceOp::kAvg) {
    const StepId divided = schedule.divide(BufRef{BufferId::kRecv, 0}, spec.count, spec.divisor());
    dependOn(schedule, prev);
    prev = {divided};
  }
  foldOut(spec, fold, schedule, prev, backTag);
}

}  // namespace boostcomm::algorithms
