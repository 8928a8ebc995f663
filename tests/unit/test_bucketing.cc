// planBuckets: the bucketing rules of src/planner/bucketing.h, checked as
// properties over seeded random tensor lists and on the model profiles.
#include <gtest/gtest.h>

#include <random>

#include "boostcomm/error.h"
#include "workloads/model_profile.h"
#include "planner/bucketing.h"

namespace bp = boostcomm::planner;
using boostcomm::DataType;

namespace {

// Every invariant the header promises, for one plan.
void checkPlan(const std::vector<bp::TensorInfo>& tensors, const bp::BucketOptions& options, const bp::BucketPlan& plan) {
  ASSERT_EQ(plan.placeOf.size(), tensors.size());
  std::vector<int> seen(tensors.size(), 0);
  std::size_t payload = 0;
  std::size_t lastFirstTensor = 0;
  for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
    const bp::Bucket& bucket = plan.buckets[b];
    ASSERT_FALSE(bucket.slots.empty()) << "bucket " << b << " is empty";
    // Buckets are numbered in the order they were opened: by first tensor.
    if (b > 0) {
      EXPECT_GT(bucket.slots.front().tensor, lastFirstTensor);
    }
    lastFirstTensor = bucket.slots.front().tensor;
    std::size_t end = 0;
    std::size_t nonEmpty = 0;
    for (std::size_t s = 0; s < bucket.slots.size(); ++s) {
      const bp::BucketSlot& slot = bucket.slots[s];
      ASSERT_LT(slot.tensor, tensors.size());
      ++seen[slot.tensor];
      EXPECT_EQ(tensors[slot.tensor].dtype, bucket.dtype) << "one dtype per bucket";
      EXPECT_EQ(slot.count, tensors[slot.tensor].count);
      EXPECT_EQ(plan.placeOf[slot.tensor].bucket, b);
      EXPECT_EQ(plan.placeOf[slot.tensor].slot, s);
      EXPECT_GE(slot.offset, end) << "slots overlap";
      if (slot.count > 0) {
        EXPECT_EQ(slot.offset * boostcomm::dataTypeSize(bucket.dtype) % options.alignBytes, 0u) << "unaligned";
        ++nonEmpty;
      }
      if (s > 0) {
        EXPECT_GT(slot.tensor, bucket.slots[s - 1].tensor) << "order kept";
      }
      end = slot.offset + slot.count;
      payload += slot.count * boostcomm::dataTypeSize(bucket.dtype);
    }
    EXPECT_EQ(bucket.count, end);
    const std::size_t limit = b == 0 && options.firstBucketBytes ? options.firstBucketBytes : options.bucketBytes;
    // Over the limit only when one tensor alone is larger.
    if (bucket.bytes() > limit) {
      EXPECT_EQ(nonEmpty, 1u) << "bucket " << b << " over its limit";
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) EXPECT_EQ(seen[t], 1) << "tensor " << t;
  EXPECT_EQ(payload, plan.payloadBytes);
}

std::vector<bp::TensorInfo> randomTensors(std::mt19937& rng, std::size_t n) {
  const DataType kinds[] = {DataType::kFloat32, DataType::kFloat16, DataType::kFloat64, DataType::kInt32,
                            DataType::kUInt8};
  std::vector<bp::TensorInfo> tensors(n);
  for (bp::TensorInfo& t : tensors) {
    t.dtype = kinds[rng() % 5];
    const unsigned pick = rng() % 10;
    t.count = pick == 0 ? 0 : pick == 1 ? 1 : pick < 8 ? rng() % 3000 : rng() % 100000;
  }
  return tensors;
}

}  // namespace

TEST(Bucketing, RandomListsKeepEveryRule) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 300; ++round) {
    const auto tensors = randomTensors(rng, rng() % 40);
    bp::BucketOptions options;
    options.bucketBytes = 64u << (rng() % 12);
    options.firstBucketBytes = (rng() % 3 == 0) ? (64u << (rng() % 6)) : 0;
    options.alignBytes = 1u << (rng() % 8);
    const bp::BucketPlan plan = bp::planBuckets(tensors, options);
    SCOPED_TRACE("round " + std::to_string(round));
    checkPlan(tensors, options, plan);
    // Deterministic: the same input gives the same plan.
    const bp::BucketPlan again = bp::planBuckets(tensors, options);
    EXPECT_EQ(bp::describePlan(plan), bp::describePlan(again));
  }
}

TEST(Bucketing, ResNet50InBackwardOrder) {
  std::vector<bp::TensorInfo> tensors;
  const auto& profile = boostcomm::workloads::resnet50();
  for (auto it = profile.tensors.rbegin(); it != profile.tensors.rend(); ++it) tensors.push_back({it->count(), it->dtype});
  bp::BucketOptions options;
  options.bucketBytes = 25u << 20;
  options.firstBucketBytes = 1u << 20;
  const bp::BucketPlan plan = bp::planBuckets(tensors, options);
  checkPlan(tensors, options, plan);
  EXPECT_EQ(plan.payloadBytes, 25557032u * 4);
  // 102 MB in 25 MiB buckets after a 1 MiB first one: a handful, not 161.
  EXPECT_GE(plan.buckets.size(), 5u);
  EXPECT_LE(plan.buckets.size(), 7u);
  EXPECT_LE(plan.buckets[0].bytes(), std::size_t{(1u << 20)} + (8u << 20));  // fc.weight (8 MB) may sit alone
}

TEST(Bucketing, SignatureSeesCountDtypeAndOrder) {
  std::vector<bp::TensorInfo> a = {{10, DataType::kFloat32}, {0, DataType::kInt32}, {7, DataType::kFloat16}};
  auto b = a;
  EXPECT_EQ(bp::tensorListSignature(a), bp::tensorListSignature(b));
  b[2].count = 8;
  EXPECT_NE(bp::tensorListSignature(a), bp::tensorListSignature(b));
  b = a;
  b[1].dtype = DataType::kInt64;
  EXPECT_NE(bp::tensorListSignature(a), bp::tensorListSignature(b));
  b = a;
  std::swap(b[0], b[2]);
  EXPECT_NE(bp::tensorListSignature(a), bp::tensorListSignature(b));
  b = a;
  b.pop_back();
  EXPECT_NE(bp::tensorListSignature(a), bp::tensorListSignature(b));
}

TEST(Bucketing, BadOptionsAreRejected) {
  std::vector<bp::TensorInfo> tensors = {{4, DataType::kFloat32}};
  bp::BucketOptions zero;
  zero.bucketBytes = 0;
  EXPECT_THROW(bp::planBuckets(tensors, zero), boostcomm::Error);
  bp::BucketOptions odd;
  odd.alignBytes = 48;
  try {
    bp::planBuckets(tensors, odd);
    FAIL() << "alignBytes 48 accepted";
  } catch (const boostcomm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("alignBytes must be a power of two, got 48"), std::string::npos);
  }
}

TEST(Bucketing, EmptyListsAndEmptyTensors) {
  EXPECT_TRUE(bp::planBuckets({}, {}).buckets.empty());
  std::vector<bp::TensorInfo> empties = {{0, DataType::kFloat32}, {0, DataType::kFloat32}};
  const bp::BucketPlan plan = bp::planBuckets(empties, {});
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_EQ(plan.buckets[0].count, 0u);
  EXPECT_EQ(plan.buckets[0].slots.size(), 2u);
}
