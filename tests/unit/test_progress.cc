// The communicator's progress engine, seen from the public API:
// Work::onComplete (exactly once; at once on the caller's thread when already
// complete; with the error when the communicator fails; a callback may call
// the communicator again), the progress thread (Works complete and callbacks
// run with nobody calling test()/wait(); BOOSTCOMM_PROGRESS=thread|caller|auto),
// many concurrent collectives of mixed kinds on the thread with exact
// results, and several threads testing/waiting the same Works at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/tunable_override.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using namespace std::chrono_literals;

// Polls cond (sleeping, never driving progress) until it holds or the
// deadline passes; false on timeout.
bool pollUntil(const std::function<bool()>& cond, std::chrono::milliseconds deadline = 20s) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// BOOSTCOMM_PROGRESS for one scope.
struct ProgressOverride : testing::TunableOverride {
  explicit ProgressOverride(const char* mode) : TunableOverride(core::kTunableProgress, mode) {}
};

// Integer inputs: every sum is exact, so results compare with ==.
std::int64_t valueOf(int rank, std::size_t i) { return (rank + 1) * 1000003ll + static_cast<std::int64_t>(i) * 7; }
std::int64_t sumOf(int worldSize, std::size_t i) {
  std::int64_t s = 0;
  for (int r = 0; r < worldSize; ++r) s += valueOf(r, i);
  return s;
}

TEST(OnComplete, RunsExactlyOnceOnSuccess) {
  for (const int worldSize : {1, 2, 3}) {
    detail::runInProcess(worldSize, [](Communicator& comm) {
      std::vector<std::int64_t> a(1000), b(1000);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = valueOf(comm.rank(), i);
      std::atomic<int> calls{0};
      std::atomic<bool> hadError{false};
      Work w = comm.allreduceAsync(std::span<const std::int64_t>(a), std::span<std::int64_t>(b), ReduceOp::kSum);
      w.onComplete([&](std::exception_ptr e) {
        hadError = e != nullptr;
        ++calls;
      });
      w.wait();
      ASSERT_TRUE(pollUntil([&] { return calls.load() > 0; })) << "callback never ran";
      // More traffic and more tests must not run it again.
      comm.barrier();
      EXPECT_TRUE(w.test());
      comm.progress();
      std::this_thread::sleep_for(10ms);
      EXPECT_EQ(calls.load(), 1);
      EXPECT_FALSE(hadError.load());
      for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], sumOf(comm.size(), i)) << "element " << i;
    });
  }
}

TEST(OnComplete, AlreadyCompleteRunsAtOnceOnTheCallingThread) {
  detail::runInProcess(2, [](Communicator& comm) {
    std::int64_t x = comm.rank() + 1;
    Work w = comm.allreduceAsync(ConstView(&x, 1, DataType::kInt64), View(&x, 1, DataType::kInt64), ReduceOp::kSum);
    w.wait();
    int calls = 0;  // plain int: the callback must run on this thread, before onComplete returns
    std::thread::id where;
    std::exception_ptr error = std::make_exception_ptr(1);
    w.onComplete([&](std::exception_ptr e) {
      ++calls;
      where = std::this_thread::get_id();
      error = e;
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(where, std::this_thread::get_id());
    EXPECT_EQ(error, nullptr);
    EXPECT_EQ(x, 3);
  });
}

TEST(OnComplete, RunsWithTheErrorWhenTheCommunicatorTimesOut) {
  // Rank 1 never calls: rank 0's wait times out, which fails the
  // communicator and completes every pending Work with the error.
  auto group = detail::createInProcessGroup(2);
  std::vector<float> a(64, 1.0f), b(64);
  std::atomic<int> calls{0};
  std::exception_ptr error;
  Work w = group[0]->allreduceAsync(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum);
  Work pending = group[0]->barrierAsync();  // a second Work in flight, never waited on
  std::atomic<int> pendingCalls{0};
  std::exception_ptr pendingError;
  w.onComplete([&](std::exception_ptr e) {
    error = e;
    ++calls;
  });
  pending.onComplete([&](std::exception_ptr e) {
    pendingError = e;
    ++pendingCalls;
  });
  EXPECT_EQ(calls.load(), 0) << "ran before the collective could complete";
  EXPECT_THROW(w.wait(200ms), Error);
  ASSERT_TRUE(pollUntil([&] { return calls.load() > 0 && pendingCalls.load() > 0; }, 5s))
      << "callbacks did not run after the timeout: " << calls.load() << ", " << pendingCalls.load();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(pendingCalls.load(), 1);
  for (const std::exception_ptr& e : {error, pendingError}) {
    ASSERT_NE(e, nullptr);
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      EXPECT_EQ(err.category(), ErrorCategory::kTimeout) << err.what();
    }
  }
  // A callback registered after the failure runs at once, with the error.
  std::exception_ptr late;
  w.onComplete([&](std::exception_ptr e) { late = e; });
  EXPECT_NE(late, nullptr);
}

TEST(Finalize, DrainHasTheDefaultDeadline) {
  // Rank 1 never joins rank 0's allreduce: with BOOSTCOMM_TIMEOUT_MS, rank
  // 0's finalize() gives up after the deadline with kTimeout (and completes
  // the Work with it) instead of waiting forever.
  testing::TunableOverride timeout(core::kTunableTimeoutMs, "200");
  auto group = detail::createInProcessGroup(2);
  std::vector<float> a(64, 1.0f), b(64);
  Work w = group[0]->allreduceAsync(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum);
  std::atomic<int> calls{0};
  w.onComplete([&](std::exception_ptr e) { calls += e != nullptr ? 1 : 100; });
  const auto start = std::chrono::steady_clock::now();
  try {
    group[0]->finalize();
    ADD_FAILURE() << "finalize returned although a peer never joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("finalize"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(calls.load(), 1) << "the Work's callback must run once, with the error";
  EXPECT_TRUE(group[0]->finalized());
}

// One callback chains a second collective from inside the first's callback.
void chainFromCallback(Communicator& comm) {
  std::int64_t first = comm.rank() + 1;
  std::vector<std::int64_t> second(257);
  std::iota(second.begin(), second.end(), comm.rank() * 10);
  std::mutex mutex;
  Work chained;
  std::atomic<bool> chainedDone{false};
  std::exception_ptr chainedError;
  Work w = comm.allreduceAsync(ConstView(&first, 1, DataType::kInt64), View(&first, 1, DataType::kInt64), ReduceOp::kSum);
  w.onComplete([&](std::exception_ptr e) {
    ASSERT_EQ(e, nullptr);
    Work next = comm.allreduceAsync(std::span<const std::int64_t>(second), std::span<std::int64_t>(second), ReduceOp::kSum);
    next.onComplete([&](std::exception_ptr e2) {
      chainedError = e2;
      chainedDone = true;
    });
    std::lock_guard lock(mutex);
    chained = next;
  });
  w.wait();
  ASSERT_TRUE(pollUntil([&] {
    std::lock_guard lock(mutex);
    return chained.valid();
  })) << "the callback did not launch";
  Work next;
  {
    std::lock_guard lock(mutex);
    next = chained;
  }
  if (!comm.progressThread()) next.wait(20s);  // caller mode: somebody must drive it
  ASSERT_TRUE(pollUntil([&] { return chainedDone.load(); })) << "the chained collective never completed";
  EXPECT_EQ(chainedError, nullptr);
  std::int64_t want = 0;
  for (int r = 0; r < comm.size(); ++r) want += r + 1;
  EXPECT_EQ(first, want);
  for (std::size_t i = 0; i < second.size(); ++i) {
    std::int64_t s = 0;
    for (int r = 0; r < comm.size(); ++r) s += r * 10 + static_cast<std::int64_t>(i);
    ASSERT_EQ(second[i], s) << "element " << i;
  }
}

TEST(OnComplete, CallbackMayLaunchAnotherCollective) {
  for (const bool thread : {false, true}) {
    SCOPED_TRACE(thread ? "progress thread" : "caller progress");
    for (const int worldSize : {1, 2, 3}) {
      detail::runInProcess(worldSize, [&](Communicator& comm) {
        comm.setProgressThread(thread);
        chainFromCallback(comm);
      });
    }
  }
}

TEST(ProgressThread, CompletesWorkWithoutTestOrWait) {
  for (const int worldSize : {1, 2, 3}) {
    detail::runInProcess(worldSize, [](Communicator& comm) {
      comm.setProgressThread(true);
      EXPECT_TRUE(comm.progressThread());
      std::vector<std::int64_t> a(5000), b(5000);
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = valueOf(comm.rank(), i);
      std::atomic<bool> done{false};
      Work w = comm.allreduceAsync(std::span<const std::int64_t>(a), std::span<std::int64_t>(b), ReduceOp::kSum);
      w.onComplete([&](std::exception_ptr e) {
        EXPECT_EQ(e, nullptr);
        done = true;
      });
      ASSERT_TRUE(pollUntil([&] { return done.load(); })) << "rank " << comm.rank() << ": no completion in 20 s";
      for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], sumOf(comm.size(), i)) << "element " << i;
      comm.setProgressThread(false);
      EXPECT_FALSE(comm.progressThread());
    });
  }
}

TEST(ProgressThread, ModeFromTheEnvironment) {
  {
    const ProgressOverride mode("thread");
    detail::runInProcess(2, [](Communicator& comm) { EXPECT_TRUE(comm.progressThread()); });
  }
  {
    const ProgressOverride mode("caller");
    detail::runInProcess(2, [](Communicator& comm) {
      EXPECT_FALSE(comm.progressThread());
      comm.useProgressThread();
      EXPECT_FALSE(comm.progressThread()) << "useProgressThread started a thread under BOOSTCOMM_PROGRESS=caller";
    });
  }
  {
    const ProgressOverride mode("auto");
    detail::runInProcess(2, [](Communicator& comm) {
      EXPECT_FALSE(comm.progressThread());
      comm.useProgressThread();
      EXPECT_TRUE(comm.progressThread());
    });
  }
}

// Mixed collectives in flight at once on the progress thread, completed by
// callbacks only; every result is integer-exact.
void mixedConcurrent(Communicator& comm, int rounds) {
  const int n = comm.size();
  const int me = comm.rank();
  constexpr std::size_t kCount = 777;
  struct Op {
    std::vector<std::int64_t> send, recv;
    std::vector<std::size_t> counts;
    Work work;
  };
  std::vector<Op> ops(static_cast<std::size_t>(rounds) * 5);
  std::atomic<int> done{0};
  std::atomic<int> errors{0};
  auto track = [&](Work w) {
    w.onComplete([&](std::exception_ptr e) {
      if (e) ++errors;
      ++done;
    });
    return w;
  };
  for (int r = 0; r < rounds; ++r) {
    const std::size_t count = kCount + static_cast<std::size_t>(r);  // odd sizes, different per round
    Op& ar = ops[5 * r];
    ar.send.resize(count);
    ar.recv.resize(count);
    for (std::size_t i = 0; i < count; ++i) ar.send[i] = valueOf(me, i + r);
    ar.work = track(comm.allreduceAsync(std::span<const std::int64_t>(ar.send), std::span<std::int64_t>(ar.recv), ReduceOp::kSum));
    Op& ag = ops[5 * r + 1];
    ag.send.assign(count, me * 100 + r);
    ag.recv.resize(count * n);
    ag.work = track(comm.allgatherAsync(std::span<const std::int64_t>(ag.send), std::span<std::int64_t>(ag.recv)));
    Op& bc = ops[5 * r + 2];
    bc.send.assign(count, me == r % n ? 4242 + r : -1);
    bc.work = track(comm.broadcastAsync(std::span<std::int64_t>(bc.send), r % n));
    Op& rs = ops[5 * r + 3];
    rs.send.resize(count * n);
    for (std::size_t i = 0; i < rs.send.size(); ++i) rs.send[i] = valueOf(me, i);
    rs.recv.resize(count);
    rs.work = track(comm.reduceScatterAsync(std::span<const std::int64_t>(rs.send), std::span<std::int64_t>(rs.recv), ReduceOp::kSum));
    Op& agv = ops[5 * r + 4];
    for (int k = 0; k < n; ++k) agv.counts.push_back(static_cast<std::size_t>(k + r) % 4);  // includes 0
    agv.send.assign(agv.counts[me], me + 1);
    agv.recv.resize(std::accumulate(agv.counts.begin(), agv.counts.end(), std::size_t{0}));
    agv.work = track(comm.allgathervAsync(std::span<const std::int64_t>(agv.send), std::span<std::int64_t>(agv.recv), agv.counts));
  }
  ASSERT_TRUE(pollUntil([&] { return done.load() == static_cast<int>(ops.size()); }, 60s))
      << "rank " << me << ": " << done.load() << " of " << ops.size() << " completed";
  EXPECT_EQ(errors.load(), 0);
  for (int r = 0; r < rounds; ++r) {
    const std::size_t count = kCount + static_cast<std::size_t>(r);
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(ops[5 * r].recv[i], sumOf(n, i + r)) << "allreduce " << r;
    for (std::size_t i = 0; i < count * n; ++i)
      ASSERT_EQ(ops[5 * r + 1].recv[i], static_cast<std::int64_t>(i / count) * 100 + r) << "allgather " << r;
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(ops[5 * r + 2].send[i], 4242 + r) << "broadcast " << r;
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(ops[5 * r + 3].recv[i], sumOf(n, me * count + i)) << "reduce_scatter " << r;
    std::size_t at = 0;
    for (int k = 0; k < n; ++k)
      for (std::size_t j = 0; j < ops[5 * r + 4].counts[k]; ++j, ++at)
        ASSERT_EQ(ops[5 * r + 4].recv[at], k + 1) << "allgatherv " << r;
  }
}

TEST(ProgressThread, ManyConcurrentMixedCollectivesAreExact) {
  for (const int worldSize : {1, 2, 3, 5}) {
    SCOPED_TRACE("world size " + std::to_string(worldSize));
    detail::runInProcess(worldSize, [](Communicator& comm) {
      comm.setProgressThread(true);
      mixedConcurrent(comm, 8);
    });
  }
}

TEST(WorkThreadSafety, TwoTestersAndAWaiterOnTheSameWorks) {
  for (const bool thread : {false, true}) {
    SCOPED_TRACE(thread ? "progress thread" : "caller progress");
    detail::runInProcess(3, [&](Communicator& comm) {
      comm.setProgressThread(thread);
      for (int iter = 0; iter < 30; ++iter) {
        constexpr std::size_t kOps = 6;
        std::vector<std::vector<std::int64_t>> bufs(kOps);
        std::vector<Work> works;
        for (std::size_t k = 0; k < kOps; ++k) {
          bufs[k].resize(100 + 50 * k);
          for (std::size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = valueOf(comm.rank(), i + k);
          works.push_back(comm.allreduceAsync(std::span<const std::int64_t>(bufs[k]), std::span<std::int64_t>(bufs[k]),
                                              ReduceOp::kSum));
        }
        std::atomic<bool> stop{false};
        auto tester = [&] {
          while (!stop.load()) {
            bool all = true;
            for (Work w : works) all = w.test() && all;  // a copy: copies share one state
            if (all) break;
          }
        };
        std::thread t1(tester), t2(tester);
        for (Work& w : works) w.wait(20s);
        stop = true;
        t1.join();
        t2.join();
        for (std::size_t k = 0; k < kOps; ++k)
          for (std::size_t i = 0; i < bufs[k].size(); ++i) ASSERT_EQ(bufs[k][i], sumOf(comm.size(), i + k));
      }
    });
  }
}

}  // namespace
}  // namespace boostcomm
