// Error feedback for 16-bit wire formats (core/wire.h), per bucket.
//
// Before bucket b's collective, each rank adds the residual it kept from
// the previous step to its float32 contribution, rounds the sum through the
// wire format the collective will use, sends that, and keeps what rounding
// removed as the next step's residual: v = g + e; r = round(v); e = v - r.
// Over steps nothing of this rank's own contribution is lost, only delayed.
// For bf16 the rounded contribution crosses the first hop exactly (rounding
// is idempotent), so the residual is all the error of that hop; the
// rounding of partial sums on later hops (other ranks' data mixed in) is not
// fed back. fp16 rounds with one scale over the whole bucket here, the wire
// with one per chunk: the first hop then rounds again by at most that
// difference. Non-float32 buckets and kOff are left untouched.
#pragma once

#include <cstddef>
#include <vector>

#include "boostcomm/types.h"
#include "fusion/bucket_set.h"

namespace boostcomm::fusion {

class ErrorFeedback {
 public:
  // Applies feedback to bucket `bucket` of `set` in place (its tensors, or
  // its packed region once packed), for a collective sending `wire`.
  void apply(const BucketSet& set, std::size_t bucket, WireFormat wire);
  // Residual kept for `bucket` (empty before its first compressed step).
  const std::vector<float>& residual(std::size_t bucket) const;

 private:
  std::vector<std::vector<float>> residual_;
};

}  // namespace boostcomm::fusion
