// In-process transport: point-to-point matching, native collectives over world
// sizes 1-8 and every dtype, split, and the errors that replace hangs.
// Ranks are threads; results are checked against tests/common's reference.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "boostcomm/error.h"
#include "common/test_data.h"
#include "common/transport_checks.h"
#include "core/tunables.h"
#include "testing/inproc_transport.h"

namespace boostcomm::transport {
namespace {

using boostcomm::testing::checkReduction;
using boostcomm::testing::fillBytes;
using boostcomm::testing::fillReduceInput;
using boostcomm::testing::Pattern;
using boostcomm::testing::runNative;
using boostcomm::testing::waitFor;
using Transports = std::vector<std::unique_ptr<Transport>>;

constexpr DataType kDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                   DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};
constexpr std::size_t kCounts[] = {0, 1, 4, 100, 1000};

// Runs fn on one thread per transport; rethrows the first exception.
void runRanks(Transports& ts, const std::function<void(Transport&)>& fn) {
  std::vector<std::exception_ptr> errors(ts.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ts.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*ts[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Spins on test() (which must not block) with a generous deadline.
TEST(InProcTransport, BasicProperties) {
  Transports ts = InProcFabric::create(3);
  ASSERT_EQ(ts.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ts[r]->rank(), r);
    EXPECT_EQ(ts[r]->size(), 3);
    EXPECT_EQ(ts[r]->maxTag(), INT_MAX);
    EXPECT_EQ(ts[r]->name(), "inproc");
  }
  EXPECT_THROW(InProcFabric::create(0), Error);
}

TEST(InProcTransport, MessagesOnOneTagArriveInPostingOrder) {
  constexpr int kMessages = 16;
  Transports ts = InProcFabric::create(2);
  runRanks(ts, [](Transport& t) {
    std::vector<std::int32_t> values(kMessages);
    std::vector<Request> reqs(kMessages);
    if (t.rank() == 0) {
      t.nativeBarrier(nullptr);  // half of the receives are posted before any send
      for (int i = 0; i < kMessages; ++i) {
        values[i] = 1000 + i;
        t.isend(&values[i], sizeof(std::int32_t), 1, 7, reqs[i]);
      }
    } else {
      for (int i = 0; i < kMessages / 2; ++i) t.irecv(&values[i], sizeof(std::int32_t), 0, 7, reqs[i]);
      t.nativeBarrier(nullptr);
      for (int i = kMessages / 2; i < kMessages; ++i) t.irecv(&values[i], sizeof(std::int32_t), 0, 7, reqs[i]);
    }
    for (auto& r : reqs) waitFor(t, r);
    if (t.rank() == 1) {
      for (int i = 0; i < kMessages; ++i) EXPECT_EQ(values[i], 1000 + i) << "message " << i;
    }
  });
}

TEST(InProcTransport, TagsMatchIndependently) {
  Transports ts = InProcFabric::create(2);
  runRanks(ts, [](Transport& t) {
    std::int64_t a = 0;
    std::int64_t b = 0;
    Request ra;
    Request rb;
    if (t.rank() == 0) {
      a = 11;
      b = 22;
      t.isend(&a, sizeof a, 1, 1, ra);
      t.isend(&b, sizeof b, 1, 2, rb);
    } else {
      t.irecv(&b, sizeof b, 0, 2, rb);  // posted in the opposite order
      t.irecv(&a, sizeof a, 0, 1, ra);
    }
    waitFor(t, ra);
    waitFor(t, rb);
    EXPECT_EQ(a, 11);
    EXPECT_EQ(b, 22);
  });
}

TEST(InProcTransport, ZeroByteMessagesComplete) {
  Transports ts = InProcFabric::create(2);
  runRanks(ts, [](Transport& t) {
    Request req;
    if (t.rank() == 0) {
      t.isend(nullptr, 0, 1, 3, req);
    } else {
      t.irecv(nullptr, 0, 0, 3, req);
    }
    waitFor(t, req);
  });
}

TEST(InProcTransport, LargeMessage) {
  const std::size_t bytes = (std::size_t{64} << 20) + 3;
  std::vector<unsigned char> expected(bytes);
  fillBytes(expected.data(), bytes, 42, 0);
  Transports ts = InProcFabric::create(2);
  runRanks(ts, [&](Transport& t) {
    std::vector<unsigned char> buf(bytes);
    Request req;
    if (t.rank() == 0) {
      buf = expected;
      t.isend(buf.data(), bytes, 1, 0, req);
    } else {
      t.irecv(buf.data(), bytes, 0, 0, req);
    }
    waitFor(t, req);
    EXPECT_TRUE(buf == expected);
  });
}

// Every rank sends a distinct payload to every rank (itself included) at once.
TEST(InProcTransport, AllToAllAcrossWorldSizes) {
  for (int n = 1; n <= 8; ++n) {
    Transports ts = InProcFabric::create(n);
    runRanks(ts, [n](Transport& t) {
      const std::size_t bytes = 100 + std::size_t(t.rank());
      std::vector<std::vector<unsigned char>> out(n, std::vector<unsigned char>(bytes));
      std::vector<std::vector<unsigned char>> in(n);
      std::vector<Request> reqs(2 * n);
      for (int p = 0; p < n; ++p) {
        in[p].resize(100 + std::size_t(p));
        t.irecv(in[p].data(), in[p].size(), p, 9, reqs[n + p]);
      }
      for (int p = 0; p < n; ++p) {
        fillBytes(out[p].data(), bytes, 1000 + std::uint64_t(p), t.rank());
        t.isend(out[p].data(), bytes, p, 9, reqs[p]);
      }
      for (auto& r : reqs) waitFor(t, r);
      for (int p = 0; p < n; ++p) {
        std::vector<unsigned char> expected(in[p].size());
        fillBytes(expected.data(), expected.size(), 1000 + std::uint64_t(t.rank()), p);
        EXPECT_TRUE(in[p] == expected) << "from rank " << p << " to rank " << t.rank();
      }
    });
  }
}

// MPI's rule: a receive takes a message of at most its size. A longer
// message fails both sides; a shorter one completes.
TEST(InProcTransport, LongerMessageThanTheReceiveFailsBothSides) {
  Transports ts = InProcFabric::create(2);
  std::atomic<int> failures{0};
  runRanks(ts, [&](Transport& t) {
    std::vector<char> buf(16);
    Request req;
    if (t.rank() == 0) {
      t.isend(buf.data(), 16, 1, 4, req);
    } else {
      t.irecv(buf.data(), 8, 0, 4, req);
    }
    try {
      waitFor(t, req);
      ADD_FAILURE() << "rank " << t.rank() << ": a 16-byte message into an 8-byte receive completed";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kMismatch);
      EXPECT_NE(e.detail().find("8 bytes"), std::string::npos) << e.what();
      EXPECT_NE(e.detail().find("16 bytes"), std::string::npos) << e.what();
      EXPECT_EQ(req.slot[0], 0u);
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);
}

TEST(InProcTransport, ShorterMessageThanTheReceiveCompletes) {
  Transports ts = InProcFabric::create(2);
  EXPECT_TRUE(ts[0]->acceptsShorterMessages());
  runRanks(ts, [&](Transport& t) {
    std::vector<char> buf(16, 7);
    Request req;
    if (t.rank() == 0) {
      for (int i = 0; i < 8; ++i) buf[static_cast<std::size_t>(i)] = static_cast<char>(i);
      t.isend(buf.data(), 8, 1, 4, req);
    } else {
      t.irecv(buf.data(), 16, 0, 4, req);
    }
    waitFor(t, req);
    if (t.rank() == 1) {
      for (int i = 0; i < 8; ++i) EXPECT_EQ(buf[static_cast<std::size_t>(i)], static_cast<char>(i));
      for (int i = 8; i < 16; ++i) EXPECT_EQ(buf[static_cast<std::size_t>(i)], 7) << "byte " << i << " past the message";
    }
  });
}

TEST(InProcTransport, InvalidPointToPointArguments) {
  Transports ts = InProcFabric::create(2);
  Transport& t = *ts[0];
  char byte = 0;
  Request req;
  EXPECT_THROW(t.isend(&byte, 1, 2, 0, req), Error);
  EXPECT_THROW(t.isend(&byte, 1, -1, 0, req), Error);
  EXPECT_THROW(t.irecv(&byte, 1, 1, -5, req), Error);
  EXPECT_THROW(t.irecv(nullptr, 1, 1, 0, req), Error);
  EXPECT_FALSE(req.active());
}

// One rank's share of the native collective sweep.
void checkNativeCollectives(Transport& t) {
  const int n = t.size();
  const int me = t.rank();
  int call = 0;
  for (DataType dtype : kDataTypes) {
    const std::size_t elemBytes = dataTypeSize(dtype);
    for (std::size_t count : kCounts) {
      for (ReduceOp op : kOps) {
        const std::uint64_t seed = 7 + std::uint64_t(call);
        const bool nonBlocking = (call++ % 2) == 1;
        const bool inPlace = (call % 3) == 0;
        SCOPED_TRACE(::testing::Message() << "n=" << n << " rank=" << me << " " << toString(dtype) << " "
                                          << toString(op) << " count=" << count << (nonBlocking ? " nb" : "")
                                          << (inPlace ? " in-place" : ""));
        boostcomm::testing::checkNativeReductions(t, dtype, op, count, seed, nonBlocking, inPlace,
                                                  /*expectPending=*/false);
      }
      // allgatherv: rank r contributes count + r elements, with a gap of one element between blocks
      std::vector<int> counts(n);
      std::vector<int> displs(n);
      int offset = 0;
      for (int r = 0; r < n; ++r) {
        counts[r] = static_cast<int>(count) + r;
        displs[r] = offset;
        offset += counts[r] + 1;
      }
      std::vector<unsigned char> gathered(std::size_t(offset) * elemBytes, 0xAB);
      std::vector<unsigned char> mine(static_cast<std::size_t>(counts[me]) * elemBytes);
      fillBytes(mine.data(), mine.size(), call, me);
      const bool nonBlocking = (call % 2) == 1;
      runNative(t, nonBlocking, [&](Request* r) {
        t.nativeAllgatherv(mine.data(), mine.size() / elemBytes, gathered.data(), counts.data(), displs.data(), dtype,
                           r);
      });
      for (int r = 0; r < n; ++r) {
        std::vector<unsigned char> expected(std::size_t(counts[r]) * elemBytes);
        fillBytes(expected.data(), expected.size(), call, r);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), gathered.begin() + std::size_t(displs[r]) * elemBytes))
            << "allgatherv block of rank " << r;
        EXPECT_EQ(gathered[(std::size_t(displs[r]) + counts[r]) * elemBytes], 0xAB) << "gap after rank " << r;
      }
      // broadcast from a root that moves with each call
      const int root = call % n;
      std::vector<unsigned char> buf(count * elemBytes);
      std::vector<unsigned char> expected(buf.size());
      fillBytes(expected.data(), expected.size(), call, root);
      if (me == root) buf = expected;
      runNative(t, !nonBlocking, [&](Request* r) { t.nativeBroadcast(buf.data(), count, dtype, root, r); });
      EXPECT_TRUE(buf == expected) << "broadcast from root " << root;
      ++call;
    }
  }
}

TEST(InProcTransport, NativeCollectivesAcrossWorldSizes) {
  for (int n = 1; n <= 8; ++n) {
    Transports ts = InProcFabric::create(n);
    runRanks(ts, checkNativeCollectives);
  }
}

TEST(InProcTransport, BarrierWaitsForEveryRank) {
  for (int n : {1, 2, 5, 8}) {
    Transports ts = InProcFabric::create(n);
    std::atomic<int> arrived{0};
    runRanks(ts, [&](Transport& t) {
      for (int round = 1; round <= 3; ++round) {
        if (t.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++arrived;
        runNative(t, round == 2, [&](Request* r) { t.nativeBarrier(r); });
        EXPECT_GE(arrived.load(), round * n);
        t.nativeBarrier(nullptr);  // nobody starts the next round before all checked
      }
    });
  }
}

TEST(InProcTransport, SeveralCollectivesInFlight) {
  Transports ts = InProcFabric::create(4);
  runRanks(ts, [](Transport& t) {
    constexpr int kInFlight = 5;
    std::vector<std::int64_t> values(kInFlight);
    std::vector<std::int64_t> sums(kInFlight);
    std::vector<Request> reqs(kInFlight);
    for (int i = 0; i < kInFlight; ++i) {
      values[i] = (t.rank() + 1) * (i + 1);
      t.nativeAllreduce(&values[i], &sums[i], 1, DataType::kInt64, ReduceOp::kSum, &reqs[i]);
    }
    for (int i = kInFlight - 1; i >= 0; --i) waitFor(t, reqs[i]);
    for (int i = 0; i < kInFlight; ++i) EXPECT_EQ(sums[i], 10 * (i + 1));
  });
}

// Runs fn on every rank and expects each to throw a kMismatch error containing `needle`.
void expectMismatch(int n, const std::function<void(Transport&)>& fn, const std::string& needle) {
  Transports ts = InProcFabric::create(n);
  std::atomic<int> failures{0};
  runRanks(ts, [&](Transport& t) {
    try {
      fn(t);
      ADD_FAILURE() << "rank " << t.rank() << ": mismatched collective completed";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
      EXPECT_EQ(e.rank(), t.rank());
      EXPECT_NE(e.detail().find(needle), std::string::npos) << e.what();
      ++failures;
    }
    // The fabric stays usable after a reported mismatch.
    std::int32_t one = 1;
    std::int32_t total = 0;
    t.nativeAllreduce(&one, &total, 1, DataType::kInt32, ReduceOp::kSum, nullptr);
    EXPECT_EQ(total, n);
  });
  EXPECT_EQ(failures.load(), n);
}

TEST(InProcTransport, MismatchedCollectiveArgumentsAreReported) {
  float data[8] = {};
  float out[8] = {};
  expectMismatch(
      3,
      [&](Transport& t) {
        float local[8] = {};
        float result[8] = {};
        t.nativeAllreduce(local, result, t.rank() == 2 ? 5 : 4, DataType::kFloat32, ReduceOp::kSum, nullptr);
      },
      "count differs across ranks: rank 0 passed 4, rank 2 passed 5");
  expectMismatch(
      2,
      [&](Transport& t) {
        float local[8] = {};
        float result[8] = {};
        t.nativeAllreduce(local, result, 4, t.rank() == 1 ? DataType::kInt32 : DataType::kFloat32, ReduceOp::kSum,
                          nullptr);
      },
      "rank 1 passed int32");
  expectMismatch(
      2,
      [&](Transport& t) {
        double local[4] = {};
        Request req;
        t.nativeBroadcast(local, 4, DataType::kFloat64, t.rank(), &req);
        waitFor(t, req);
      },
      "root differs");
  expectMismatch(
      2,
      [&](Transport& t) {
        if (t.rank() == 0) {
          t.nativeBarrier(nullptr);
        } else {
          t.nativeBroadcast(data, 1, DataType::kFloat32, 0, nullptr);
        }
      },
      "rank 0 called barrier but rank 1 called broadcast");
  expectMismatch(
      2,
      [&](Transport& t) {
        std::vector<int> counts = {1, 1};
        std::vector<int> displs = {0, t.rank() == 0 ? 1 : 4};
        t.nativeAllgatherv(data, 1, out, counts.data(), displs.data(), DataType::kFloat32, nullptr);
      },
      "displs differs");
}

TEST(InProcTransport, LocalArgumentErrors) {
  Transports ts = InProcFabric::create(2);
  Transport& t = *ts[0];
  float x = 0;
  try {
    t.nativeAllreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kAvg, nullptr);
    ADD_FAILURE() << "kAvg accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInternal);
  }
  try {
    t.nativeAllreduce(&x, &x, std::size_t{1} << 31, DataType::kFloat32, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "count above INT_MAX accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_EQ(e.rank(), 0);
  }
  EXPECT_THROW(t.nativeBroadcast(&x, 1, DataType::kFloat32, 2, nullptr), Error);
  int counts[2] = {2, 1};
  int displs[2] = {0, 2};
  EXPECT_THROW(t.nativeAllgatherv(&x, 1, &x, counts, displs, DataType::kFloat32, nullptr), Error);
}

TEST(InProcTransport, SplitFormsOrderedSubgroups) {
  constexpr int kWorld = 7;
  Transports ts = InProcFabric::create(kWorld);
  runRanks(ts, [](Transport& t) {
    const int me = t.rank();
    // Rank 6 opts out; the others form evens and odds ordered by descending rank.
    const int color = me == 6 ? -1 : me % 2;
    std::unique_ptr<Transport> sub = t.split(color, -me);
    if (color < 0) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    const std::vector<int> members = color == 0 ? std::vector<int>{4, 2, 0} : std::vector<int>{5, 3, 1};
    ASSERT_EQ(sub->size(), 3);
    EXPECT_EQ(members[sub->rank()], me);

    std::int32_t value = me;
    std::int32_t sum = -1;
    sub->nativeAllreduce(&value, &sum, 1, DataType::kInt32, ReduceOp::kSum, nullptr);
    EXPECT_EQ(sum, color == 0 ? 6 : 9);

    // Ring exchange on the subgroup with the same tag as a parent-group message:
    // the two groups must not match each other's traffic.
    const int next = (sub->rank() + 1) % 3;
    const int prev = (sub->rank() + 2) % 3;
    std::int32_t got = -1;
    Request s;
    Request r;
    sub->irecv(&got, sizeof got, prev, 0, r);
    sub->isend(&value, sizeof value, next, 0, s);
    waitFor(*sub, s);
    waitFor(*sub, r);
    EXPECT_EQ(got, members[prev]);

    // A split of the split works too.
    std::unique_ptr<Transport> single = sub->split(sub->rank(), 0);
    ASSERT_NE(single, nullptr);
    EXPECT_EQ(single->size(), 1);
    EXPECT_EQ(single->rank(), 0);
  });
}

TEST(InProcTransport, BlockingWaitTimesOut) {
  core::setTunableOverride(core::kTunableTimeoutMs, "100");
  Transports ts = InProcFabric::create(2);
  try {
    ts[0]->nativeBarrier(nullptr);  // rank 1 never arrives
    ADD_FAILURE() << "barrier with a missing rank completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kTimeout);
  }
  core::clearTunableOverride(core::kTunableTimeoutMs);
}

}  // namespace
}  // namespace boostcomm::transport
