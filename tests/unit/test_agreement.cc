// Agreement before error (issue 13, point 2): OverlapEngine and GradientGroup
// construction is collective, so a local argument error on ONE rank (stages 0,
// a null tensor, an integer average) must make EVERY rank throw
// (kInvalidArgument: the bad rank with its reason, the others naming it)
// instead of leaving the others in the agreement allgather; ranks whose
// options differ (bucket limits, average, bucket view, overlap, stages,
// buffer strategy, registration) fail with kMismatch on every rank.
//
// Guard: BOOSTCOMM_TIMEOUT_MS is 10 s for these groups, so a regression (a
// rank that throws before the exchange) fails with kTimeout instead of hanging.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "api/agreement.h"
#include "boostcomm/boostcomm.h"
#include "common/inproc_harness.h"
#include "common/tunable_override.h"
#include "testing/inproc_group.h"
#include "unit/test_overlap_case.h"

namespace boostcomm {
namespace {

using testing::GradientSet;
using testing::makeGradients;

constexpr const char* kGuardMs = "10000";

OverlapOptions baseOptions() {
  OverlapOptions o;  // not fromEnvironment
  o.bucketBytes = 16 << 10;
  o.firstBucketBytes = 4 << 10;
  return o;
}

// Runs build(comm, bad) on every rank (bad: this is the odd rank out) and
// checks every rank threw: with `badCategory` on the odd rank, with
// `otherCategory` elsewhere; for local errors the others name the bad rank.
void expectEveryRankFails(int worldSize, const std::function<void(Communicator&, bool)>& build,
                          ErrorCategory category, const std::string& badText) {
  const testing::TunableOverride guard(core::kTunableTimeoutMs, kGuardMs);
  const int badRank = worldSize - 1;
  const std::vector<Error> errors = testing::errorsOnEveryRank(worldSize, [&](Communicator& comm) {
    build(comm, comm.rank() == badRank);
  });
  for (const Error& e : errors) {
    const std::string what = e.what();
    EXPECT_EQ(e.category(), category) << what;
    if (category != ErrorCategory::kInvalidArgument) {
      EXPECT_NE(what.find("differ"), std::string::npos) << what;
    } else if (e.rank() == badRank) {
      EXPECT_NE(what.find(badText), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("rank(s) " + std::to_string(badRank)), std::string::npos) << what;
    }
  }
}

void expectLocalError(int worldSize, const std::function<void(Communicator&, bool)>& build, const std::string& text) {
  expectEveryRankFails(worldSize, build, ErrorCategory::kInvalidArgument, text);
}
void expectMismatch(int worldSize, const std::function<void(Communicator&, bool)>& build) {
  expectEveryRankFails(worldSize, build, ErrorCategory::kMismatch, "");
}

// An OverlapEngine over float32 (or int32) tensors with `change` applied on the bad rank.
std::function<void(Communicator&, bool)> overlapWith(const std::function<void(OverlapOptions&)>& change,
                                                     DataType dtype = DataType::kFloat32) {
  return [change, dtype](Communicator& comm, bool bad) {
    GradientSet g = makeGradients({10, 3000, 1, 0, 500}, {dtype});
    OverlapOptions o = baseOptions();
    if (bad) change(o);
    OverlapEngine engine(comm, g.tensors, o);
  };
}

class Agreement : public ::testing::TestWithParam<int> {};

TEST(GatheredWords, FirstDifferentRankComparesEveryField) {
  // Three ranks of two words each, as gatherWords lays them out.
  const long long mine[2] = {7, 9};
  EXPECT_EQ(detail::firstDifferentRank({7, 9, 7, 9, 7, 9}, mine, 2), -1);
  EXPECT_EQ(detail::firstDifferentRank({7, 9, 7, 8, 6, 9}, mine, 2), 1);  // rank 1's second word
  EXPECT_EQ(detail::firstDifferentRank({7, 9, 7, 9, 6, 9}, mine, 2), 2);
  // Seen from a rank that is itself the odd one: rank 0 already differs.
  const long long odd[1] = {5};
  EXPECT_EQ(detail::firstDifferentRank({4, 5, 4}, odd, 1), 0);
  EXPECT_THROW(detail::firstDifferentRank({4}, odd, 0), Error);
}

TEST_P(Agreement, OverlapEngineLocalErrorsFailEveryRank) {
  const int n = GetParam();
  expectLocalError(n, overlapWith([](OverlapOptions& o) { o.stages = 0; }), "stages is 0");
  expectLocalError(n, overlapWith([](OverlapOptions& o) { o.stages = -3; }), "stages is -3");
  expectLocalError(n, overlapWith([](OverlapOptions& o) { o.average = true; }, DataType::kInt32), "average");
  expectLocalError(n, overlapWith([](OverlapOptions& o) {
                     o.bucketView = true;
                     o.bucketsFromFirstStep = true;
                   }),
                   "bucketsFromFirstStep");
  expectLocalError(
      n,
      [](Communicator& comm, bool bad) {
        GradientSet g = makeGradients({10, 3000, 7}, {DataType::kFloat32});
        if (bad) g.tensors[1].data.data = nullptr;
        OverlapEngine engine(comm, g.tensors, baseOptions());
      },
      "null data pointer");
}

TEST_P(Agreement, GradientGroupLocalErrorsFailEveryRank) {
  const int n = GetParam();
  auto group = [](DataType dtype, const std::function<void(std::vector<View>&, GradientGroupOptions&)>& change) {
    return [dtype, change](Communicator& comm, bool bad) {
      GradientSet g = makeGradients({10, 3000, 7}, {dtype});
      std::vector<View> views;
      for (const GradientTensor& t : g.tensors) views.push_back(t.data);
      GradientGroupOptions o;
      o.bucketBytes = 8 << 10;
      if (bad) change(views, o);
      GradientGroup gg(comm, views, o);
    };
  };
  expectLocalError(n, group(DataType::kFloat32, [](std::vector<View>& v, GradientGroupOptions&) { v[2].data = nullptr; }),
                   "null data pointer");
  expectLocalError(n, group(DataType::kInt64, [](std::vector<View>&, GradientGroupOptions& o) { o.average = true; }),
                   "average");
}

TEST_P(Agreement, OverlapEngineOptionDifferencesAreMismatches) {
  const int n = GetParam();
  const std::vector<std::pair<const char*, std::function<void(OverlapOptions&)>>> changes = {
      {"bucketBytes", [](OverlapOptions& o) { o.bucketBytes = 32 << 10; }},
      {"firstBucketBytes", [](OverlapOptions& o) { o.firstBucketBytes = 0; }},
      {"average", [](OverlapOptions& o) { o.average = true; }},
      {"bucketView", [](OverlapOptions& o) { o.bucketView = true; }},
      {"enable", [](OverlapOptions& o) { o.enable = false; }},
      {"stages", [](OverlapOptions& o) { o.stages = 3; }},
      {"bufferStrategy", [](OverlapOptions& o) { o.bufferStrategy = BufferStrategy::kSingle; }},
      {"registeredBuffers", [](OverlapOptions& o) { o.registeredBuffers = false; }},
      {"bucketsFromFirstStep", [](OverlapOptions& o) { o.bucketsFromFirstStep = true; }},
  };
  for (const auto& [name, change] : changes) {
    SCOPED_TRACE(name);
    expectMismatch(n, overlapWith(change));
  }
}

TEST_P(Agreement, GradientGroupOptionDifferencesAreMismatches) {
  const int n = GetParam();
  const std::vector<std::pair<const char*, std::function<void(GradientGroupOptions&)>>> changes = {
      {"bucketBytes", [](GradientGroupOptions& o) { o.bucketBytes = 16 << 10; }},
      {"firstBucketBytes", [](GradientGroupOptions& o) { o.firstBucketBytes = 1 << 10; }},
      {"average", [](GradientGroupOptions& o) { o.average = true; }},
      {"bucketView", [](GradientGroupOptions& o) { o.bucketView = true; }},
  };
  for (const auto& [name, change] : changes) {
    SCOPED_TRACE(name);
    expectMismatch(n, [&change = change](Communicator& comm, bool bad) {
      GradientSet g = makeGradients({10, 3000, 7, 0, 1}, {DataType::kFloat32});
      std::vector<View> views;
      for (const GradientTensor& t : g.tensors) views.push_back(t.data);
      GradientGroupOptions o;
      o.bucketBytes = 8 << 10;
      if (bad) change(o);
      GradientGroup gg(comm, views, o);
    });
  }
}

TEST_P(Agreement, SameOptionsStillWorkAfterFailedConstructions) {
  // A failed agreement leaves the communicator usable: the next collective
  // construction on the same ranks succeeds and reduces correctly.
  const testing::TunableOverride guard(core::kTunableTimeoutMs, kGuardMs);
  detail::runInProcess(GetParam(), [](Communicator& comm) {
    GradientSet g = makeGradients({10, 3000}, {DataType::kFloat32});
    OverlapOptions bad = baseOptions();
    if (comm.rank() == 0) bad.stages = 0;
    EXPECT_THROW(OverlapEngine(comm, g.tensors, bad), Error);
    testing::StepsResult r = testing::runEngineSteps(comm, g, baseOptions(), 2, true);
    EXPECT_EQ(r.failures, "");
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Agreement, ::testing::Values(2, 3));

}  // namespace
}  // namespace boostcomm
