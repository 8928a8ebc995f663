// Timing that every rank agrees on: the building block of autotuning.
//
// A sample of candidate i is a batch of back-to-back calls (sized from a
// timed warm-up call to last ~2 ms) started after a barrier; the time that
// counts is the slowest rank's per-call average (one max-allreduce over all
// samples at the end, so the measured calls are not perturbed by extra
// traffic), and the median over samples is reported. Candidates are
// interleaved, the starting one rotating per sample, so a slow phase of a
// noisy machine hits all of them alike instead of the one that ran then.
#pragma once

#include <functional>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::autotune {

// Runs call(i) `warmup` + 1 times, then `samples` timed batches for each of the
// `candidates`; returns per candidate the median of the max over ranks, in
// microseconds, identical on every rank. Collective.
struct Timings {
  std::vector<double> medianUs;               // [candidate]
  std::vector<std::vector<double>> samplesUs;  // [candidate][sample], max over ranks
  // Fraction of the samples in which `a` was faster than `b` (the samples of
  // one round ran back to back, so a pair saw the same machine state).
  double winFraction(std::size_t a, std::size_t b) const;
};
Timings timeCandidates(Communicator& comm, int candidates, int warmup, int samples,
                       const std::function<void(int)>& call);

double median(std::vector<double> values);

}  // namespace boostcomm::autotune
