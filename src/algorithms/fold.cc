#include "algorithms/fold.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;
using StepId = executor::Schedule::StepId;

Fold makeFold(int rank, int size) {
  Fold f;
  f.p = largestPowerOfTwoAtMost(size);
  f.rem = size - f.p;
  if (rank < 2 * f.rem) {
    f.newRank = (rank % 2 == 1) ? rank / 2 : -1;
  } else {
    f.newRank = rank - f.rem;
  }
  return f;
}

void dependOn(executor::Schedule& schedule, const std::vector<StepId>& ids) { schedule.addDependencies(ids); }

std::vector<StepId> foldIn(const CollectiveSpec& spec, const Fold& fold, executor::Schedule& schedule,
                           std::size_t scratchOffset, int tag, int backTag, bool& inputInRecv) {
  const std::size_t bytes = spec.count * spec.elementSize();
  inputInRecv = false;
  if (fold.sitsOut()) {
    const StepId sent = schedule.send(BufRef{BufferId::kSend, 0}, bytes, spec.rank + 1, tag);
    // Waits for the send: in place, recv and send are the same memory.
    schedule.recv(BufRef{BufferId::kRecv, 0}, bytes, spec.rank + 1, backTag, {sent});
    return {};
  }
  if (!fold.absorbs(spec.rank)) return {};
  const BufRef partner{BufferId::kScratch, scratchOffset};
  const StepId got = schedule.recv(partner, bytes, spec.rank - 1, tag);
  // Lower rank's data first, as everywhere in the recursive algorithms.
  const StepId combined = schedule.reduce(BufRef{BufferId::kRecv, 0}, partner, BufRef{BufferId::kSend, 0},
                                          spec.count, {got});
  inputInRecv = true;
  return {combined};
}

void foldOut(const CollectiveSpec& spec, const Fold& fold, executor::Schedule& schedule,
             const std::vector<StepId>& after, int backTag) {
  if (!fold.absorbs(spec.rank)) return;
  schedule.send(BufRef{BufferId::kRecv, 0}, spec.count * spec.elementSize(), spec.rank - 1, backTag);
  dependOn(schedule, after);
}

}  // namespace boostcomm::algorithms
