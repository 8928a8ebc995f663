#include "planner/bucketing.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "core/hash.h"

namespace boostcomm::planner {
namespace {

std::size_t alignUp(std::size_t value, std::size_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

BucketPlan planBuckets(std::span<const TensorInfo> tensors, const BucketOptions& options) {
  BC_INVALID(options.bucketBytes > 0, -1, "bucketBytes must be > 0");
  BC_INVALID(options.alignBytes > 0 && (options.alignBytes & (options.alignBytes - 1)) == 0, -1,
             "alignBytes must be a power of two, got " << options.alignBytes);
  BucketPlan plan;
  plan.placeOf.resize(tensors.size());
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t open[kNumDataTypes];
  for (std::size_t& b : open) b = kNone;

  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const TensorInfo& tensor = tensors[t];
    const std::size_t elementBytes = dataTypeSize(tensor.dtype);
    const std::size_t d = static_cast<std::size_t>(tensor.dtype);
    const std::size_t tensorBytes = tensor.count * elementBytes;
    plan.payloadBytes += tensorBytes;
    const auto limitOf = [&](std::size_t bucket) {
      return bucket == 0 && options.firstBucketBytes > 0 ? options.firstBucketBytes : options.bucketBytes;
    };
    if (open[d] != kNone) {
      const Bucket& bucket = plan.buckets[open[d]];
      const std::size_t start = alignUp(bucket.bytes(), options.alignBytes);
      if (bucket.count > 0 && tensorBytes > 0 && start + tensorBytes > limitOf(open[d])) open[d] = kNone;
    }
    if (open[d] == kNone) {
      open[d] = plan.buckets.size();
      plan.buckets.push_back(Bucket{tensor.dtype, 0, {}});
    }
    Bucket& bucket = plan.buckets[open[d]];
    // Alignment in elements: the alignment is a power of two and so are the
    // element sizes, so an aligned byte offset is a whole number of elements.
    const std::size_t alignElements = std::max<std::size_t>(1, options.alignBytes / elementBytes);
    const std::size_t offset = tensor.count == 0 ? bucket.count : alignUp(bucket.count, alignElements);
    plan.placeOf[t] = TensorPlace{open[d], bucket.slots.size()};
    bucket.slots.push_back(BucketSlot{t, offset, tensor.count});
    bucket.count = offset + tensor.count;
    // A bucket filled past its limit by one large tensor takes nothing more.
    if (bucket.bytes() >= limitOf(open[d])) open[d] = kNone;
  }
  for (const Bucket& bucket : plan.buckets) plan.bucketBytes += bucket.bytes();
  return plan;
}

std::uint64_t tensorListSignature(std::span<const TensorInfo> tensors) {
  // FNV-1a over (count, dtype) pairs and the list length.
  std::uint64_t hash = core::kFnvOffset;
  const auto mix = [&hash](std::uint64_t value) { hash = core::fnvWord(hash, value); };
  mix(tensors.size());
  for (const TensorInfo& t : tensors) {
    mix(t.count);
    mix(static_cast<std::uint64_t>(t.dtype));
  }
  return hash;
}

std::string describePlan(const BucketPlan& plan) {
  std::string text;
  char line[200];
  for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& bucket = plan.buckets[b];
    const std::size_t first = bucket.slots.empty() ? 0 : bucket.slots.front().tensor;
    const std::size_t last = bucket.slots.empty() ? 0 : bucket.slots.back().tensor;
    std::snprintf(line, sizeof line, "bucket %zu: %s, %zu elements (%.1f MiB), %zu tensors (%zu..%zu)\n", b,
                  std::string(toString(bucket.dtype)).c_str(), bucket.count,
                  static_cast<double>(bucket.bytes()) / (1 << 20), bucket.slots.size(), first, last);
    text += line;
  }
  return text;
}

}  // namespace boostcomm::planner
