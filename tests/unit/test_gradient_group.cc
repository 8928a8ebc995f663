// GradientGroup on in-process communicators (one thread per rank), world
// sizes 1, 2, 3 and 5: mixed dtypes (float32/64, float16, bfloat16, int32/64,
// uint8), empty tensors, sizes 0, 1, 7 and primes; bucket limits that give one
// bucket per tensor, a few tensors per bucket and one bucket for all; copy and
// bucket-view modes; sum and average; blocking and async steps, twice per
// group (buffer reuse). Results are checked element by element against the
// float64 / wraparound reference of tests/common/test_data.h, and every rank's
// bytes must be identical. Bad input: every rank throws, naming the culprit.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/inproc_harness.h"
#include "common/test_data.h"
#include "testing/inproc_group.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

constexpr DataType kMixed[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                               DataType::kInt32,   DataType::kUInt8,   DataType::kInt64};
constexpr std::size_t kCounts[] = {0, 1, 7, 13, 31, 0, 97, 1009, 4099, 1, 7};

struct TensorSpec {
  std::size_t count;
  DataType dtype;
};

std::vector<TensorSpec> tensorList(bool floatsOnly) {
  std::vector<TensorSpec> list;
  for (std::size_t t = 0; t < 23; ++t) {
    DataType dtype = kMixed[t % std::size(kMixed)];
    if (floatsOnly && !isFloatingPoint(dtype)) dtype = DataType::kFloat32;
    list.push_back({kCounts[t % std::size(kCounts)], dtype});
  }
  return list;
}

struct Case {
  int world;
  bool bucketView;
  bool average;
  std::size_t bucketBytes;
};

std::string name(const Case& c) {
  return "world " + std::to_string(c.world) + (c.bucketView ? " bucket-view" : " copy") +
         (c.average ? " avg" : " sum") + " bucketBytes " + std::to_string(c.bucketBytes);
}

// Runs two steps of one GradientGroup on every rank; returns failures.
std::vector<std::string> runCase(const Case& c) {
  const std::vector<TensorSpec> specs = tensorList(c.average);
  const ReduceOp op = c.average ? ReduceOp::kAvg : ReduceOp::kSum;
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::vector<std::uint64_t>> hashes(static_cast<std::size_t>(c.world));
  detail::runInProcess(c.world, [&](Communicator& comm) {
    std::vector<std::vector<std::byte>> storage;
    std::vector<View> views;
    for (const TensorSpec& s : specs) {
      storage.emplace_back(s.count * dataTypeSize(s.dtype));
      views.emplace_back(storage.back().data(), s.count, s.dtype);
    }
    GradientGroupOptions options;
    options.bucketBytes = c.bucketBytes;
    options.average = c.average;
    options.bucketView = c.bucketView;
    GradientGroup group(comm, views, options);
    for (std::uint64_t step = 0; step < 2; ++step) {
      for (std::size_t t = 0; t < specs.size(); ++t) {
        const View v = group.tensorView(t);
        if (c.bucketView && v.count > 0) {
          EXPECT_NE(v.data, views[t].data);
        }
        fillReduceInput(v.data, v.dtype, op, Pattern::kExact, 1000 * step + t, comm.rank(), 0, v.count);
      }
      if (step == 0) {
        group.allreduce();
      } else {
        GradientWork work = group.allreduceAsync();
        while (!work.test()) {
        }
        work.wait();
      }
      for (std::size_t t = 0; t < specs.size(); ++t) {
        const View v = group.tensorView(t);
        const std::string error =
            checkReduction(v.data, v.dtype, op, Pattern::kExact, 1000 * step + t, c.world, 0, v.count);
        std::lock_guard lock(mutex);
        if (!error.empty() && failures.size() < 10)
          failures.push_back(name(c) + " rank " + std::to_string(comm.rank()) + " step " + std::to_string(step) +
                             " tensor " + std::to_string(t) + " (" + std::string(toString(v.dtype)) + " x" +
                             std::to_string(v.count) + "): " + error);
        hashes[static_cast<std::size_t>(comm.rank())].push_back(
            hashBytes(v.data, v.count * dataTypeSize(v.dtype)));
      }
    }
    const GradientGroupStats st = group.stats();
    std::lock_guard lock(mutex);
    if (st.steps != 2 || st.tensors != specs.size() || st.collectivesLaunched != 2 * st.collectivesPerStep)
      failures.push_back(name(c) + ": stats " + group.describe());
  });
  for (int r = 1; r < c.world; ++r)
    if (hashes[static_cast<std::size_t>(r)] != hashes[0])
      failures.push_back(name(c) + ": rank " + std::to_string(r) + " differs bitwise from rank 0");
  return failures;
}

TEST(GradientGroup, MixedTensorsAllModes) {
  std::vector<std::string> failures;
  for (int world : {1, 2, 3, 5}) {
    for (bool bucketView : {false, true}) {
      for (bool average : {false, true}) {
        // 64: roughly a bucket per tensor; 1024: a few per bucket; 1 MiB: one per dtype.
        for (std::size_t bucketBytes : {std::size_t{64}, std::size_t{1024}, std::size_t{1} << 20}) {
          for (const std::string& f : runCase({world, bucketView, average, bucketBytes})) failures.push_back(f);
        }
      }
    }
  }
  std::string all;
  for (const std::string& f : failures) all += f + "\n";
  EXPECT_TRUE(failures.empty()) << all;
}

TEST(GradientGroup, StatsAndDescription) {
  detail::runInProcess(2, [](Communicator& comm) {
    std::vector<float> a(10), b(20), c(0);
    std::vector<std::int32_t> d(5);
    GradientGroupOptions options;
    options.bucketBytes = 1 << 20;
    GradientGroup group(comm, {View(std::span(a)), View(std::span(b)), View(std::span(c)), View(std::span(d))},
                        options);
    const GradientGroupStats st = group.stats();
    EXPECT_EQ(st.tensors, 4u);
    EXPECT_EQ(st.buckets, 2u);  // one float32, one int32
    EXPECT_EQ(st.collectivesPerStep, 2u);
    EXPECT_EQ(st.perTensorCollectives, 4u);
    EXPECT_EQ(st.payloadBytes, 30 * 4 + 5 * 4u);
    EXPECT_GE(st.bucketBytes, st.payloadBytes);
    const std::string text = group.describe();
    EXPECT_NE(text.find("4 tensors, 2 buckets"), std::string::npos) << text;
    EXPECT_NE(text.find("bucket 1: int32"), std::string::npos) << text;
  });
}

TEST(GradientGroup, NoTensorsAndOnlyEmptyTensors) {
  detail::runInProcess(3, [](Communicator& comm) {
    GradientGroup none(comm, {});
    none.allreduce();
    EXPECT_EQ(none.stats().buckets, 0u);
    GradientGroup empty(comm, {View(nullptr, 0, DataType::kFloat32), View(nullptr, 0, DataType::kInt32)});
    empty.allreduce();
    EXPECT_EQ(empty.stats().collectivesPerStep, 0u);
    EXPECT_EQ(empty.stats().steps, 1u);
  });
}

TEST(GradientGroup, MismatchedTensorListsFailOnEveryRank) {
  for (int world : {2, 3, 5}) {
    const auto errors = errorsOnEveryRank(world, [world](Communicator& comm) {
      std::vector<float> a(16), b(8);
      std::vector<View> views = {View(std::span(a))};
      // The last rank passes one extra tensor.
      if (comm.rank() == world - 1) views.push_back(View(std::span(b)));
      GradientGroup group(comm, views);
    });
    for (const Error& e : errors) {
      EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
      EXPECT_NE(e.detail().find("rank(s) " + std::to_string(world - 1)), std::string::npos) << e.what();
    }
  }
  // Same counts, different dtype on rank 1.
  const auto errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(16);
    GradientGroup group(comm, {View(a.data(), 16, comm.rank() == 1 ? DataType::kInt32 : DataType::kFloat32)});
  });
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
  // Different options (bucket limit) on rank 0.
  const auto optionErrors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> a(16);
    GradientGroupOptions options;
    options.bucketBytes = comm.rank() == 0 ? 1024 : 2048;
    GradientGroup group(comm, {View(std::span(a))}, options);
  });
  for (const Error& e : optionErrors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
}

TEST(GradientGroup, InvalidInputFailsOnEveryRank) {
  // Average of an integer tensor: every rank has the bad input.
  auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<std::int32_t> a(16);
    GradientGroupOptions options;
    options.average = true;
    GradientGroup group(comm, {View(std::span(a))}, options);
  });
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(e.detail().find("tensor 0 is int32"), std::string::npos) << e.what();
  }
  // A null pointer on rank 2 only: rank 2 names the tensor, the others name rank 2.
  errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(16);
    GradientGroup group(comm, {View(comm.rank() == 2 ? nullptr : a.data(), 16, DataType::kFloat32)});
  });
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    const bool culprit = e.rank() == 2;
    EXPECT_NE(e.detail().find(culprit ? "null data pointer" : "invalid input on rank(s) 2"), std::string::npos)
        << e.what();
  }
}

TEST(GradientGroup, BucketViewKeepsInitialContentsAndRejectsBadIndex) {
  detail::runInProcess(2, [](Communicator& comm) {
    std::vector<float> a = {1, 2, 3};
    GradientGroupOptions options;
    options.bucketView = true;
    GradientGroup group(comm, {View(std::span(a))}, options);
    const View v = group.tensorView(0);
    ASSERT_EQ(v.count, 3u);
    EXPECT_EQ(static_cast<float*>(v.data)[2], 3.0f);
    group.allreduce();
    EXPECT_EQ(static_cast<float*>(v.data)[2], 6.0f);
    EXPECT_EQ(a[2], 3.0f);  // the caller's original memory is not the tensor any more
    EXPECT_THROW(group.tensorView(1), Error);
  });
}

}  // namespace
