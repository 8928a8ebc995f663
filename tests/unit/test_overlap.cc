// OverlapEngine on in-process groups (world sizes 1, 2, 3, 5; progress by the
// caller only, by the progress thread from creation, or auto): results against the
// float64 reference and bitwise identical on every rank, for every buffer
// strategy / stage count / ready order; bucket rebuild from the first step;
// bucket-view mode (gradients in the engine's arena); misuse errors; failure propagation (an injected error, a rank that never
// joins); stats consistency.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "common/tunable_override.h"
#include "testing/inproc_group.h"
#include "unit/test_overlap_case.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

OverlapOptions smallBuckets() {
  OverlapOptions o;  // not fromEnvironment: tests must not depend on the caller's env
  o.bucketBytes = 16 << 10;
  o.firstBucketBytes = 4 << 10;
  return o;
}

// Runs the case on every rank and checks results and cross-rank identity.
void expectCorrect(int worldSize, const OverlapOptions& options, bool sameOrder, const std::vector<DataType>& dtypes,
                   int steps = 3) {
  std::mutex mutex;
  std::vector<StepsResult> results(static_cast<std::size_t>(worldSize));
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    GradientSet g = makeGradients(mixedCounts(), dtypes);
    StepsResult r = runEngineSteps(comm, g, options, steps, sameOrder);
    std::lock_guard lock(mutex);
    results[static_cast<std::size_t>(comm.rank())] = std::move(r);
  });
  for (int r = 0; r < worldSize; ++r) {
    const StepsResult& res = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(res.failures, "") << "rank " << r;
    EXPECT_EQ(res.hashes, results[0].hashes) << "rank " << r << " differs from rank 0";
    EXPECT_EQ(res.stats.steps, static_cast<std::size_t>(steps));
    EXPECT_EQ(res.stats.last.buckets, res.buckets);
    EXPECT_LE(res.stats.last.hiddenSeconds, res.stats.last.commSeconds);
    EXPECT_GE(res.stats.last.efficiency, 0.0);
    EXPECT_LE(res.stats.last.efficiency, 1.0);
    EXPECT_LE(res.stats.mean.hiddenSeconds, res.stats.mean.commSeconds + 1e-12);
    EXPECT_GE(res.stats.last.stepSeconds, res.stats.last.exposedSeconds);
  }
}

struct Config {
  int stages;
  BufferStrategy buffers;
  bool enable;
};

// (world size, BOOSTCOMM_PROGRESS): "caller" keeps the engine's
// useProgressThread() from starting a thread, so every bucket completes
// inside markReady/finishBackward; "thread" has the thread from creation.
class OverlapSweep : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  void SetUp() override { progress_.emplace(core::kTunableProgress, std::get<1>(GetParam())); }
  void TearDown() override { progress_.reset(); }
  static int worldSize() { return std::get<0>(GetParam()); }

 private:
  std::optional<boostcomm::testing::TunableOverride> progress_;
};

TEST_P(OverlapSweep, MatchesReferenceForEveryConfiguration) {
  const int worldSize = OverlapSweep::worldSize();
  for (const Config c : {Config{1, BufferStrategy::kPingPong, true}, Config{2, BufferStrategy::kPingPong, true},
                         Config{1, BufferStrategy::kSingle, true}, Config{3, BufferStrategy::kSingle, true},
                         Config{2, BufferStrategy::kPingPong, false}}) {
    SCOPED_TRACE("stages " + std::to_string(c.stages) + (c.buffers == BufferStrategy::kSingle ? " single" : " pingpong") +
                 (c.enable ? " overlap" : " no-overlap"));
    OverlapOptions o = smallBuckets();
    o.stages = c.stages;
    o.bufferStrategy = c.buffers;
    o.enable = c.enable;
    expectCorrect(worldSize, o, /*sameOrder=*/true, {DataType::kFloat32});
    expectCorrect(worldSize, o, /*sameOrder=*/false, {DataType::kFloat32, DataType::kFloat64});
  }
}

TEST_P(OverlapSweep, AverageAndMixedDtypes) {
  OverlapOptions o = smallBuckets();
  o.average = true;
  expectCorrect(worldSize(), o, false, {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16});
}

TEST_P(OverlapSweep, IntegerGradientsSum) {
  expectCorrect(worldSize(), smallBuckets(), false, {DataType::kInt32, DataType::kInt64, DataType::kFloat32});
}

TEST_P(OverlapSweep, BucketsFromFirstStepArrivalOrder) {
  // Ranks mark in different orders; buckets are rebuilt from rank 0's order
  // after step 1 and results stay correct (and identical) afterwards.
  OverlapOptions o = smallBuckets();
  o.bucketsFromFirstStep = true;
  expectCorrect(worldSize(), o, false, {DataType::kFloat32}, 4);
}

TEST_P(OverlapSweep, OneBigBucketAndOneTensorPerBucket) {
  OverlapOptions big = smallBuckets();
  big.bucketBytes = 64 << 20;
  big.firstBucketBytes = 0;
  expectCorrect(worldSize(), big, false, {DataType::kFloat32});
  OverlapOptions tiny = smallBuckets();
  tiny.bucketBytes = 1;  // every tensor alone: all in place, no staging
  tiny.firstBucketBytes = 0;
  expectCorrect(worldSize(), tiny, false, {DataType::kFloat32});
}

TEST_P(OverlapSweep, BucketViewMatchesReference) {
  // Gradients written into tensorView(i) (the bucket arena), reduced in place.
  for (const int stages : {1, 2, 3}) {
    for (const bool enable : {true, false}) {
      SCOPED_TRACE("bucket view, stages " + std::to_string(stages) + (enable ? " overlap" : " no-overlap"));
      OverlapOptions o = smallBuckets();
      o.bucketView = true;
      o.stages = stages;
      o.enable = enable;
      expectCorrect(worldSize(), o, /*sameOrder=*/false, {DataType::kFloat32, DataType::kFloat64});
    }
  }
  OverlapOptions avg = smallBuckets();
  avg.bucketView = true;
  avg.average = true;
  expectCorrect(worldSize(), avg, false, {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16});
  OverlapOptions ints = smallBuckets();
  ints.bucketView = true;
  expectCorrect(worldSize(), ints, false, {DataType::kInt32, DataType::kInt64, DataType::kFloat32});
  OverlapOptions big = smallBuckets();
  big.bucketView = true;
  big.bucketBytes = 64 << 20;  // one bucket
  big.firstBucketBytes = 0;
  expectCorrect(worldSize(), big, false, {DataType::kFloat32});
  OverlapOptions tiny = smallBuckets();
  tiny.bucketView = true;
  tiny.bucketBytes = 1;  // one tensor per bucket, each its own arena range
  tiny.firstBucketBytes = 0;
  expectCorrect(worldSize(), tiny, false, {DataType::kFloat32});
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, OverlapSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5), ::testing::Values("caller", "thread", "auto")),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

TEST(OverlapProgress, CallerModeKeepsTheThreadOffAndAutoStartsIt) {
  for (const char* mode : {"caller", "auto"}) {
    const boostcomm::testing::TunableOverride progress(core::kTunableProgress, mode);
    detail::runInProcess(2, [&](Communicator& comm) {
      GradientSet g = makeGradients({10, 20}, {DataType::kFloat32});
      OverlapEngine engine(comm, g.tensors, smallBuckets());
      EXPECT_EQ(comm.progressThread(), std::string(mode) == "auto") << mode;
    });
  }
}

TEST(OverlapBucketView, SlotsTakeTheInitialValuesAndCallerBuffersStayUntouched) {
  detail::runInProcess(2, [](Communicator& comm) {
    GradientSet g = makeGradients({3, 5, 0, 2}, {DataType::kInt32});
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      auto* p = static_cast<std::int32_t*>(g.tensors[i].data.data);
      for (std::size_t k = 0; k < g.tensors[i].data.count; ++k) p[k] = static_cast<std::int32_t>(10 * i + k);
    }
    const GradientSet before = g;  // storage copied; its views still name g's storage
    OverlapOptions o = smallBuckets();
    o.bucketView = true;
    OverlapEngine engine(comm, g.tensors, o);
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const View v = engine.tensorView(i);
      ASSERT_EQ(v.count, g.tensors[i].data.count);
      ASSERT_EQ(v.dtype, DataType::kInt32);
      for (std::size_t k = 0; k < v.count; ++k) EXPECT_EQ(static_cast<std::int32_t*>(v.data)[k], 10 * static_cast<int>(i) + static_cast<int>(k));
    }
    engine.beginBackward();
    for (std::size_t i = 0; i < g.tensors.size(); ++i) engine.markReady(i);
    engine.finishBackward();
    for (std::size_t i = 0; i < g.tensors.size(); ++i) {
      const View v = engine.tensorView(i);
      for (std::size_t k = 0; k < v.count; ++k) EXPECT_EQ(static_cast<std::int32_t*>(v.data)[k], 2 * (10 * static_cast<int>(i) + static_cast<int>(k)));
      EXPECT_EQ(g.storage[i], before.storage[i]) << "the caller's buffer " << i << " was written in bucket-view mode";
    }
    EXPECT_THROW(engine.tensorView(4), Error);
  });
}

TEST(OverlapBucketView, CopyModeTensorViewIsTheCallersBuffer) {
  detail::runInProcess(1, [](Communicator& comm) {
    GradientSet g = makeGradients({3, 5}, {DataType::kFloat32});
    OverlapEngine engine(comm, g.tensors, smallBuckets());
    EXPECT_EQ(engine.tensorView(1).data, g.tensors[1].data.data);
  });
}

TEST(OverlapBucketView, RejectsBucketsFromFirstStep) {
  detail::runInProcess(2, [](Communicator& comm) {
    GradientSet g = makeGradients({4, 8}, {DataType::kFloat32});
    OverlapOptions o = smallBuckets();
    o.bucketView = true;
    o.bucketsFromFirstStep = true;
    try {
      OverlapEngine engine(comm, g.tensors, o);
      ADD_FAILURE() << "bucketView + bucketsFromFirstStep was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("bucketsFromFirstStep"), std::string::npos) << e.what();
    }
  });
}

TEST(OverlapBucketView, RanksDisagreeingOnTheModeFailEverywhere) {
  std::atomic<int> mismatches{0};
  detail::runInProcess(2, [&](Communicator& comm) {
    GradientSet g = makeGradients({4, 8}, {DataType::kFloat32});
    OverlapOptions o = smallBuckets();
    o.bucketView = comm.rank() == 0;
    try {
      OverlapEngine engine(comm, g.tensors, o);
    } catch (const Error& e) {
      if (e.category() == ErrorCategory::kMismatch) ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 2);
}

TEST(OverlapErrors, MisuseNamesTheTensor) {
  detail::runInProcess(1, [](Communicator& comm) {
    GradientSet g = makeGradients({4, 5, 6}, {DataType::kFloat32});
    OverlapEngine engine(comm, g.tensors, smallBuckets());
    EXPECT_THROW(engine.markReady(3), Error);
    engine.markReady(1);
    try {
      engine.markReady(1);
      ADD_FAILURE() << "double markReady accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("grad1"), std::string::npos) << e.what();
    }
    try {
      engine.finishBackward();
      ADD_FAILURE() << "finishBackward with unmarked tensors accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("grad0"), std::string::npos) << e.what();
    }
    engine.markReady(0);
    engine.markReady(2);
    engine.finishBackward();  // the step still completes after the misuse
  });
}

TEST(OverlapErrors, RanksDeclaringDifferentTensorsFailEverywhere) {
  std::atomic<int> mismatches{0};
  detail::runInProcess(2, [&](Communicator& comm) {
    GradientSet g = makeGradients({4, comm.rank() == 0 ? 5u : 6u}, {DataType::kFloat32});
    try {
      OverlapEngine engine(comm, g.tensors, smallBuckets());
    } catch (const Error& e) {
      if (e.category() == ErrorCategory::kMismatch) ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 2);
}

TEST(OverlapErrors, InjectedFailureCompletesTheStepWithTheError) {
  // Every rank fails before launching bucket 2: no rank hangs, each
  // finishBackward rethrows the engine thread's error, and so does every
  // later call.
  std::atomic<int> seen{0};
  detail::runInProcess(2, [&](Communicator& comm) {
    GradientSet g = makeGradients(mixedCounts(), {DataType::kFloat32});
    OverlapOptions o = smallBuckets();
    o.beforeLaunch = [](std::size_t bucket) {
      if (bucket == 2) throw Error(ErrorCategory::kTransport, -1, "injected failure at bucket 2");
    };
    OverlapEngine engine(comm, g.tensors, o);
    ASSERT_GT(engine.bucketCount(), 2u);
    // The engine thread may fail while tensors are still being marked: from
    // then on markReady rethrows the error too.
    try {
      for (std::size_t t : readyOrder(g.tensors.size(), 5)) engine.markReady(t);
      engine.finishBackward();
    } catch (const Error& e) {
      if (std::string(e.what()).find("injected") != std::string::npos) ++seen;
    }
    EXPECT_THROW(engine.markReady(0), Error);
    EXPECT_THROW(engine.finishBackward(), Error);
  });
  EXPECT_EQ(seen.load(), 2);
}

TEST(OverlapErrors, AbsentPeerTimesOut) {
  // Rank 1 never joins the step: rank 0's collectives cannot finish, its
  // engine thread's deadline fires and finishBackward reports kTimeout.
  std::atomic<int> timeouts{0};
  std::atomic<bool> rank0Done{false};
  detail::runInProcess(2, [&](Communicator& comm) {
    GradientSet g = makeGradients({100, 200, 300}, {DataType::kFloat32});
    OverlapOptions o = smallBuckets();
    o.timeout = std::chrono::milliseconds(200);
    OverlapEngine engine(comm, g.tensors, o);
    if (comm.rank() == 0) {
      for (std::size_t t = 0; t < g.tensors.size(); ++t) engine.markReady(t);
      try {
        engine.finishBackward();
      } catch (const Error& e) {
        if (e.category() == ErrorCategory::kTimeout) ++timeouts;
      }
      rank0Done = true;
    } else {
      while (!rank0Done) std::this_thread::yield();
    }
  });
  EXPECT_EQ(timeouts.load(), 1);
}

TEST(OverlapOptionsTest, RejectsBadSettings) {
  detail::runInProcess(1, [](Communicator& comm) {
    GradientSet g = makeGradients({4}, {DataType::kInt32});
    OverlapOptions o = smallBuckets();
    o.stages = 0;
    EXPECT_THROW(OverlapEngine(comm, g.tensors, o), Error);
    o = smallBuckets();
    o.average = true;  // integer average is rejected, naming the tensor
    EXPECT_THROW(OverlapEngine(comm, g.tensors, o), Error);
  });
}

TEST(OverlapOptionsTest, NoTensorsIsAnEmptyStep) {
  detail::runInProcess(2, [](Communicator& comm) {
    OverlapEngine engine(comm, {}, smallBuckets());
    engine.beginBackward();
    engine.finishBackward();
    EXPECT_EQ(engine.getOverlapStats().steps, 1u);
    EXPECT_EQ(engine.getOverlapStats().last.efficiency, 1.0);
  });
}

}  // namespace
