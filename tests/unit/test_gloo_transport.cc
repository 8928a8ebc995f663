// The store-rendezvous transport (transport/gloo/): ranks as threads of one
// process, each with its own Gloo TCP device on 127.0.0.1, rendezvousing
// through an in-memory KeyValueStore. Native collectives (Gloo's own) against
// the exact reference shared with the other transports' tests, point-to-point
// with pieces and empty messages, split, and boostcomm's algorithms (ring,
// rhd, binomial ...) running on it through a Communicator, world sizes 1-4.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/store.h"
#include "common/transport_checks.h"
#include "transport/gloo/gloo_transport.h"

namespace boostcomm::transport {
namespace {

using namespace std::chrono_literals;

class MemoryStore final : public KeyValueStore {
 public:
  void set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kv_[key] = value;
    cv_.notify_all();
  }
  std::vector<std::uint8_t> get(const std::string& key) override {
    wait({key}, 60s);
    std::lock_guard<std::mutex> lock(mutex_);
    return kv_.at(key);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool ok = cv_.wait_for(lock, timeout, [&] {
      for (const auto& k : keys) {
        if (!kv_.count(k)) return false;
      }
      return true;
    });
    if (!ok) throw std::runtime_error("memory store: wait timed out");
  }
  std::string describe() const override { return "the test's memory store"; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::uint8_t>> kv_;
};

void onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::vector<std::unique_ptr<GlooTransport>> makeTransports(int n) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::unique_ptr<GlooTransport>> out(static_cast<std::size_t>(n));
  onThreads(n, [&](int r) {
    out[static_cast<std::size_t>(r)] = std::make_unique<GlooTransport>(
        StoreBridge(store, "t", 30s, r), GlooTransport::createDevice(r), r, n, std::vector<long long>{});
  });
  return out;
}

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
              testing::checkNativeReductions(*ts[static_cast<std::size_t>(r)], dt, op, count, seed++, nonBlocking,
                                             /*inPlace=*/(seed % 2) == 0, /*expectPending=*/false);
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
        for (const char* algo : {"native", "ring", "rhd", "rd", ""}) {
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
        for (const char* algo : {"native", "ring", "rd", ""}) {
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
        for (const char* algo : {"native", "binomial", ""}) {
          for (int root = 0; root < n; ++root) {
            std::vector<std::int32_t> b(count, r == root ? root + 5 : -1);
            CallOptions o;
            o.algorithm = algo;
            comm->broadcast(View(b.data(), count, DataType::kInt32), root, o);
            for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], root + 5) << "broadcast " << algo;
          }
        }
        for (const char* algo : {"native", "ring", ""}) {
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
