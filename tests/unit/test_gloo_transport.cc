// The store-rendezvous transport (transport/gloo/): ranks as threads of one
// process, each with its own Gloo TCP device on 127.0.0.1, rendezvousing
// through an in-memory KeyValueStore. Native collectives (Gloo's own) against
// the exact reference shared with the other transports' tests, point-to-point
// with pieces and empty messages, split, and boostcomm's algorithms (ring,
// rhd, binomial, shm ...) running on it through a Communicator, world sizes
// 1-4. The POSIX segment and shm / hier on this transport: test_store_shm.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/store.h"
#include "common/store_threads.h"
#include "common/transport_checks.h"
#include "executor/executor.h"
#include "executor/schedule.h"
#include "transport/gloo/gloo_transport.h"
#include "transport/pending_messages.h"

namespace boostcomm::transport {
namespace {

using namespace std::chrono_literals;

using testing::MemoryStore;
using testing::onThreads;

std::vector<std::unique_ptr<GlooTransport>> makeTransports(int n) { return testing::makeGlooTransports(n); }

TEST(GlooTransport, NativeReductionsEveryDtypeAndOp) {
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                             DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};
  for (int n : {1, 2, 3}) {
    auto ts = makeTransports(n);
    onThreads(n, [&](int r) {
      std::uint64_t seed = 1;
      for (DataType dt : dtypes) {
        for (ReduceOp op : ops) {
          for (std::size_t count : {0, 1, 7, 1000}) {
            for (bool nonBlocking : {false, true}) {
              // In place every other pair of cases: each of blocking and
              // nonblocking meets both.
              const std::uint64_t caseSeed = seed++;
              testing::checkNativeReductions(*ts[static_cast<std::size_t>(r)], dt, op, count, caseSeed, nonBlocking,
                                             /*inPlace=*/((caseSeed >> 1) & 1) != 0, /*expectPending=*/false);
            }
          }
        }
      }
    });
    EXPECT_FALSE(::testing::Test::HasFailure()) << "world size " << n;
  }
}

TEST(GlooTransport, PointToPointPiecesAndEmptyMessages) {
  const int n = 3;
  auto ts = makeTransports(n);
  onThreads(n, [&](int r) {
    Transport& t = *ts[static_cast<std::size_t>(r)];
    const int right = (r + 1) % n;
    const int left = (r + n - 1) % n;
    for (std::size_t bytes : {0, 1, 13, 100000}) {
      std::vector<char> out(bytes), in(bytes, 0);
      for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(r * 31 + i);
      // Sent whole, received in three pieces (and the reverse on tag 2).
      Request s, q;
      t.isend(out.data(), bytes, right, 1, s);
      const std::size_t a = bytes / 3, b = bytes / 2;
      core::Piece pieces[3] = {{in.data(), a}, {in.data() + a, b - a}, {in.data() + b, bytes - b}};
      t.irecvPieces(pieces, 3, left, 1, q);
      testing::waitFor(t, s);
      testing::waitFor(t, q);
      for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(in[i], static_cast<char>(left * 31 + i)) << bytes;
      std::fill(in.begin(), in.end(), 0);
      core::Piece outPieces[2] = {{out.data(), a}, {out.data() + a, bytes - a}};
      t.isendPieces(outPieces, 2, right, 2, s);
      t.irecv(in.data(), bytes, left, 2, q);
      testing::waitFor(t, q);
      testing::waitFor(t, s);
      for (std::size_t i = 0; i < bytes; ++i) ASSERT_EQ(in[i], static_cast<char>(left * 31 + i)) << bytes;
    }
    // Same peer and tag, several messages in flight: matched in posting order.
    std::vector<int> sent(8), got(8, -1);
    std::vector<Request> rs(8), rr(8);
    for (int i = 0; i < 8; ++i) {
      sent[static_cast<std::size_t>(i)] = r * 100 + i;
      t.isend(&sent[static_cast<std::size_t>(i)], sizeof(int), right, 5, rs[static_cast<std::size_t>(i)]);
    }
    for (int i = 0; i < 8; ++i) t.irecv(&got[static_cast<std::size_t>(i)], sizeof(int), left, 5, rr[static_cast<std::size_t>(i)]);
    for (int i = 0; i < 8; ++i) {
      testing::waitFor(t, rs[static_cast<std::size_t>(i)]);
      testing::waitFor(t, rr[static_cast<std::size_t>(i)]);
      EXPECT_EQ(got[static_cast<std::size_t>(i)], left * 100 + i);
    }
  });
}

TEST(GlooTransport, SplitAndNodeIds) {
  const int n = 4;
  auto ts = makeTransports(n);
  onThreads(n, [&](int r) {
    Transport& t = *ts[static_cast<std::size_t>(r)];
    // Threads of one process: one node.
    EXPECT_EQ(t.nodeIdOfEachRank(), std::vector<long long>(n, 0));
    // Even and odd ranks, ordered by descending rank; rank 3 opts out.
    auto sub = t.split(r == 3 ? -1 : r % 2, -r);
    if (r == 3) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    const int expectSize = r % 2 == 0 ? 2 : 1;
    EXPECT_EQ(sub->size(), expectSize);
    EXPECT_EQ(sub->rank(), r == 0 ? 1 : 0);
    std::int64_t v = r + 1;
    sub->nativeAllreduce(&v, &v, 1, DataType::kInt64, ReduceOp::kSum, nullptr);
    EXPECT_EQ(v, r % 2 == 0 ? 1 + 3 : 2);
  });
}

// boostcomm's own schedules on the store transport, as a Communicator.
TEST(GlooTransport, CommunicatorAlgorithmsMatchFloat64Reference) {
  for (int n : {1, 2, 3, 4}) {
    auto store = std::make_shared<MemoryStore>();
    onThreads(n, [&](int r) {
      auto comm = Communicator::createFromStore(store, r, n, 30s);
      for (std::size_t count : {0, 1, 7, 1000, 65537}) {
        for (const char* algo : {"native", "ring", "rhd", "rd", "shm", ""}) {
          std::vector<float> x(count);
          for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i * 7 + r * 3) % 11);
          CallOptions o;
          o.algorithm = algo;
          comm->allreduce(View(x.data(), count, DataType::kFloat32), View(x.data(), count, DataType::kFloat32),
                          ReduceOp::kSum, o);
          for (std::size_t i = 0; i < count; ++i) {
            double ref = 0;
            for (int q = 0; q < n; ++q) ref += static_cast<double>((i * 7 + q * 3) % 11);
            ASSERT_EQ(static_cast<double>(x[i]), ref) << "allreduce " << algo << " n " << n << " count " << count;
          }
        }
        for (const char* algo : {"native", "ring", "rd", "shm", ""}) {
          if (std::string(algo) == "rd" && (n & (n - 1)) != 0) continue;  // power-of-two ranks only
          std::vector<double> mine(count), all(count * static_cast<std::size_t>(n));
          for (std::size_t i = 0; i < count; ++i) mine[i] = static_cast<double>(r * 1000 + i);
          CallOptions o;
          o.algorithm = algo;
          comm->allgather(ConstView(mine.data(), count, DataType::kFloat64),
                          View(all.data(), all.size(), DataType::kFloat64), o);
          for (int q = 0; q < n; ++q) {
            for (std::size_t i = 0; i < count; ++i) {
              ASSERT_EQ(all[static_cast<std::size_t>(q) * count + i], static_cast<double>(q * 1000 + i))
                  << "allgather " << algo;
            }
          }
        }
        for (const char* algo : {"native", "binomial", "shm", ""}) {
          for (int root = 0; root < n; ++root) {
            std::vector<std::int32_t> b(count, r == root ? root + 5 : -1);
            CallOptions o;
            o.algorithm = algo;
            comm->broadcast(View(b.data(), count, DataType::kInt32), root, o);
            for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], root + 5) << "broadcast " << algo;
          }
        }
        for (const char* algo : {"native", "ring", "shm", ""}) {
          std::vector<double> send(count * static_cast<std::size_t>(n)), recv(count);
          for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<double>(i + r);
          CallOptions o;
          o.algorithm = algo;
          comm->reduceScatter(ConstView(send.data(), send.size(), DataType::kFloat64),
                              View(recv.data(), count, DataType::kFloat64), ReduceOp::kSum, o);
          for (std::size_t i = 0; i < count; ++i) {
            const double idx = static_cast<double>(static_cast<std::size_t>(r) * count + i);
            ASSERT_EQ(recv[i], n * idx + n * (n - 1) / 2.0) << "reduce_scatter " << algo;
          }
        }
      }
      comm->barrier();
      comm->finalize();
    });
  }
}

// Receives posted back to back must each be watched at once: rank 0 posts k
// receives and needs the last one's completion before it sends the message
// that lets rank 1 send the others. A waiter pool that left a posted
// message queued behind a thread blocked on an earlier one (the 2 x 2
// torchrun hang: every ring's next step waited on a completion nobody
// observed) never sees it. The deadline turns that hang into a failure; the
// protocol then goes on so both ranks finish either way.
TEST(GlooTransport, EveryPostedMessageIsWatchedAtOnce) {
  auto ts = makeTransports(2);
  onThreads(2, [&](int r) {
    Transport& t = *ts[static_cast<std::size_t>(r)];
    for (int k = 2; k <= 6; ++k) {
      const int base = 100 * k;
      std::vector<int> in(static_cast<std::size_t>(k), -1);
      int go = 0;
      if (r == 0) {
        std::vector<Request> recvs(static_cast<std::size_t>(k));
        for (int i = 0; i < k; ++i) t.irecv(&in[static_cast<std::size_t>(i)], sizeof(int), 1, base + i, recvs[static_cast<std::size_t>(i)]);
        Request& last = recvs.back();
        // Inside the transport's 30 s timeout: a Gloo wait that reached it
        // would close every pair of the context and fail the later rounds
        // for another reason.
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        bool seen = false;
        while (!(seen = t.test(last)) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        EXPECT_TRUE(seen) << k << " receives posted back to back: the last one's completion was never observed";
        Request s;
        t.isend(&go, sizeof go, 1, base + k, s);
        testing::waitFor(t, s);
        for (Request& q : recvs) testing::waitFor(t, q);
        for (int i = 0; i < k; ++i) EXPECT_EQ(in[static_cast<std::size_t>(i)], base + i) << k;
      } else {
        std::vector<int> out(static_cast<std::size_t>(k));
        std::iota(out.begin(), out.end(), base);
        Request s, q;
        t.isend(&out.back(), sizeof(int), 0, base + k - 1, s);
        t.irecv(&go, sizeof go, 0, base + k, q);
        testing::waitFor(t, q);
        testing::waitFor(t, s);
        std::vector<Request> sends(static_cast<std::size_t>(k - 1));
        for (int i = 0; i + 1 < k; ++i) t.isend(&out[static_cast<std::size_t>(i)], sizeof(int), 0, base + i, sends[static_cast<std::size_t>(i)]);
        for (Request& x : sends) testing::waitFor(t, x);
      }
    }
  });
}

// A progress thread may sleep until a completion (Transport::signalCompletions):
// each message and native collective calls the signal after it completed
// (test() then sees it done without polling first), and a cleared signal is
// no longer called.
TEST(GlooTransport, CompletionsAreSignalledUntilCleared) {
  auto ts = makeTransports(2);
  std::mutex m;
  std::condition_variable cv;
  int signals = 0;
  ASSERT_TRUE(ts[0]->signalCompletions([&] {
    {
      std::lock_guard<std::mutex> lock(m);
      ++signals;
    }
    cv.notify_all();
  }));
  auto awaitSignals = [&](int atLeast) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, 10s, [&] { return signals >= atLeast; });
  };
  int in = -1, out = 42;
  onThreads(2, [&](int r) {
    Transport& t = *ts[static_cast<std::size_t>(r)];
    Request q;
    if (r == 0) {
      t.irecv(&in, sizeof in, 1, 7, q);
      ASSERT_TRUE(awaitSignals(1)) << "the receive's completion was not signalled";
      EXPECT_TRUE(t.test(q)) << "signalled before it was done";
      EXPECT_EQ(in, 42);
    } else {
      t.isend(&out, sizeof out, 0, 7, q);
      testing::waitFor(t, q);
    }
    Request b;
    t.nativeBarrier(&b);
    if (r == 0) {
      ASSERT_TRUE(awaitSignals(2)) << "the native barrier's completion was not signalled";
      EXPECT_TRUE(t.test(b));
    } else {
      testing::waitFor(t, b);
    }
  });
  ASSERT_TRUE(ts[0]->signalCompletions({}));
  int before = 0;
  {
    std::lock_guard<std::mutex> lock(m);
    before = signals;
  }
  onThreads(2, [&](int r) {
    Transport& t = *ts[static_cast<std::size_t>(r)];
    Request q;
    if (r == 0) {
      t.irecv(&in, sizeof in, 1, 8, q);
    } else {
      t.isend(&out, sizeof out, 0, 8, q);
    }
    testing::waitFor(t, q);
  });
  std::lock_guard<std::mutex> lock(m);
  EXPECT_EQ(signals, before);
}

// Which waits the progress thread may sleep through until a signal
// (Execution::sleepsUntilWoken): a receive in flight on a split (a
// hierarchical level) waits on signals only where that split signals to the
// engine; the world's signals alone do not wake it. Deterministic: rank 1
// sends only after rank 0 has looked at its running receive.
TEST(GlooTransport, AReceiveOnASplitWaitsOnThatSplitsSignalsOnly) {
  auto ts = makeTransports(2);
  std::vector<std::unique_ptr<Transport>> subs(2);
  onThreads(2, [&](int r) { subs[static_cast<std::size_t>(r)] = ts[static_cast<std::size_t>(r)]->split(0, r); });
  std::mutex m;
  std::condition_variable cv;
  bool looked = false;
  int in = -1, out = 42;
  onThreads(2, [&](int r) {
    Transport& world = *ts[static_cast<std::size_t>(r)];
    Transport* sub = subs[static_cast<std::size_t>(r)].get();
    auto schedule = std::make_shared<executor::Schedule>(Collective::kBroadcast, DataType::kInt32, ReduceOp::kSum, "t");
    executor::Frame onSplit;
    onSplit.comm = executor::kIntraComm;
    schedule->pushFrame(onSplit);
    if (r == 0) {
      schedule->recv({executor::BufferId::kRecv, 0}, sizeof in, 1, 3);
    } else {
      schedule->send({executor::BufferId::kSend, 0}, sizeof out, 0, 3);
    }
    schedule->popFrame();
    executor::Binding binding;
    binding.send = &out;
    binding.recv = &in;
    binding.subTransports[executor::kIntraComm] = sub;
    executor::Execution exec;
    executor::IssueLedger ledger;
    if (r == 0) {
      exec.start(schedule, binding, 0, false);
      EXPECT_FALSE(exec.progress(world, ledger));  // the receive is posted and runs
      Transport* const onlyWorld[] = {&world};
      Transport* const withSplit[] = {&world, sub};
      executor::Execution::WakeSources wakes;
      EXPECT_FALSE(exec.sleepsUntilWoken(world, {}, wakes));
      EXPECT_FALSE(exec.sleepsUntilWoken(world, onlyWorld, wakes)) << "the world's signals cannot see the split's receive";
      EXPECT_TRUE(exec.sleepsUntilWoken(world, withSplit, wakes));
      EXPECT_EQ(wakes.shm, nullptr) << "no shared-memory step: no doorbell";
      EXPECT_TRUE(wakes.signals);
      {
        std::lock_guard<std::mutex> lock(m);
        looked = true;
      }
      cv.notify_all();
      while (!exec.progress(world, ledger)) std::this_thread::yield();
      EXPECT_EQ(in, 42);
      EXPECT_TRUE(exec.sleepsUntilWoken(world, {}, wakes)) << "nothing in flight waits on anything";
    } else {
      {
        std::unique_lock<std::mutex> lock(m);
        ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return looked; }));
      }
      exec.start(schedule, binding, 0, false);
      while (!exec.progress(world, ledger)) std::this_thread::yield();
    }
  });
}

// The stall report's view of the transport (pending_messages.h): a receive
// nobody has sent to is listed with its peer, tag and bytes, waiting in
// Gloo; once its message came and test() saw it, it is gone.
TEST(GlooTransport, PendingMessagesNameWhatAWaitIsFor) {
  auto ts = makeTransports(2);
  auto mine = [](const std::vector<PendingMessage>& all, int tag) {
    std::vector<PendingMessage> out;
    for (const PendingMessage& m : all) {
      if (m.tag == tag) out.push_back(m);
    }
    return out;
  };
  int in = 0, out = 42, early = 7, lateIn = 0;
  Request q;
  ts[0]->irecv(&in, sizeof in, 1, 777, q);
  std::this_thread::sleep_for(50ms);
  // A send whose receive is not posted yet: Gloo completes it only once the
  // receiver asked for it.
  Request e;
  ts[1]->isend(&early, sizeof early, 0, 778, e);
  auto waiting = [&](int tag) {
    std::vector<PendingMessage> seen;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    do {  // "queued for a waiter" until a waiter took it: a moment
      seen = mine(pendingMessages(), tag);
      if (seen.size() == 1 && std::string(seen[0].state) == "waiting in Gloo") break;
      std::this_thread::sleep_for(1ms);
    } while (std::chrono::steady_clock::now() < deadline);
    return seen;
  };
  std::vector<PendingMessage> seen = waiting(777);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].isSend);
  EXPECT_EQ(seen[0].peer, 1);
  EXPECT_EQ(seen[0].bytes, sizeof in);
  EXPECT_STREQ(seen[0].state, "waiting in Gloo");
  EXPECT_NE(seen[0].transport.find("rank 0 of 2"), std::string::npos) << seen[0].transport;
  const std::vector<PendingMessage> sent = waiting(778);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].isSend);
  EXPECT_EQ(sent[0].peer, 0);
  EXPECT_NE(sent[0].transport.find("rank 1 of 2"), std::string::npos) << sent[0].transport;
  // Oldest first: the receive was posted at least 50 ms before the send.
  const std::vector<PendingMessage> all = pendingMessages();
  std::vector<int> order;
  for (const PendingMessage& m : all) {
    if (m.tag == 777 || m.tag == 778) order.push_back(m.tag);
  }
  EXPECT_EQ(order, (std::vector<int>{777, 778}));
  for (const PendingMessage& m : all) {
    if (m.tag == 777) {
      EXPECT_GE(m.ageMs, 50);
    }
  }
  const std::string json = pendingMessagesJson(seen);
  EXPECT_NE(json.find("\"kind\": \"recv\", \"peer\": 1, \"tag\": 777, \"bytes\": 4"), std::string::npos) << json;
  const std::string summary = pendingMessagesSummary(seen);
  EXPECT_NE(summary.find("1 transport message(s) not complete"), std::string::npos) << summary;
  EXPECT_NE(summary.find("recv from rank 1 tag 777 (4 B, waiting in Gloo"), std::string::npos) << summary;
  EXPECT_TRUE(pendingMessagesSummary({}).empty());

  Request s;
  ts[1]->isend(&out, sizeof out, 0, 777, s);
  testing::waitFor(*ts[1], s);
  testing::waitFor(*ts[0], q);
  EXPECT_EQ(in, 42);
  EXPECT_TRUE(mine(pendingMessages(), 777).empty());
  Request l;
  ts[0]->irecv(&lateIn, sizeof lateIn, 1, 778, l);
  testing::waitFor(*ts[0], l);
  testing::waitFor(*ts[1], e);
  EXPECT_EQ(lateIn, 7);
  EXPECT_TRUE(mine(pendingMessages(), 778).empty());
}

TEST(GlooTransport, MissingRankIsNamedWithinTheTimeout) {
  auto store = std::make_shared<MemoryStore>();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Communicator::createFromStore(store, 0, 2, 1500ms);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1 of 2 did not join"), std::string::npos) << what;
    EXPECT_NE(what.find("the test's memory store"), std::string::npos) << what;
    EXPECT_EQ(e.category(), ErrorCategory::kTimeout) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
}

}  // namespace
}  // namespace boostcomm::transport
