// Call fingerprints, the call status ring (flight recorder) and the stall
// inspector's words, without MPI: statuses in ordinary memory stand in for
// the shared segment. The same code under mpirun: tests/faults.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "watch/stall_inspector.h"
#include "boostcomm/boostcomm.h"
#include "core/call_status.h"
#include "core/caller_stack.h"
#include "core/tunables.h"
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
  const std::uint64_t n = core::kFlightRingEntries + 36;
  for (std::uint64_t seq = 0; seq < n; ++seq) s.recordStart(seq, allreduce(seq));
  Fingerprint f;
  EXPECT_FALSE(s.read(10, f));  // overwritten
  ASSERT_TRUE(s.read(36, f));   // the oldest kept
  EXPECT_EQ(f.count, 36u);
  ASSERT_TRUE(s.read(n - 1, f));
  EXPECT_EQ(f.count, n - 1);
  EXPECT_FALSE(s.read(n, f));  // not started
  EXPECT_EQ(s.started.load(), n);
  s.recordEnd(n - 2);
  s.recordEnd(50);  // out of order: completed only grows
  EXPECT_EQ(s.completed.load(), n - 1);
  // Per entry: the end time of a completed call, none for one in flight.
  EXPECT_NE(s.endNs[(n - 2) % core::kFlightRingEntries].load(), 0u);
  EXPECT_EQ(s.endNs[(n - 1) % core::kFlightRingEntries].load(), 0u);
  EXPECT_NE(s.ring[(n - 1) % core::kFlightRingEntries].startNs.load(), 0u);
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
  p.a.recordStart(1, allreduce(5), "ring");
  const std::string j = p.inspector->flightJson();
  EXPECT_NE(j.find("{\"seq\": 0, \"call\": \"allreduce float32 x4 sum\", \"algorithm\": \"?\", \"state\": \"completed\", "
                   "\"start_ns\": "),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"seq\": 1, \"call\": \"allreduce float32 x5 sum\", \"algorithm\": \"ring\", \"state\": \"in "
                   "flight\", \"start_ns\": "),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"end_ns\": 0}"), std::string::npos) << j;  // seq 1 is in flight
  // The fatal-signal path writes the same JSON (with its reason) from a
  // static buffer to the path formatted beforehand.
  char dir[] = "/tmp/bc_flight_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  core::setTunableOverride("BOOSTCOMM_TRACE_DIR", dir);
  p.inspector->prepareSignalDump();
  core::clearTunableOverride("BOOSTCOMM_TRACE_DIR");
  static char buffer[1 << 16];
  p.inspector->dumpFlightFromSignal("fatal signal", buffer, sizeof buffer);
  const std::string path = std::string(dir) + "/rank-0.json";
  std::ifstream in(path);
  const std::string dumped((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(dumped.rfind("{\"reason\": \"fatal signal\", \"rank\": 0, ", 0), 0u) << dumped;
  EXPECT_NE(dumped.find("\"algorithm\": \"ring\", \"state\": \"in flight\""), std::string::npos) << dumped;
  std::remove(path.c_str());
  rmdir(dir);
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A later dump never replaces an earlier one (issue 39): dump k goes to
// rank-0.json, rank-0.2.json, ... up to kFlightDumpsKept files, the last of
// which then holds the latest; the fatal-signal path numbers on.
TEST(StallInspector, EachDumpIsANewFileUpToTheCap) {
  Pair p;
  p.a.recordStart(0, allreduce(4));  // rank 0 waits in seq 0; rank 1 has not started it
  char dir[] = "/tmp/bc_dumps_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string d = dir;
  core::setTunableOverride("BOOSTCOMM_TRACE_DIR", d);
  p.inspector->prepareSignalDump();
  EXPECT_EQ(p.inspector->dumpFlight("stall"), d + "/rank-0.json");
  p.b.recordStart(0, allreduce(4));  // now both have: the next dump says less
  EXPECT_EQ(p.inspector->dumpFlight("peer exited"), d + "/rank-0.2.json");
  const std::string first = readText(d + "/rank-0.json");
  EXPECT_EQ(first.rfind("{\"reason\": \"stall\", \"rank\": 0, \"pid\": ", 0), 0u) << first;
  EXPECT_NE(first.find("\"dump\": 1, \"started\": 1, \"completed\": 0"), std::string::npos) << first;
  EXPECT_NE(first.find("{\"rank\": 1, \"started\": 0, \"completed\": 0}"), std::string::npos) << first;
  const std::string second = readText(d + "/rank-0.2.json");
  EXPECT_EQ(second.rfind("{\"reason\": \"peer exited\", ", 0), 0u) << second;
  EXPECT_NE(second.find("\"dump\": 2, "), std::string::npos) << second;
  EXPECT_NE(second.find("{\"rank\": 1, \"started\": 1, \"completed\": 0}"), std::string::npos) << second;
  static char buffer[1 << 16];
  p.inspector->dumpFlightFromSignal("fatal signal", buffer, sizeof buffer);  // dump 3
  EXPECT_NE(readText(d + "/rank-0.3.json").find("\"reason\": \"fatal signal\", \"rank\": 0, "), std::string::npos);
  const std::uint64_t kept = detail::StallInspector::kFlightDumpsKept;
  for (std::uint64_t k = 4; k <= kept + 2; ++k) {
    const std::string reason = "dump " + std::to_string(k);
    EXPECT_EQ(p.inspector->dumpFlight(reason.c_str()), d + "/rank-0." + std::to_string(std::min(k, kept)) + ".json");
  }
  core::clearTunableOverride("BOOSTCOMM_TRACE_DIR");
  // The first dumps stay; the last file holds the latest, numbered as such.
  EXPECT_EQ(readText(d + "/rank-0.json"), first);
  EXPECT_EQ(readText(d + "/rank-0.2.json"), second);
  const std::string last = readText(d + "/rank-0." + std::to_string(kept) + ".json");
  EXPECT_NE(last.find("\"reason\": \"dump " + std::to_string(kept + 2) + "\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"dump\": " + std::to_string(kept + 2) + ", "), std::string::npos) << last;
  std::remove((d + "/rank-0.json").c_str());
  for (std::uint64_t k = 2; k <= kept; ++k) std::remove((d + "/rank-0." + std::to_string(k) + ".json").c_str());
  EXPECT_EQ(rmdir(dir), 0) << "files left beyond rank-0." << kept << ".json";
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
  EXPECT_NE(record.find("\"seq\": 2, \"call\": \"allreduce float32 x10 sum\", \"algorithm\": \""),
            std::string::npos)
      << record;
  EXPECT_NE(record.find("\"state\": \"completed\", \"start_ns\": "), std::string::npos) << record;
  EXPECT_NE(record.find("\"dumped_ns\": "), std::string::npos) << record;
  EXPECT_TRUE(timedOut);
}

// Callers' stacks (core/caller_stack.h, as the Python module gives them):
// the call made while this thread had a pending stack carries it in its
// entry ("python_stack", escaped JSON text); calls without one (C++
// callers, or after the pending stack was cleared) have no field.
TEST(Communicator, FlightRecordCarriesCallerStacksOnlyWhereGiven) {
  core::setCallerFormatter([](const core::CallerStack& s, std::vector<std::string>& out) {
    for (std::uint32_t i = 0; i < s.depth; ++i) out.push_back("f\"" + std::to_string(s.frames[i]));
  });
  auto group = detail::createInProcessGroup(2);
  std::vector<std::thread> threads;
  std::string record;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *group[static_cast<std::size_t>(r)];
      std::vector<float> v(10, 1.0f);
      c.allreduce(std::span<const float>(v), std::span<float>(v), ReduceOp::kSum);  // seq 0: no stack
      core::CallerStack& pending = core::pendingCallerStack();
      if (r == 0) {
        pending.depth = 2;
        pending.frames[0] = 7;
        pending.frames[1] = 9;
      }
      c.allreduce(std::span<const float>(v), std::span<float>(v), ReduceOp::kSum);  // seq 1: rank 0's stack
      pending.depth = 0;
      c.allreduce(std::span<const float>(v), std::span<float>(v), ReduceOp::kSum);  // seq 2: none again
      if (r == 0) record = c.flightRecord();
    });
  }
  for (auto& t : threads) t.join();
  core::setCallerFormatter(nullptr);
  const std::string stack = "\"python_stack\": [\"f\\\"7\", \"f\\\"9\"]";
  const std::size_t at = record.find(stack);
  ASSERT_NE(at, std::string::npos) << record;
  EXPECT_EQ(record.find("python_stack", at + stack.size()), std::string::npos) << record;
  EXPECT_EQ(record.find("\"python_stack\""), at) << record;
  EXPECT_LT(record.find("\"seq\": 1,"), at) << record;
  EXPECT_GT(record.find("\"seq\": 2,"), at) << record;
}

}  // namespace
}  // namespace boostcomm

namespace boostcomm {
namespace {

// abort() from another thread while rank 0 waits for a peer that never
// comes: the wait ends with kAborted, abort() returns fast, later calls
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
    if (e.category() == ErrorCategory::kAborted) waitError = e.what();
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
    EXPECT_EQ(e.category(), ErrorCategory::kAborted);
    EXPECT_NE(std::string(e.what()).find("abort"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace boostcomm

namespace boostcomm {
namespace {

core::CallHeader header(int rank, std::uint64_t seq, const Fingerprint& f, WireFormat wire = WireFormat::kOff) {
  core::CallHeader h;
  h.rank = rank;
  h.sequence = seq;
  h.word = f.word();
  h.count = f.count;
  h.wire = static_cast<std::uint32_t>(wire);
  return h;
}

TEST(CallHeader, ComparesAndNamesBothSides) {
  EXPECT_EQ(core::compareHeaders(header(0, 7, allreduce(1000)), header(1, 7, allreduce(1000))), "");
  EXPECT_EQ(core::compareHeaders(header(0, 7, allreduce(1000)), header(1, 7, allreduce(1001))),
            "collective mismatch: rank 0: allreduce float32 x1000 sum, seq 7; rank 1: allreduce float32 x1001 sum, "
            "seq 7");
  const std::string wire =
      core::compareHeaders(header(0, 3, allreduce(8)), header(2, 3, allreduce(8), WireFormat::kBf16));
  EXPECT_NE(wire.find("rank 0: allreduce float32 x8 sum wire off, seq 3; rank 2: allreduce float32 x8 sum wire bf16"),
            std::string::npos)
      << wire;
  core::CallHeader junk;
  junk.magic = 0;
  EXPECT_NE(core::compareHeaders(header(0, 1, allreduce(8)), junk).find("not a call header"), std::string::npos);
}

TEST(FixedWriter, TruncatesAndSaysSo) {
  char buffer[8];
  core::FixedWriter w(buffer, sizeof buffer);
  w.put("seq ").put(std::uint64_t{1234});
  EXPECT_EQ(std::string(buffer, w.size()), "seq 1234");
  EXPECT_FALSE(w.overflowed());
  w.put("x");
  EXPECT_TRUE(w.overflowed());
  EXPECT_EQ(w.size(), 8u);
}

// The fingerprint header of point-to-point schedules. In-process ranks share
// no call status (no shared-memory segment), so the header is the only
// check here: both ranks of a disagreeing pair must raise kMismatch naming
// both calls, for every way of disagreeing, instead of hanging (different
// message sizes) or returning a wrong result (op, or dtype of equal size).
struct Disagreement {
  const char* name;
  std::size_t count1;  // rank 1's count (rank 0: count0)
  DataType dtype1;
  ReduceOp op1;
  const char* rank1Words;  // how rank 1's call is described
  std::size_t count0 = 1000;
  const char* rank0Words = "allreduce float32 x1000 sum, seq 5";
};

TEST(FingerprintHeader, EveryRankOfAPointToPointScheduleReportsTheMismatch) {
  const Disagreement cases[] = {
      {"count+1", 1001, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x1001 sum"},
      {"count-1", 999, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x999 sum"},
      {"dtype", 1000, DataType::kFloat64, ReduceOp::kSum, "allreduce float64 x1000 sum"},
      {"dtype same size", 1000, DataType::kInt32, ReduceOp::kSum, "allreduce int32 x1000 sum"},
      {"op", 1000, DataType::kFloat32, ReduceOp::kMax, "allreduce float32 x1000 max"},
      // Across the inline header's limit (4056 bytes): rank 0's first message
      // (4056 bytes) carries its header inline, rank 1's (4060) does not.
      {"count+1 at the inline limit", 2029, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x2029 sum", 2028,
       "allreduce float32 x2028 sum, seq 5"},
      // Into the window skipped below vader's 256-byte inline send: rank 0's
      // first message (216 bytes) is inline, rank 1's (220) is not.
      {"count+1 at the skipped window", 110, DataType::kFloat32, ReduceOp::kSum, "allreduce float32 x110 sum", 108,
       "allreduce float32 x108 sum, seq 5"},
  };
  for (const char* algorithm : {"ring", "rhd"}) {
    for (const Disagreement& d : cases) {
      SCOPED_TRACE(std::string(algorithm) + " " + d.name);
      auto group = detail::createInProcessGroup(2);
      std::string what[2];
      ErrorCategory category[2] = {ErrorCategory::kInternal, ErrorCategory::kInternal};
      std::vector<std::thread> threads;
      for (int r = 0; r < 2; ++r) {
        threads.emplace_back([&, r] {
          Communicator& c = *group[static_cast<std::size_t>(r)];
          c.setTimeout(std::chrono::milliseconds(10000));  // a hang fails the test as kTimeout
          CallOptions options;
          options.algorithm = algorithm;
          const std::size_t count = r == 0 ? d.count0 : d.count1;
          const DataType dtype = r == 0 ? DataType::kFloat32 : d.dtype1;
          std::vector<char> buffer(count * dataTypeSize(dtype), 0);
          try {
            // Good calls first: the header must not disturb agreeing ranks.
            // They switch between two schedules and end with rank 0's
            // mismatching call itself, so rank 0 then reuses the header
            // plan its execution kept (executor.h) and must still notice.
            for (const std::size_t n : {std::size_t{333}, d.count0, std::size_t{333}, d.count0, d.count0}) {
              std::vector<float> ok(n, static_cast<float>(r + 1));
              c.allreduce(std::span<const float>(ok), std::span<float>(ok), ReduceOp::kSum, options);
              for (float v : ok) ASSERT_EQ(v, 3.0f);
            }
            c.allreduce(ConstView(buffer.data(), count, dtype), View(buffer.data(), count, dtype),
                        r == 0 ? ReduceOp::kSum : d.op1, options);
            what[r] = "returned normally";
          } catch (const Error& e) {
            category[r] = e.category();
            what[r] = e.what();
          }
        });
      }
      for (auto& t : threads) t.join();
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(category[r], ErrorCategory::kMismatch) << "rank " << r << ": " << what[r];
        // The rank that received no inline header can only name its own call.
        const std::string words0(d.rank0Words);
        if (what[r].find("not a call header") == std::string::npos) {
          EXPECT_NE(what[r].find(words0), std::string::npos) << what[r];
          EXPECT_NE(what[r].find(d.rank1Words), std::string::npos) << what[r];
        } else {
          EXPECT_NE(what[r].find(words0.substr(0, words0.find(", seq"))), std::string::npos) << what[r];
        }
      }
    }
  }
}

// Asynchronous work nobody waits for: the progress thread alone raises the
// deadline (Error{kTimeout}) and completes the Work with it.
TEST(ProgressThread, FailsAsyncWorkPastItsDeadlineWithoutAWaiter) {
  auto group = detail::createInProcessGroup(2);
  Communicator& c = *group[0];
  c.setTimeout(std::chrono::milliseconds(300));
  c.setProgressThread(true);
  std::vector<float> a(10, 1.0f);
  std::atomic<bool> done{false};
  std::string what;
  ErrorCategory category = ErrorCategory::kInternal;
  Work w = c.allreduceAsync(std::span<const float>(a), std::span<float>(a), ReduceOp::kSum);  // rank 1 never comes
  w.onComplete([&](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const Error& e) {
      category = e.category();
      what = e.what();
    }
    done.store(true);
  });
  const auto start = std::chrono::steady_clock::now();
  while (!done.load() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done.load()) << "the progress thread did not fail the operation";
  EXPECT_EQ(category, ErrorCategory::kTimeout) << what;
  EXPECT_NE(what.find("nobody was waiting"), std::string::npos) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(c.barrier(), Error);  // the communicator is unusable after the deadline
}

}  // namespace
}  // namespace boostcomm
