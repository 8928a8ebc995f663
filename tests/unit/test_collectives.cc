// Correctness sweep of every collective on in-process groups (ctest label
// `unit`). The cross product is cut to fit a few minutes on 2 cores; the plan
// is in docs/TESTING.md:
//   Sweep/*    every collective x dtype x op x algorithm (+ default) at counts
//              {0, 1, 7, 1000}, world sizes {1, 2, 3, 4, 5, 7, 8, 16}, every broadcast root;
//   Large/*    count 2^20 + 3 for float32/sum, int32/max, bfloat16/sum (and
//              data-movement collectives in float32) across algorithms, ws {2, 3, 4, 8};
//   AllSizes/* a mid-size payload of every collective on world sizes 1..16;
//   Random/*   random float inputs checked with the rounding-error bound;
//   Variants/* in-place, async (one, many in flight, test() polling), buffer reuse.
// Tests live in one executable; CMake registers several ctest entries with
// --gtest_filter so `ctest -j2` runs them in parallel.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/collective_case.h"
#include "common/inproc_harness.h"
#include "testing/inproc_group.h"

namespace boostcomm::testing {
namespace {

const std::vector<ReduceOp> kOps(std::begin(kAllReduceOps), std::end(kAllReduceOps));
const std::vector<std::size_t> kSweepCounts{0, 1, 7, 1000};
constexpr std::size_t kLargeCount = (std::size_t{1} << 20) + 3;
// Above the 64 KiB float32 boundary where selection tables typically switch.
constexpr std::size_t kMidCount = 16387;

std::string paramName(TestCollective coll, int worldSize, DataType dtype) {
  return std::string(toString(coll)) + "_ws" + std::to_string(worldSize) + "_" + std::string(toString(dtype));
}

void expectNoFailures(const std::vector<std::string>& failures) {
  EXPECT_TRUE(failures.empty()) << formatFailures(failures);
}

// ---------------------------------------------------------------- Sweep
using SweepParam = std::tuple<TestCollective, int, DataType>;

class SweepTest : public ::testing::TestWithParam<SweepParam> {};

TEST_P(SweepTest, MatchesReference) {
  const auto [coll, worldSize, dtype] = GetParam();
  const auto algorithms = inProcessAlgorithms(worldSize, baseCollective(coll));
  const std::vector<std::size_t> counts = coll == TestCollective::kBarrier ? std::vector<std::size_t>{0} : kSweepCounts;
  auto cases = sweepCases(coll, dtype, algorithms, kOps, counts, worldSize, /*everyRoot=*/true);
  if (coll == TestCollective::kBarrier) {
    // A barrier has no data: run each algorithm a few times instead.
    const auto once = cases;
    for (int repeat = 0; repeat < 2; ++repeat) cases.insert(cases.end(), once.begin(), once.end());
  }
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

std::string sweepName(const ::testing::TestParamInfo<SweepParam>& info) {
  return paramName(std::get<0>(info.param), std::get<1>(info.param), std::get<2>(info.param));
}

const auto kSweepSizes = ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16);
const auto kSweepTypes = ::testing::ValuesIn(kAllDataTypes);

INSTANTIATE_TEST_SUITE_P(Allreduce, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kAllreduce), kSweepSizes, kSweepTypes),
                         sweepName);
INSTANTIATE_TEST_SUITE_P(Allgather, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kAllgather), kSweepSizes, kSweepTypes),
                         sweepName);
INSTANTIATE_TEST_SUITE_P(Allgatherv, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kAllgatherv), kSweepSizes, kSweepTypes),
                         sweepName);
INSTANTIATE_TEST_SUITE_P(Broadcast, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kBroadcast), kSweepSizes, kSweepTypes),
                         sweepName);
INSTANTIATE_TEST_SUITE_P(ReduceScatter, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kReduceScatter), kSweepSizes,
                                            kSweepTypes),
                         sweepName);
INSTANTIATE_TEST_SUITE_P(Barrier, SweepTest,
                         ::testing::Combine(::testing::Values(TestCollective::kBarrier), kSweepSizes,
                                            ::testing::Values(DataType::kFloat32)),
                         sweepName);

// ---------------------------------------------------------------- Large
// (collective, dtype, op) combinations that get the 2^20 + 3 count.
struct LargeCombo {
  TestCollective coll;
  DataType dtype;
  ReduceOp op;
};
void PrintTo(const LargeCombo& combo, std::ostream* os) {
  *os << toString(combo.coll) << "/" << toString(combo.dtype) << "/" << toString(combo.op);
}
using LargeParam = std::tuple<LargeCombo, int>;

class LargeTest : public ::testing::TestWithParam<LargeParam> {};

TEST_P(LargeTest, MatchesReference) {
  const auto [combo, worldSize] = GetParam();
  const auto algorithms = inProcessAlgorithms(worldSize, baseCollective(combo.coll));
  // Per-rank counts for the per-rank collectives keep the total near 2^20 + 3
  // elements while staying odd-sized (no algorithm gets an even split).
  std::size_t count = kLargeCount;
  if (combo.coll == TestCollective::kAllgather || combo.coll == TestCollective::kReduceScatter) {
    count = kLargeCount / static_cast<std::size_t>(worldSize) + 1;
  }
  auto cases = sweepCases(combo.coll, combo.dtype, algorithms, {combo.op}, {count}, worldSize, /*everyRoot=*/false);
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

std::string largeName(const ::testing::TestParamInfo<LargeParam>& info) {
  const auto& combo = std::get<0>(info.param);
  std::string name = paramName(combo.coll, std::get<1>(info.param), combo.dtype);
  if (isReducing(combo.coll)) name += "_" + std::string(toString(combo.op));
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Large, LargeTest,
    ::testing::Combine(::testing::Values(LargeCombo{TestCollective::kAllreduce, DataType::kFloat32, ReduceOp::kSum},
                                         LargeCombo{TestCollective::kAllreduce, DataType::kInt32, ReduceOp::kMax},
                                         LargeCombo{TestCollective::kAllreduce, DataType::kBFloat16, ReduceOp::kSum},
                                         LargeCombo{TestCollective::kReduceScatter, DataType::kFloat32, ReduceOp::kSum},
                                         LargeCombo{TestCollective::kAllgather, DataType::kFloat32, ReduceOp::kSum},
                                         LargeCombo{TestCollective::kBroadcast, DataType::kFloat32, ReduceOp::kSum}),
                       ::testing::Values(2, 3, 4, 8)),
    largeName);

// ---------------------------------------------------------------- AllSizes
using SizeParam = std::tuple<TestCollective, int>;

class AllSizesTest : public ::testing::TestWithParam<SizeParam> {};

TEST_P(AllSizesTest, MidSizeMatchesReference) {
  const auto [coll, worldSize] = GetParam();
  const auto algorithms = inProcessAlgorithms(worldSize, baseCollective(coll));
  const std::vector<std::size_t> counts{coll == TestCollective::kBarrier ? 0 : kMidCount};
  auto cases = sweepCases(coll, DataType::kFloat32, algorithms, {ReduceOp::kSum}, counts, worldSize, false);
  if (isReducing(coll)) {
    // avg divides by the world size: every size gets its own rounding.
    auto avg = sweepCases(coll, DataType::kBFloat16, algorithms, {ReduceOp::kAvg}, counts, worldSize, false);
    cases.insert(cases.end(), avg.begin(), avg.end());
  }
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

INSTANTIATE_TEST_SUITE_P(AllSizes, AllSizesTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTestCollectives), ::testing::Range(1, 17)),
                         [](const ::testing::TestParamInfo<SizeParam>& info) {
                           return std::string(toString(std::get<0>(info.param))) + "_ws" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---------------------------------------------------------------- Random
using RandomParam = std::tuple<int, DataType>;

class RandomTest : public ::testing::TestWithParam<RandomParam> {};

// Random inputs make every reduction order round differently: sums must stay
// within the bound of docs/TESTING.md, min/max stay exact, and ranks still agree bitwise.
TEST_P(RandomTest, WithinRoundingBound) {
  const auto [worldSize, dtype] = GetParam();
  const std::vector<ReduceOp> ops{ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax};
  std::vector<CaseSpec> cases;
  for (TestCollective coll : {TestCollective::kAllreduce, TestCollective::kReduceScatter}) {
    auto more = sweepCases(coll, dtype, inProcessAlgorithms(worldSize, baseCollective(coll)), ops, {1000, 4099},
                           worldSize, false);
    for (auto& spec : more) spec.pattern = Pattern::kRandom;
    cases.insert(cases.end(), more.begin(), more.end());
  }
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

INSTANTIATE_TEST_SUITE_P(Random, RandomTest,
                         ::testing::Combine(::testing::Values(2, 3, 5, 8, 16),
                                            ::testing::Values(DataType::kFloat32, DataType::kFloat64,
                                                              DataType::kFloat16, DataType::kBFloat16)),
                         [](const ::testing::TestParamInfo<RandomParam>& info) {
                           return "ws" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(toString(std::get<1>(info.param)));
                         });

// ---------------------------------------------------------------- Variants
class VariantsTest : public ::testing::TestWithParam<int> {};

TEST_P(VariantsTest, InPlace) {
  const int worldSize = GetParam();
  std::vector<CaseSpec> cases;
  const auto reduceAlgos = inProcessAlgorithms(worldSize, Collective::kAllreduce);
  for (auto [dtype, op] : {std::pair{DataType::kFloat32, ReduceOp::kSum}, std::pair{DataType::kInt32, ReduceOp::kProd},
                           std::pair{DataType::kBFloat16, ReduceOp::kAvg}, std::pair{DataType::kFloat64, ReduceOp::kMin}}) {
    auto more = sweepCases(TestCollective::kAllreduce, dtype, reduceAlgos, {op}, {0, 7, 1000, kMidCount}, worldSize, false);
    cases.insert(cases.end(), more.begin(), more.end());
  }
  auto gather = sweepCases(TestCollective::kAllgather, DataType::kFloat16,
                           inProcessAlgorithms(worldSize, Collective::kAllgather), {}, {0, 1, 1000}, worldSize, false);
  cases.insert(cases.end(), gather.begin(), gather.end());
  for (auto& spec : cases) spec.inPlace = true;
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

TEST_P(VariantsTest, AsyncWaitEachCollective) {
  const int worldSize = GetParam();
  std::vector<CaseSpec> cases;
  for (TestCollective coll : kAllTestCollectives) {
    const std::vector<std::size_t> counts{coll == TestCollective::kBarrier ? 0 : std::size_t{1000}};
    auto more = sweepCases(coll, DataType::kFloat32, inProcessAlgorithms(worldSize, baseCollective(coll)),
                           {ReduceOp::kSum, ReduceOp::kAvg}, counts, worldSize, false);
    cases.insert(cases.end(), more.begin(), more.end());
  }
  for (auto& spec : cases) spec.async = true;  // also checks Work::algorithm() == CallOptions::algorithm
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

// Several operations in flight at once, completed in reverse order.
TEST_P(VariantsTest, ManyInFlightThenWaitAll) {
  const int worldSize = GetParam();
  const std::size_t count = 1000;
  std::vector<std::string> failures;
  std::mutex mutex;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    const int rank = comm.rank();
    const auto n = static_cast<std::size_t>(worldSize);
    std::vector<float> sumIn(count), sumOut(count), maxOut(count), gatherOut(count * n), bcast(count);
    std::vector<std::int64_t> maxIn(count);
    std::vector<float> rsIn(count * n), rsOut(count);
    fillReduceInput(sumIn.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 11, rank, 0, count);
    fillReduceInput(maxIn.data(), DataType::kInt64, ReduceOp::kMax, Pattern::kExact, 12, rank, 0, count);
    fillReduceInput(rsIn.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 13, rank, 0, count * n);
    std::vector<float> gatherIn(count);
    fillBytes(gatherIn.data(), count * 4, 14, rank);
    fillBytes(bcast.data(), count * 4, rank == worldSize - 1 ? 15 : 99, rank);
    std::vector<std::int64_t> maxOut64(count);

    std::vector<Work> works;
    works.push_back(comm.allreduceAsync(std::span<const float>(sumIn), std::span<float>(sumOut), ReduceOp::kSum));
    works.push_back(comm.allgatherAsync(std::span<const float>(gatherIn), std::span<float>(gatherOut)));
    works.push_back(comm.allreduceAsync(std::span<const std::int64_t>(maxIn), std::span<std::int64_t>(maxOut64), ReduceOp::kMax));
    works.push_back(comm.broadcastAsync(std::span<float>(bcast), worldSize - 1));
    works.push_back(comm.reduceScatterAsync(std::span<const float>(rsIn), std::span<float>(rsOut), ReduceOp::kSum));
    works.push_back(comm.barrierAsync());
    for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();

    std::vector<std::string> errors;
    auto add = [&](const std::string& what, const std::string& error) {
      if (!error.empty()) errors.push_back("rank " + std::to_string(rank) + " " + what + ": " + error);
    };
    add("allreduce sum", checkReduction(sumOut.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 11, worldSize, 0, count));
    add("allreduce max int64", checkReduction(maxOut64.data(), DataType::kInt64, ReduceOp::kMax, Pattern::kExact, 12, worldSize, 0, count));
    add("reduce_scatter", checkReduction(rsOut.data(), DataType::kFloat32, ReduceOp::kSum, Pattern::kExact, 13, worldSize,
                                         static_cast<std::size_t>(rank) * count, count));
    std::vector<float> expected(count * n);
    for (int r = 0; r < worldSize; ++r) fillBytes(expected.data() + static_cast<std::size_t>(r) * count, count * 4, 14, r);
    add("allgather", compareBytes(gatherOut.data(), expected.data(), expected.size() * 4, 4));
    fillBytes(expected.data(), count * 4, 15, worldSize - 1);
    add("broadcast", compareBytes(bcast.data(), expected.data(), count * 4, 4));
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), errors.begin(), errors.end());
  });
  expectNoFailures(failures);
}

// Completion through a test() polling loop, with two operations polled together.
TEST_P(VariantsTest, TestPollingLoop) {
  const int worldSize = GetParam();
  const std::size_t count = 4099;
  std::vector<std::string> failures;
  std::mutex mutex;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    const int rank = comm.rank();
    std::vector<double> in(count), out(count);
    std::vector<std::uint8_t> in8(count), out8(count);
    fillReduceInput(in.data(), DataType::kFloat64, ReduceOp::kProd, Pattern::kExact, 21, rank, 0, count);
    fillReduceInput(in8.data(), DataType::kUInt8, ReduceOp::kSum, Pattern::kExact, 22, rank, 0, count);
    Work a = comm.allreduceAsync(std::span<const double>(in), std::span<double>(out), ReduceOp::kProd);
    Work b = comm.allreduceAsync(std::span<const std::uint8_t>(in8), std::span<std::uint8_t>(out8), ReduceOp::kSum);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool aDone = false, bDone = false;
    long polls = 0;
    while (!(aDone && bDone) && std::chrono::steady_clock::now() < deadline) {
      if (!aDone) aDone = a.test();
      if (!bDone) bDone = b.test();
      ++polls;
    }
    std::vector<std::string> errors;
    if (!(aDone && bDone)) errors.push_back("rank " + std::to_string(rank) + ": test() never reported completion");
    // test() after completion keeps returning true.
    if (aDone && !a.test()) errors.push_back("rank " + std::to_string(rank) + ": test() returned false after completion");
    std::string e1 = checkReduction(out.data(), DataType::kFloat64, ReduceOp::kProd, Pattern::kExact, 21, worldSize, 0, count);
    std::string e2 = checkReduction(out8.data(), DataType::kUInt8, ReduceOp::kSum, Pattern::kExact, 22, worldSize, 0, count);
    if (!e1.empty()) errors.push_back("rank " + std::to_string(rank) + " float64 prod: " + e1);
    if (!e2.empty()) errors.push_back("rank " + std::to_string(rank) + " uint8 sum: " + e2);
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), errors.begin(), errors.end());
  });
  expectNoFailures(failures);
}

// The same buffers across calls: new contents each time, alternating counts
// (a schedule cache keyed on the wrong fields would return stale results).
TEST_P(VariantsTest, BufferReuseAcrossCalls) {
  const int worldSize = GetParam();
  std::vector<std::string> failures;
  std::mutex mutex;
  const auto algorithms = withDefault(inProcessAlgorithms(worldSize, Collective::kAllreduce));
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    const int rank = comm.rank();
    std::vector<float> send(1000), recv(1000);
    std::vector<std::string> errors;
    std::uint64_t seed = 500;
    for (const auto& algorithm : algorithms) {
      CallOptions options;
      options.algorithm = algorithm;
      for (int iteration = 0; iteration < 6; ++iteration) {
        const std::size_t count = iteration % 3 == 2 ? 7 : 1000;
        const ReduceOp op = iteration % 2 == 0 ? ReduceOp::kSum : ReduceOp::kMax;
        ++seed;
        fillReduceInput(send.data(), DataType::kFloat32, op, Pattern::kExact, seed, rank, 0, count);
        comm.allreduce(ConstView(send.data(), count, DataType::kFloat32), View(recv.data(), count, DataType::kFloat32),
                       op, options);
        const std::string e = checkReduction(recv.data(), DataType::kFloat32, op, Pattern::kExact, seed, worldSize, 0, count);
        if (!e.empty()) {
          errors.push_back("rank " + std::to_string(rank) + " algo=" + (algorithm.empty() ? "<default>" : algorithm) +
                           " iteration " + std::to_string(iteration) + " count=" + std::to_string(count) + ": " + e);
        }
      }
    }
    std::lock_guard lock(mutex);
    failures.insert(failures.end(), errors.begin(), errors.end());
  });
  expectNoFailures(failures);
}

// Algorithm lists agree across ranks, name the default choice, and a
// CallOptions::algorithm is what actually runs.
TEST_P(VariantsTest, AlgorithmListsAndOverride) {
  const int worldSize = GetParam();
  auto group = detail::createInProcessGroup(worldSize);
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                          Collective::kReduceScatter, Collective::kBarrier}) {
    const auto names = group[0]->algorithms(coll);
    ASSERT_FALSE(names.empty()) << toString(coll);
    EXPECT_EQ(names.front(), "native") << toString(coll) << ": native must be listed first";
    for (int r = 1; r < worldSize; ++r) EXPECT_EQ(group[static_cast<std::size_t>(r)]->algorithms(coll), names) << "rank " << r;
    for (std::size_t bytes : {std::size_t{0}, std::size_t{4}, std::size_t{1} << 16, std::size_t{1} << 26}) {
      const std::string chosen = group[0]->selectedAlgorithm(coll, bytes);
      EXPECT_NE(std::find(names.begin(), names.end(), chosen), names.end())
          << toString(coll) << " bytes=" << bytes << ": selected '" << chosen << "' is not in algorithms()";
    }
  }
  group.clear();
  std::vector<CaseSpec> cases;
  for (const auto& name : inProcessAlgorithms(worldSize, Collective::kAllreduce)) {
    CaseSpec spec;
    spec.algorithm = name;
    spec.count = 1000;
    spec.async = true;  // runCase checks Work::algorithm() == name
    cases.push_back(spec);
  }
  expectNoFailures(runCasesInProcess(worldSize, cases));
}

INSTANTIATE_TEST_SUITE_P(Variants, VariantsTest, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return "ws" + std::to_string(info.param); });

}  // namespace
}  // namespace boostcomm::testing
