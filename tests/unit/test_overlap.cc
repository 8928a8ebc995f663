// OverlapEngine on in-process groups (world sizes 1-3): results against the
// float64 reference and bitwise identical on every rank, for every buffer
// strategy / stage count / ready order; bucket rebuild from the first step;
// misuse errors; failure propagation (an injected error, a rank that never
// joins); stats consistency.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>

#include "api/inproc_group.h"
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

class OverlapSweep : public ::testing::TestWithParam<int> {};

TEST_P(OverlapSweep, MatchesReferenceForEveryConfiguration) {
  const int worldSize = GetParam();
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
  expectCorrect(GetParam(), o, false, {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16});
}

TEST_P(OverlapSweep, IntegerGradientsSum) {
  expectCorrect(GetParam(), smallBuckets(), false, {DataType::kInt32, DataType::kInt64, DataType::kFloat32});
}

TEST_P(OverlapSweep, BucketsFromFirstStepArrivalOrder) {
  // Ranks mark in different orders; buckets are rebuilt from rank 0's order
  // after step 1 and results stay correct (and identical) afterwards.
  OverlapOptions o = smallBuckets();
  o.bucketsFromFirstStep = true;
  expectCorrect(GetParam(), o, false, {DataType::kFloat32}, 4);
}

TEST_P(OverlapSweep, OneBigBucketAndOneTensorPerBucket) {
  OverlapOptions big = smallBuckets();
  big.bucketBytes = 64 << 20;
  big.firstBucketBytes = 0;
  expectCorrect(GetParam(), big, false, {DataType::kFloat32});
  OverlapOptions tiny = smallBuckets();
  tiny.bucketBytes = 1;  // every tensor alone: all in place, no staging
  tiny.firstBucketBytes = 0;
  expectCorrect(GetParam(), tiny, false, {DataType::kFloat32});
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, OverlapSweep, ::testing::Values(1, 2, 3));

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
