#include "fusion/error_feedback.h"

#include <algorithm>

#include "core/wire.h"

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
  // v = g + e, and the largest |v| (fp16's one scale for the bucket).
  std::uint32_t maxBits = 0;
  std::size_t at = 0;
  for (auto [p, n] : runs) {
    for (std::size_t i = 0; i < n; ++i) p[i] += e[at + i];
    maxBits = std::max(maxBits, core::maxMagnitudeBits(p, n));
    at += n;
  }
  const int k = wire == WireFormat::kFp16 ? core::fp16ScaleExponent(maxBits) : 0;
  // r = round(v) in place; e = v - r.
  at = 0;
  for (auto [p, n] : runs) {
    std::copy(p, p + n, e.begin() + static_cast<std::ptrdiff_t>(at));
    core::roundRun(wire, k, p, n);
    for (std::size_t i = 0; i < n; ++i) e[at + i] -= p[i];
    at += n;
  }
}

const std::vector<float>& ErrorFeedback::residual(std::size_t bucket) const {
  static const std::vector<float> kNone;
  return bucket < residual_.size() ? residual_[bucket] : kNone;
}

}  // namespace boostcomm::fusion
