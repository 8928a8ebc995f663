// Non-power-of-two handling for the recursive algorithms (rhd, rd).
//
// With p the largest power of two <= n and rem = n - p, the first 2*rem ranks
// pair up (2i, 2i+1): the even rank hands its whole vector to the odd one and
// sits out; the p remaining ranks ("new ranks" 0..p-1) run the power-of-two
// core; finally each odd rank hands the result back to its even partner. The
// sitting-out rank receives a copy, so all ranks end bitwise identical.
#pragma once

#include <vector>

#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

struct Fold {
  int p = 1;
  int rem = 0;
  int newRank = 0;  // -1 when this rank sits out
  bool sitsOut() const { return newRank < 0; }
  bool absorbs(int rank) const { return rank < 2 * rem && (rank % 2) == 1; }
  int realRank(int newRankOf) const { return newRankOf < rem ? 2 * newRankOf + 1 : newRankOf + rem; }
};

Fold makeFold(int rank, int size);

// Fold-in steps. A sitting-out rank sends its input and posts the receive of
// the final result (tag `backTag`); its schedule is then complete. A rank that
// absorbs a partner combines both inputs into recv (scratch at offset
// `scratchOffset` holds the partner's vector). Returns the steps the core must
// wait for; sets inputInRecv when the core's input now lives in recv.
std::vector<executor::Schedule::StepId> foldIn(const CollectiveSpec& spec, const Fold& fold,
                                               executor::Schedule& schedule, std::size_t scratchOffset, int tag,
                                               int backTag, bool& inputInRecv);

// Fold-out: an absorbing rank returns the final vector to its partner.
void foldOut(const CollectiveSpec& spec, const Fold& fold, executor::Schedule& schedule,
             const std::vector<executor::Schedule::StepId>& after, int backTag);

// Appends `ids` as dependencies of the most recently added step.
void dependOn(executor::Schedule& schedule, const std::vector<executor::Schedule::StepId>& ids);

}  // namespace boostcomm::algorithms
