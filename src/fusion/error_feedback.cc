#include "fusion/error_feedback.h"

#include "core/wire_feedback.h"

namespace boostcomm::fusion {

void ErrorFeedback::apply(const BucketSet& set, std::size_t bucket, WireFormat wire) {
  if (wire != WireFormat::kBf16 && wire != WireFormat::kFp16) return;
  if (set.plan().buckets[bucket].dtype != DataType::kFloat32) return;
  // The bucket's float32 elements as contiguous runs, in order.
  std::vector<std::pair<float*, std::size_t>> runs;
  std::size_t count = 0;
  if (set.segmentList()) {
    const core::SegmentList& list = set.segments(bucket);
    for (std::size_t i = 0; i < list.segments(); ++i) {
      runs.emplace_back(reinterpret_cast<float*>(list.segmentData(i)), list.segmentBytes(i) / sizeof(float));
      count += runs.back().second;
    }
  } else {
    const View region = set.region(bucket);
    runs.emplace_back(static_cast<float*>(region.data), region.count);
    count = region.count;
  }
  if (residual_.size() <= bucket) residual_.resize(bucket + 1);
  std::vector<float>& e = residual_[bucket];
  if (e.size() != count) e.assign(count, 0.0f);
  core::applyWireFeedback(wire, runs, e.data());
}

const std::vector<float>& ErrorFeedback::residual(std::size_t bucket) const {
  static const std::vector<float> kNone;
  return bucket < residual_.size() ? residual_[bucket] : kNone;
}

}  // namespace boostcomm::fusion
