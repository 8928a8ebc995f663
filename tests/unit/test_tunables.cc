// The tunables registry (typed values: ranges, words, bad values rejected with
// the variable named; the cache and its invalidation) and the knobs that
// change collective behaviour: BOOSTCOMM_ALGO, BOOSTCOMM_SELECTION,
// BOOSTCOMM_TIMEOUT_MS, BOOSTCOMM_CHECK_CONSISTENCY, ring chunking (ctest label `unit`).
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
    if (t.type == core::TunableType::kInt) {
      EXPECT_LE(t.minValue, t.maxValue) << t.env;
    }
    if (t.type == core::TunableType::kEnum) {
      EXPECT_NE(std::string(t.words), "") << t.env;
    }
  }
  EXPECT_STREQ(core::kTunableAlgo, "BOOSTCOMM_ALGO");
}

// Every default parses under its own rule, and so does what the typed read
// returns for it (when the test's environment leaves the variable alone).
TEST_F(TunablesTest, EveryDefaultParsesUnderItsRule) {
  const auto all = core::allTunables();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const core::TunableInfo& t = all[i];
    EXPECT_NO_THROW(core::validateTunable(t, t.defaultValue)) << t.env << " default '" << t.defaultValue << "'";
    if (std::getenv(t.env) != nullptr) continue;
    const core::TunableKey key{i, t.env};
    switch (t.type) {
      case core::TunableType::kInt: EXPECT_EQ(std::to_string(core::tunableInt(key)), t.defaultValue) << t.env; break;
      case core::TunableType::kBool: EXPECT_EQ(core::tunableBool(key) ? "1" : "0", std::string(t.defaultValue)); break;
      case core::TunableType::kEnum: EXPECT_EQ(core::tunableEnum(key), t.defaultValue) << t.env; break;
      case core::TunableType::kString: EXPECT_EQ(core::tunableString(key), t.defaultValue) << t.env; break;
    }
  }
}

// The environment is read once; an override change invalidates every cached
// value, and the next read sees the override, then the environment again.
TEST_F(TunablesTest, OverrideBeatsEnvironmentBeatsDefault) {
  const core::TunableKey key = core::kTunableRingChunkBytes;
  ::unsetenv(key.env);
  core::clearTunableOverride(key);
  const std::int64_t defaultValue = core::tunableInt(key);
  ::setenv(key.env, "4096", 1);
  EXPECT_EQ(core::tunableInt(key), defaultValue) << "read again without an invalidation: the cached value";
  core::clearTunableOverride(key);
  EXPECT_EQ(core::tunableInt(key), 4096);
  EXPECT_TRUE(core::tunableIsSet(key));
  core::setTunableOverride(key, "8192");
  EXPECT_EQ(core::tunableInt(key), 8192);
  EXPECT_EQ(core::tunableInt(key), 8192);
  core::clearTunableOverride(key);
  EXPECT_EQ(core::tunableInt(key), 4096);
  ::unsetenv(key.env);
  core::clearTunableOverride(key);
  EXPECT_EQ(core::tunableInt(key), defaultValue);
  EXPECT_FALSE(core::tunableIsSet(key));
}

TEST_F(TunablesTest, TypedReadsOfEachKind) {
  core::setTunableOverride(core::kTunableCheckConsistency, "1");
  EXPECT_TRUE(core::tunableBool(core::kTunableCheckConsistency));
  core::setTunableOverride(core::kTunableCheckConsistency, "0");
  EXPECT_FALSE(core::tunableBool(core::kTunableCheckConsistency));
  core::setTunableOverride(core::kTunableOverlapBuffers, "single");
  EXPECT_EQ(core::tunableEnum(core::kTunableOverlapBuffers), "single");
  core::setTunableOverride(core::kTunableBucketBytes, "1099511627776");  // the top of the range
  EXPECT_EQ(core::tunableBytes(core::kTunableBucketBytes), std::size_t{1} << 40);
  core::setTunableOverride(core::kTunableTimeline, " any text, kept as is ");
  EXPECT_EQ(core::tunableString(core::kTunableTimeline), " any text, kept as is ");
  // Reading a tunable as another kind is a bug in the reader, not a user error.
  try {
    (void)core::tunableInt(core::kTunableOverlapBuffers);
    ADD_FAILURE() << "expected Error{kInternal}";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInternal) << e.what();
  }
}

// One bad value: Error{kInvalidArgument} on every read (errors are not
// cached), naming the variable, the text (cut short) and the rule.
void expectRejected(core::TunableKey key, const std::string& text) {
  const std::string shownText = text.size() > 40 ? std::string(text, 0, 40) : text;
  SCOPED_TRACE(std::string(key.env) + "='" + shownText + "' (" + std::to_string(text.size()) + " bytes)");
  core::setTunableOverride(key, text);
  const core::TunableInfo& info = core::allTunables()[key.index];
  for (int read = 0; read < 2; ++read) {
    try {
      switch (info.type) {
        case core::TunableType::kInt: (void)core::tunableInt(key); break;
        case core::TunableType::kBool: (void)core::tunableBool(key); break;
        case core::TunableType::kEnum: (void)core::tunableEnum(key); break;
        case core::TunableType::kString: (void)core::tunableString(key); break;
      }
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << message;
      EXPECT_NE(message.find(key.env), std::string::npos) << message;
      EXPECT_NE(message.find(core::tunableRule(info)), std::string::npos) << message;
      if (text.size() <= 16) {
        EXPECT_NE(message.find("'" + text + "'"), std::string::npos) << message;
      }
      EXPECT_LT(message.size(), 512u) << "the message must not carry the whole value";
    }
  }
  core::clearTunableOverride(key);
}

TEST_F(TunablesTest, BadValuesAreErrorsNamingTheVariableAndTheRule) {
  const std::string mebibyte(std::size_t{1} << 20, '7');
  // Integers: [1, 2^40] and [0, 2^31 - 1].
  for (const std::string text : {"", "abc", "-1", "0", "1e3", " 5 ", " 5", "5 ", "+5", "12kb", "0x10", "1099511627777",
                                 "99999999999999999999"}) {
    expectRejected(core::kTunableRingChunkBytes, text);
  }
  expectRejected(core::kTunableRingChunkBytes, mebibyte);
  for (const std::string text : {"2147483648", "-1", "abc"}) expectRejected(core::kTunableTimeoutMs, text);
  // Booleans.
  for (const std::string text : {"", "abc", "-1", "2", "1e3", " 1 ", "true", "01"}) {
    expectRejected(core::kTunableCheckConsistency, text);
  }
  expectRejected(core::kTunableShm, mebibyte);
  // Enums: exact words only.
  for (const std::string text : {"", "abc", "-1", " single ", "Single", "ping"}) {
    expectRejected(core::kTunableOverlapBuffers, text);
  }
  expectRejected(core::kTunableStrategy, std::string(std::size_t{1} << 20, 'a'));
  // After the override is cleared, the default is back.
  EXPECT_EQ(core::tunableInt(core::kTunableTimeoutMs), 600000);  // 10 min (docs/RELIABILITY.md)
}

TEST_F(TunablesTest, LongValueIsCutShortInTheMessage) {
  core::setTunableOverride(core::kTunableBucketBytes, std::string(std::size_t{1} << 20, '9'));
  try {
    (void)core::tunableBytes(core::kTunableBucketBytes);
    ADD_FAILURE() << "expected Error{kInvalidArgument}";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("(1048576 bytes)"), std::string::npos) << message;
    EXPECT_NE(message.find("BOOSTCOMM_BUCKET_BYTES"), std::string::npos) << message;
    EXPECT_NE(message.find("[1, 1099511627776]"), std::string::npos) << message;
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
    std::string rank0;  // rank 0's message: both sides in words
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
        if (comm.rank() == 0) rank0 = e.what();
      }
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r << " (expected kMismatch)";
    const std::string expected = field == "count"   ? "rank 0: allreduce float32 x4 sum, seq 0; rank 2: allreduce float32 x5 sum"
                                 : field == "dtype" ? "rank 0: allreduce float32 x4 sum, seq 0; rank 2: allreduce int32 x4 sum"
                                                    : "rank 0: broadcast float32 x4 root 0, seq 0; rank 2: broadcast float32 x4 root 1";
    EXPECT_NE(rank0.find(expected), std::string::npos) << rank0;
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
