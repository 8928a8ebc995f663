// Error feedback for 16-bit wire formats (core/wire.h), per bucket.
//
// Before bucket b's collective, each rank adds the residual it kept from
// the previous step to its float32 contribution and rounds the sum through
// the wire format the collective will use (core/wire_feedback.h, where the
// rule and what it does not cover are stated). Non-float32 buckets and kOff
// are left untouched.
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
