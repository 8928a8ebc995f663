// The tunables registry and the knobs that change collective behaviour:
// BOOSTCOMM_ALGO, BOOSTCOMM_SELECTION, BOOSTCOMM_TIMEOUT_MS,
// BOOSTCOMM_CHECK_CONSISTENCY, ring chunking (ctest label `unit`).
// Overrides go through core::setTunableOverride, the documented test hook;
// every test clears them on exit. A communicator reads the knobs when it is
// created, so tests create groups after setting them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/collective_case.h"
#include "common/inproc_harness.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using testing::inProcessAlgorithms;

class TunablesTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const auto& t : core::allTunables()) core::clearTunableOverride(t.env);
  }
};

// A non-native algorithm of coll at worldSize, or "" when there is none.
std::string someNonNative(int worldSize, Collective coll) {
  for (const auto& name : inProcessAlgorithms(worldSize, coll)) {
    if (name != "native") return name;
  }
  return {};
}

// Algorithm that each rank's default-option allreduceAsync ran (checked equal
// across ranks) and whether the result was right.
std::string runDefaultAllreduce(int worldSize, const CallOptions& options = {}) {
  std::vector<std::string> used(static_cast<std::size_t>(worldSize));
  std::vector<std::string> errors(static_cast<std::size_t>(worldSize));
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    std::vector<float> in(1000), out(1000);
    testing::fillReduceInput(in.data(), DataType::kFloat32, ReduceOp::kSum, testing::Pattern::kExact, 3, comm.rank(), 0, 1000);
    Work work = comm.allreduceAsync(std::span<const float>(in), std::span<float>(out), ReduceOp::kSum, options);
    work.wait();
    used[static_cast<std::size_t>(comm.rank())] = work.algorithm();
    errors[static_cast<std::size_t>(comm.rank())] = testing::checkReduction(
        out.data(), DataType::kFloat32, ReduceOp::kSum, testing::Pattern::kExact, 3, worldSize, 0, 1000);
  });
  for (int r = 0; r < worldSize; ++r) {
    EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(used[static_cast<std::size_t>(r)], used[0]) << "rank " << r << " ran a different algorithm";
  }
  return used[0];
}

TEST_F(TunablesTest, RegistryIsWellFormed) {
  const auto all = core::allTunables();
  ASSERT_FALSE(all.empty());
  std::set<std::string> envs;
  for (const auto& t : all) {
    EXPECT_EQ(std::string(t.env).rfind("BOOSTCOMM_", 0), 0u) << t.env;
    EXPECT_TRUE(envs.insert(t.env).second) << "duplicate " << t.env;
    EXPECT_GT(std::string(t.doc).size(), 10u) << t.env << " needs documentation";
    if (t.type == core::TunableType::kInt && std::getenv(t.env) == nullptr) {
      EXPECT_NO_THROW(core::tunableInt(t.env)) << t.env << " default '" << t.defaultValue << "' is not an integer";
    }
  }
  EXPECT_STREQ(core::kTunableAlgo, "BOOSTCOMM_ALGO");
}

TEST_F(TunablesTest, OverrideBeatsEnvironmentBeatsDefault) {
  const char* env = core::kTunableRingChunkBytes;
  ::unsetenv(env);
  const std::string defaultValue = core::tunableValue(env);
  ::setenv(env, "4096", 1);
  EXPECT_EQ(core::tunableInt(env), 4096);
  core::setTunableOverride(env, "8192");
  EXPECT_EQ(core::tunableInt(env), 8192);
  core::clearTunableOverride(env);
  EXPECT_EQ(core::tunableInt(env), 4096);
  ::unsetenv(env);
  EXPECT_EQ(core::tunableValue(env), defaultValue);
}

TEST_F(TunablesTest, NonIntegerValueIsRejectedWithItsName) {
  core::setTunableOverride(core::kTunableRingChunkBytes, "12kb");
  try {
    (void)core::tunableInt(core::kTunableRingChunkBytes);
    ADD_FAILURE() << "expected Error{kInvalidArgument}";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("BOOSTCOMM_RING_CHUNK_BYTES"), std::string::npos) << e.what();
  }
}

TEST_F(TunablesTest, AlgoOverridePerCollective) {
  for (int ws : {2, 3, 4}) {
    SCOPED_TRACE("ws=" + std::to_string(ws));
    const auto names = inProcessAlgorithms(ws, Collective::kAllreduce);
    for (const auto& name : names) {
      SCOPED_TRACE("BOOSTCOMM_ALGO=allreduce:" + name);
      core::setTunableOverride(core::kTunableAlgo, "allreduce:" + name);
      auto group = detail::createInProcessGroup(ws);
      for (std::size_t bytes : {std::size_t{4}, std::size_t{1} << 20, std::size_t{1} << 26}) {
        EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, bytes), name) << "bytes=" << bytes;
      }
      group.clear();
      EXPECT_EQ(runDefaultAllreduce(ws), name);
      // CallOptions::algorithm beats the environment.
      CallOptions options;
      options.algorithm = "native";
      EXPECT_EQ(runDefaultAllreduce(ws, options), "native");
    }
  }
}

TEST_F(TunablesTest, BareAlgoNameAppliesWhereAvailable) {
  const int ws = 4;
  const std::string name = someNonNative(ws, Collective::kAllreduce);
  if (name.empty()) GTEST_SKIP() << "allreduce has no algorithm besides native";
  core::setTunableOverride(core::kTunableAlgo, name);
  auto group = detail::createInProcessGroup(ws);
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                          Collective::kReduceScatter, Collective::kBarrier}) {
    const auto names = group[0]->algorithms(coll);
    const std::string chosen = group[0]->selectedAlgorithm(coll, 1 << 20);
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      EXPECT_EQ(chosen, name) << toString(coll);
    } else {
      EXPECT_NE(std::find(names.begin(), names.end(), chosen), names.end())
          << toString(coll) << " lacks '" << name << "' and must keep a valid choice, got '" << chosen << "'";
    }
  }
}

TEST_F(TunablesTest, ClearingTheOverrideRestoresTheTable) {
  const int ws = 4;
  auto group = detail::createInProcessGroup(ws);
  const std::string before = group[0]->selectedAlgorithm(Collective::kAllreduce, 1 << 20);
  const std::string name = someNonNative(ws, Collective::kAllreduce);
  if (name.empty()) GTEST_SKIP();
  const std::string other = before == name ? "native" : name;
  // Communicators read the knobs when they are created.
  core::setTunableOverride(core::kTunableAlgo, "allreduce:" + other);
  group = detail::createInProcessGroup(ws);
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, 1 << 20), other);
  core::clearTunableOverride(core::kTunableAlgo);
  group = detail::createInProcessGroup(ws);
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, 1 << 20), before);
}

// Rejected either when the communicator is created or at the first call that
// reads it; either way with kInvalidArgument naming the variable, the bad
// name and the valid ones.
TEST_F(TunablesTest, UnknownAlgoInEnvironmentIsReported) {
  core::setTunableOverride(core::kTunableAlgo, "allreduce:no_such_algo");
  std::vector<std::string> whats;
  std::mutex mutex;
  try {
    detail::runInProcess(2, [&](Communicator& comm) {
      std::vector<float> a(4, 1.0f), b(4);
      try {
        comm.allreduce(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum);
      } catch (const Error& e) {
        EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
        std::lock_guard lock(mutex);
        whats.push_back(e.what());
      }
    });
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    whats.push_back(e.what());
  }
  ASSERT_FALSE(whats.empty()) << "BOOSTCOMM_ALGO=allreduce:no_such_algo was accepted";
  for (const auto& what : whats) {
    for (const char* word : {"no_such_algo", "BOOSTCOMM_ALGO", "ring", "native"}) {
      EXPECT_NE(what.find(word), std::string::npos) << "message should mention '" << word << "': " << what;
    }
  }
}

TEST_F(TunablesTest, SelectionTableByteRanges) {
  const int ws = 4;
  const std::string name = someNonNative(ws, Collective::kAllreduce);
  if (name.empty()) GTEST_SKIP();
  core::setTunableOverride(core::kTunableSelectionTable, "allreduce:0-65535=native;65536-=" + name);
  auto group = detail::createInProcessGroup(ws);
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, 4), "native");
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, 65535), "native");
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, 65536), name);
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, std::size_t{1} << 30), name);
  // BOOSTCOMM_ALGO beats the table.
  core::setTunableOverride(core::kTunableAlgo, "allreduce:native");
  group = detail::createInProcessGroup(ws);
  EXPECT_EQ(group[0]->selectedAlgorithm(Collective::kAllreduce, std::size_t{1} << 30), "native");
}

TEST_F(TunablesTest, TimeoutFromEnvironment) {
  core::setTunableOverride(core::kTunableTimeoutMs, "200");
  auto group = detail::createInProcessGroup(3);
  std::vector<float> a(16, 1.0f), b(16);
  try {
    group[1]->allreduce(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum);
    ADD_FAILURE() << "a lone rank's allreduce returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kTimeout) << e.what();
    EXPECT_EQ(e.rank(), 1) << e.what();
  }
}

// With the consistency check on, ranks that disagree get kMismatch, not a hang.
TEST_F(TunablesTest, ConsistencyCheckReportsMismatch) {
  core::setTunableOverride(core::kTunableCheckConsistency, "1");
  core::setTunableOverride(core::kTunableTimeoutMs, "10000");  // a missing check fails instead of hanging
  for (const char* what : {"count", "dtype", "root"}) {
    SCOPED_TRACE(what);
    const std::string field = what;
    std::vector<std::string> errors(3);
    detail::runInProcess(3, [&](Communicator& comm) {
      const bool odd = comm.rank() == 2;
      std::vector<float> a(8, 1.0f), b(8);
      try {
        if (field == "count") {
          comm.allreduce(ConstView(a.data(), odd ? 5 : 4, DataType::kFloat32), View(b.data(), odd ? 5 : 4, DataType::kFloat32),
                         ReduceOp::kSum);
        } else if (field == "dtype") {
          const DataType t = odd ? DataType::kInt32 : DataType::kFloat32;
          comm.allreduce(ConstView(a.data(), 4, t), View(b.data(), 4, t), ReduceOp::kSum);
        } else {
          comm.broadcast(View(b.data(), 4, DataType::kFloat32), odd ? 1 : 0);
        }
        errors[static_cast<std::size_t>(comm.rank())] = "no error";
      } catch (const Error& e) {
        if (e.category() != ErrorCategory::kMismatch) errors[static_cast<std::size_t>(comm.rank())] = e.what();
      }
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r << " (expected kMismatch)";
  }
}

// Tiny chunks force many pipeline steps per ring segment (and the chunk cap);
// results must not change. The schedule cache is off to rebuild every time.
TEST_F(TunablesTest, RingChunkingKeepsResults) {
  core::setTunableOverride(core::kTunableRingChunkBytes, "64");
  core::setTunableOverride(core::kTunableMaxChunksPerSegment, "5");
  core::setTunableOverride(core::kTunableScheduleCacheSize, "0");
  for (int ws : {2, 3, 5}) {
    std::vector<testing::CaseSpec> cases;
    for (auto coll : {testing::TestCollective::kAllreduce, testing::TestCollective::kReduceScatter,
                      testing::TestCollective::kAllgather, testing::TestCollective::kBroadcast}) {
      auto more = testing::sweepCases(coll, DataType::kBFloat16, inProcessAlgorithms(ws, testing::baseCollective(coll)),
                                      {ReduceOp::kSum, ReduceOp::kMax}, {7, 1000, 4099}, ws, false);
      cases.insert(cases.end(), more.begin(), more.end());
    }
    const auto failures = testing::runCasesInProcess(ws, cases);
    EXPECT_TRUE(failures.empty()) << "ws=" << ws << " " << testing::formatFailures(failures);
  }
}

}  // namespace
}  // namespace boostcomm
