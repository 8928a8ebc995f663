// Error feedback for 16-bit wire formats (core/wire.h): the one step that
// every user of it (fusion::ErrorFeedback for GradientGroup and the overlap
// engine, the c10d backend's per-group option) runs before a compressed
// allreduce of a float32 gradient.
//
// Each rank adds the residual it kept from the previous step to its
// contribution, rounds the sum through the wire format, sends that, and
// keeps what rounding removed: v = g + e; r = round(v); e = v - r. Over
// steps nothing of this rank's own contribution is lost, only delayed.
// For bf16 the rounded contribution crosses the first hop exactly (rounding
// is idempotent), so the residual is all the error of that hop; the
// rounding of partial sums on later hops (other ranks' data mixed in) is not
// fed back. fp16 rounds here with one scale over all the runs, the wire with
// one per message: the first hop then rounds again by at most that
// difference.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include "boostcomm/types.h"

namespace boostcomm::core {

// One buffer as contiguous float32 runs, in order (a packed region is one
// run, a segment list one per tensor).
using FloatRuns = std::span<const std::pair<float*, std::size_t>>;

// Applies feedback in place: runs = round(runs + residual), residual = what
// the rounding removed. `residual` holds the runs' total count of floats
// (zeros before the first step). format kOff leaves everything untouched.
void applyWireFeedback(WireFormat format, FloatRuns runs, float* residual);

}  // namespace boostcomm::core
