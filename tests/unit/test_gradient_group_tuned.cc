// GradientGroup's and OverlapEngine's bucket limit when the caller does not choose one: the size
// `boostcomm tune` stored in the tuning cache (BOOSTCOMM_TUNING_CACHE) is in
// force (stats, describe() and the bucket plan show it, and the step still
// gives the float64 reference); an explicit option and
// BOOSTCOMM_BUCKET_BYTES both win over the cache; ranks whose applied
// caches disagree fail with kMismatch on every rank instead of planning
// different buckets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "boostcomm/autotune.h"
#include "common/inproc_harness.h"
#include "common/tunable_override.h"
#include "core/tunables.h"
#include "planner/bucketing.h"
#include "testing/inproc_group.h"
#include "unit/test_overlap_case.h"

namespace {

using namespace boostcomm;

constexpr int kRanks = 2;
constexpr std::size_t kTensors = 8;
constexpr std::size_t kCount = 1000;             // float32 elements per tensor
constexpr std::size_t kTunedBytes = 8 * 1024;    // two tensors per bucket
constexpr std::size_t kOptionBytes = 16 * 1024;  // four tensors per bucket
constexpr std::size_t kEnvBytes = 12 * 1024;     // three tensors per bucket

using boostcomm::testing::TunableOverride;

// Buckets planBuckets makes of the test's tensors under `bucketBytes`.
std::size_t expectedBuckets(std::size_t bucketBytes) {
  const std::vector<planner::TensorInfo> infos(kTensors, planner::TensorInfo{kCount, DataType::kFloat32});
  planner::BucketOptions options;
  options.bucketBytes = bucketBytes;
  return planner::planBuckets(infos, options).buckets.size();
}

// One step of a GradientGroup over the test's tensors; checks the sum against
// float64 and the limit in force against `wantBytes` and `wantSource`.
void checkGroup(Communicator& comm, const GradientGroupOptions& options, std::size_t wantBytes,
                const std::string& wantSource) {
  std::vector<std::vector<float>> data(kTensors, std::vector<float>(kCount));
  std::vector<View> views;
  for (std::size_t t = 0; t < kTensors; ++t) {
    for (std::size_t i = 0; i < kCount; ++i)
      data[t][i] = static_cast<float>(comm.rank() + 1) * 0.5f + static_cast<float>((t * kCount + i) % 13);
    views.push_back(View(std::span(data[t])));
  }
  GradientGroup group(comm, views, options);
  const GradientGroupStats stats = group.stats();
  EXPECT_EQ(stats.bucketLimitBytes, wantBytes);
  EXPECT_EQ(stats.buckets, expectedBuckets(wantBytes));
  const std::string text = group.describe();
  EXPECT_NE(text.find("bucket limit " + std::to_string(wantBytes) + " bytes (" + wantSource + ")"), std::string::npos)
      << text;
  group.allreduce();
  for (std::size_t t = 0; t < kTensors; ++t) {
    for (std::size_t i = 0; i < kCount; ++i) {
      double want = 0;
      for (int r = 0; r < comm.size(); ++r) want += (r + 1) * 0.5 + static_cast<double>((t * kCount + i) % 13);
      ASSERT_EQ(static_cast<double>(data[t][i]), want) << "tensor " << t << " element " << i;
    }
  }
}

TEST(GradientGroupTuned, CacheBucketSizeIsUsedUnlessTheUserChoseOne) {
  // The sizes give different plans, so the bucket count tells them apart.
  ASSERT_GT(expectedBuckets(kTunedBytes), expectedBuckets(kEnvBytes));
  ASSERT_GT(expectedBuckets(kEnvBytes), expectedBuckets(kOptionBytes));
  ASSERT_GT(expectedBuckets(kOptionBytes), expectedBuckets(25u << 20));

  const std::string path =
      (std::filesystem::temp_directory_path() / ("bc_gg_tuned_" + std::to_string(::getpid()) + ".json")).string();
  TuningCache cache(boostcomm::testing::inProcessSignature(kRanks));
  cache.bucketBytes = kTunedBytes;
  cache.save(path);
  {
    const TunableOverride cacheFile(core::kTunableTuningCache, path);
    detail::runInProcess(kRanks, [](Communicator& comm) {
      ASSERT_EQ(tunedBucketBytes(comm), kTunedBytes);
      checkGroup(comm, {}, kTunedBytes, "tuning cache");
      GradientGroupOptions explicitLimit;
      explicitLimit.bucketBytes = kOptionBytes;
      checkGroup(comm, explicitLimit, kOptionBytes, "option");
    });
    const TunableOverride env(core::kTunableBucketBytes, std::to_string(kEnvBytes));
    detail::runInProcess(kRanks,
                         [](Communicator& comm) { checkGroup(comm, {}, kEnvBytes, "BOOSTCOMM_BUCKET_BYTES"); });
  }
  std::filesystem::remove(path);
  // No cache: the registry default.
  detail::runInProcess(kRanks, [](Communicator& comm) { checkGroup(comm, {}, 25u << 20, "default"); });
}

// OverlapEngine over the same tensors, bucketBytes 0 unless `bucketBytes`:
// the plan has the buckets of `wantBytes` and a few steps give the reference.
void checkEngine(Communicator& comm, std::size_t bucketBytes, std::size_t wantBytes) {
  boostcomm::testing::GradientSet g =
      boostcomm::testing::makeGradients(std::vector<std::size_t>(kTensors, kCount), {DataType::kFloat32});
  OverlapOptions o = OverlapOptions::fromEnvironment();
  EXPECT_EQ(o.bucketBytes, 0u) << "fromEnvironment must leave the limit to the bucket component";
  o.bucketBytes = bucketBytes;
  o.firstBucketBytes = 0;
  {
    OverlapEngine engine(comm, g.tensors, o);
    EXPECT_EQ(engine.bucketCount(), expectedBuckets(wantBytes));
    const std::string text = engine.describeBuckets();
    const std::size_t perBucket = wantBytes / (kCount * sizeof(float));
    EXPECT_NE(text.find(std::to_string(std::min(perBucket, kTensors)) + " tensors"), std::string::npos) << text;
  }
  const auto r = boostcomm::testing::runEngineSteps(comm, g, o, 2, /*sameOrder=*/false);
  EXPECT_EQ(r.failures, "");
  EXPECT_EQ(r.buckets, expectedBuckets(wantBytes));
}

TEST(GradientGroupTuned, OverlapEngineUsesTheCacheBucketSizeToo) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("bc_ov_tuned_" + std::to_string(::getpid()) + ".json")).string();
  TuningCache cache(boostcomm::testing::inProcessSignature(kRanks));
  cache.bucketBytes = kTunedBytes;
  cache.save(path);
  {
    const TunableOverride cacheFile(core::kTunableTuningCache, path);
    detail::runInProcess(kRanks, [](Communicator& comm) {
      checkEngine(comm, 0, kTunedBytes);
      checkEngine(comm, kOptionBytes, kOptionBytes);  // an explicit option wins
    });
    const TunableOverride env(core::kTunableBucketBytes, std::to_string(kEnvBytes));
    detail::runInProcess(kRanks, [](Communicator& comm) { checkEngine(comm, 0, kEnvBytes); });
  }
  std::filesystem::remove(path);
  detail::runInProcess(kRanks, [](Communicator& comm) { checkEngine(comm, 0, 25u << 20); });
}

TEST(GradientGroupTuned, RanksWithDifferentTunedSizesFailOnEveryRank) {
  // applyTuningCache is per rank; a job that applies different caches must
  // not end with different bucket plans (the data would be misaligned).
  const auto errors = boostcomm::testing::errorsOnEveryRank(kRanks, [](Communicator& comm) {
    TuningCache cache(currentSignature(comm));
    cache.bucketBytes = comm.rank() == 0 ? kTunedBytes : kOptionBytes;
    ASSERT_TRUE(applyTuningCache(comm, cache));
    std::vector<float> a(kCount);
    GradientGroup group(comm, {View(std::span(a))});
  });
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
}

}  // namespace
