// Overlap statistics of one step and their running means (definitions in
// include/boostcomm/overlap.h and docs/OVERLAP.md). The one definition of
// hidden communication: comm = union of the in-flight intervals, exposed =
// the part of it the caller spent blocked waiting (here: inside
// finishBackward), hidden = comm - exposed. busy_meter.h measures the same
// quantities for clients that cannot see their caller's wait.
//
// "Communication time" is the union of the busy intervals (launch ->
// completion seen) of the step's collectives rather than their sum: with
// several buckets in flight the sum would count the same wall-clock time
// twice and could exceed the step, making hidden > comm meaningless.
#pragma once

#include <string>
#include <vector>

#include "boostcomm/overlap.h"
#include "core/intervals.h"

namespace boostcomm::telemetry {

// [launch, completion seen) of one collective, in microseconds.
using IntervalUs = core::Interval<double>;

struct StepTimes {
  double stepStartUs = 0;   // beginBackward or first markReady
  double lastReadyUs = 0;   // last markReady
  double waitStartUs = 0;   // finishBackward entered
  double waitEndUs = 0;     // finishBackward returns
  std::vector<IntervalUs> comm;
  std::size_t buckets = 0;
  std::size_t bytes = 0;
};

OverlapStepStats computeStepStats(const StepTimes& times);

// Adds a step to the running mean (mean efficiency = mean hidden / mean comm).
void accumulate(OverlapStats& stats, const OverlapStepStats& step);

// "overlap step 12: step 81.2 ms, compute 77.0 ms, comm 30.1 ms, exposed 4.2 ms, hidden 25.9 ms (86.0%), 7 buckets, 97.5 MiB"
std::string formatStepLine(std::size_t step, const OverlapStepStats& stats);

}  // namespace boostcomm::telemetry
