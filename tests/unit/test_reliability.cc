// Call fingerprints, the call status ring (flight recorder) and the stall
// inspector's words, without MPI: statuses in ordinary memory stand in for
// the shared segment. The same code under mpirun: tests/faults.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/stall_inspector.h"
#include "boostcomm/boostcomm.h"
#include "core/call_status.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using core::CallStatus;
using core::Fingerprint;

Fingerprint allreduce(std::uint64_t count) {
  return Fingerprint::of(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 3, count);
}

TEST(Fingerprint, DescribesInWordsAndIgnoresUnusedFields) {
  EXPECT_EQ(core::describe(allreduce(1000)), "allreduce float32 x1000 sum");
  const Fingerprint b = Fingerprint::of(Collective::kBroadcast, DataType::kFloat64, ReduceOp::kMax, 2, 7);
  EXPECT_EQ(core::describe(b), "broadcast float64 x7 root 2");
  EXPECT_EQ(core::describe(Fingerprint::of(Collective::kBarrier, DataType::kInt32, ReduceOp::kMin, 1, 9)), "barrier");
  // The root of an allreduce and the op of a broadcast take no part.
  EXPECT_EQ(allreduce(5), Fingerprint::of(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 5));
  EXPECT_EQ(b, Fingerprint::of(Collective::kBroadcast, DataType::kFloat64, ReduceOp::kSum, 2, 7));
  EXPECT_FALSE(allreduce(5) == allreduce(6));
  EXPECT_EQ(Fingerprint::fromWord(b.word(), b.count), b);
  EXPECT_EQ(core::describeMismatch(0, allreduce(1000), 1,
                                   Fingerprint::of(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 1000), 7),
            "collective mismatch: rank 0: allreduce float32 x1000 sum, seq 7; rank 1: broadcast float32 x1000 root 0, "
            "seq 7");
}

TEST(CallStatus, RingKeepsTheLastEntriesOnly) {
  CallStatus s;
  for (std::uint64_t seq = 0; seq < 100; ++seq) s.recordStart(seq, allreduce(seq));
  Fingerprint f;
  EXPECT_FALSE(s.read(10, f));  // overwritten (64 entries)
  ASSERT_TRUE(s.read(99, f));
  EXPECT_EQ(f.count, 99u);
  EXPECT_FALSE(s.read(100, f));  // not started
  EXPECT_EQ(s.started.load(), 100u);
  s.recordEnd(98);
  s.recordEnd(50);  // out of order: completed only grows
  EXPECT_EQ(s.completed.load(), 99u);
}

struct Pair {
  CallStatus a, b;
  std::unique_ptr<detail::StallInspector> inspector;  // rank 0's view
  Pair() { inspector = std::make_unique<detail::StallInspector>(0, &a, std::vector<CallStatus*>{&a, &b}, 0, 0); }
};

TEST(StallInspector, NamesTheMismatchAndBothSides) {
  Pair p;
  for (std::uint64_t seq = 0; seq < 7; ++seq) {
    p.a.recordStart(seq, allreduce(1000));
    p.b.recordStart(seq, allreduce(1000));
  }
  EXPECT_EQ(p.inspector->mismatch(0, 7), "");
  p.a.recordStart(7, allreduce(1000));
  p.b.recordStart(7, Fingerprint::of(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 1000));
  EXPECT_EQ(p.inspector->mismatch(0, 8),
            "collective mismatch: rank 0: allreduce float32 x1000 sum, seq 7; rank 1: broadcast float32 x1000 root 0, "
            "seq 7");
  // A waiting caller gets it as Error{kMismatch}.
  p.a.completed.store(7);
  try {
    p.inspector->check(std::chrono::milliseconds(5));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kMismatch);
    EXPECT_NE(std::string(e.what()).find("rank 1: broadcast float32 x1000 root 0, seq 7"), std::string::npos) << e.what();
  }
}

TEST(StallInspector, ReportNamesTheRankBehindAndItsLastCalls) {
  Pair p;
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    p.a.recordStart(seq, allreduce(8));
    p.a.recordEnd(seq);
    p.b.recordStart(seq, allreduce(8));
    p.b.recordEnd(seq);
  }
  p.a.recordStart(5, allreduce(8));  // rank 1 never starts seq 5
  const std::string r = p.inspector->report();
  EXPECT_NE(r.find("rank 0 waits in seq 5 (allreduce float32 x8 sum)"), std::string::npos) << r;
  EXPECT_NE(r.find("not reached by rank 1"), std::string::npos) << r;
  EXPECT_NE(r.find("last completed seq 4 (allreduce float32 x8 sum)"), std::string::npos) << r;
  // Without visible peers it says so instead of guessing.
  CallStatus alone;
  alone.recordStart(0, allreduce(8));
  detail::StallInspector solo(3, &alone, {}, 0, 0);
  EXPECT_NE(solo.report().find("not visible"), std::string::npos) << solo.report();
}

TEST(StallInspector, WatchdogPoisonsAfterAMismatchThatCompleted) {
  Pair p;
  p.a.recordStart(0, allreduce(10));
  p.a.recordEnd(0);
  p.b.recordStart(0, allreduce(11));  // a backend returned from mismatched counts
  p.b.recordEnd(0);
  p.inspector->tick(std::chrono::steady_clock::now());
  ASSERT_TRUE(p.inspector->poisoned());
  EXPECT_NE(p.inspector->poisonMessage().find("x10 sum, seq 0; rank 1: allreduce float32 x11 sum"), std::string::npos)
      << p.inspector->poisonMessage();
}

TEST(StallInspector, FlightRecordListsRecentCalls) {
  Pair p;
  p.a.recordStart(0, allreduce(4));
  p.a.recordEnd(0);
  p.a.recordStart(1, allreduce(5));
  const std::string j = p.inspector->flightJson();
  EXPECT_NE(j.find("{\"seq\": 0, \"call\": \"allreduce float32 x4 sum\", \"state\": \"completed\"}"), std::string::npos) << j;
  EXPECT_NE(j.find("{\"seq\": 1, \"call\": \"allreduce float32 x5 sum\", \"state\": \"started\"}"), std::string::npos) << j;
}

// The communicator records its calls: the flight record of an in-process
// rank after a few collectives, and setTimeout on a stuck call.
TEST(Communicator, FlightRecordAndPerCommunicatorTimeout) {
  auto group = detail::createInProcessGroup(2);
  std::vector<std::thread> threads;
  std::string record;
  bool timedOut = false;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *group[static_cast<std::size_t>(r)];
      std::vector<float> v(10, 1.0f);
      for (int i = 0; i < 3; ++i) c.allreduce(std::span<const float>(v), std::span<float>(v), ReduceOp::kSum);
      if (r == 0) {
        record = c.flightRecord();
        c.setTimeout(std::chrono::milliseconds(200));
        try {
          c.barrier();  // rank 1 never comes
        } catch (const Error& e) {
          timedOut = e.category() == ErrorCategory::kTimeout;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(record.find("\"seq\": 2, \"call\": \"allreduce float32 x10 sum\", \"state\": \"completed\""),
            std::string::npos)
      << record;
  EXPECT_TRUE(timedOut);
}

}  // namespace
}  // namespace boostcomm

namespace boostcomm {
namespace {

// abort() from another thread while rank 0 waits for a peer that never
// comes: the wait ends with kFinalized, abort() returns fast, later calls
// raise "used after abort()". A second Work nobody waits for completes too.
TEST(Communicator, AbortEndsWaitsAndLaterCalls) {
  auto group = detail::createInProcessGroup(2);
  Communicator& c = *group[0];
  std::vector<float> a(10, 1.0f), b(10, 1.0f);
  Work waited = c.allreduceAsync(std::span<const float>(a), std::span<float>(a), ReduceOp::kSum);
  Work idle = c.allreduceAsync(std::span<const float>(b), std::span<float>(b), ReduceOp::kSum);
  double abortSeconds = -1;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto t = std::chrono::steady_clock::now();
    c.abort();
    abortSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  });
  std::string waitError;
  try {
    waited.wait();
  } catch (const Error& e) {
    if (e.category() == ErrorCategory::kFinalized) waitError = e.what();
  }
  aborter.join();
  EXPECT_NE(waitError.find("aborted"), std::string::npos) << waitError;
  EXPECT_GE(abortSeconds, 0.0);
  EXPECT_LT(abortSeconds, 2.0);
  EXPECT_THROW(idle.wait(), Error);
  try {
    c.barrier();
    FAIL() << "no error after abort";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kFinalized);
    EXPECT_NE(std::string(e.what()).find("abort"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace boostcomm
