// Tag windows with the smallest tag range MPI allows (MPI_TAG_UB = 32767):
// the communicator cuts it into maxInFlight() windows of tagSpan() tags, and
// many concurrent asynchronous collectives of every algorithm (hierarchical
// ones included, with chunk counts as large as the span allows) all complete
// with exact results on every rank. The in-process transport rejects any tag
// above its maxTag, so a schedule that leaves its window fails the test.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/communicator_impl.h"
#include "boostcomm/boostcomm.h"
#include "core/tunables.h"
#include "testing/inproc_transport.h"

namespace boostcomm {
namespace {

constexpr int kMpiMinTagUb = 32767;

struct Group {
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<detail::CommunicatorImpl*> impls;  // owned by comms
};

Group makeGroup(int size, int maxTag) {
  Group g;
  for (auto& t : transport::InProcFabric::create(size, maxTag)) {
    auto impl = std::make_unique<detail::CommunicatorImpl>(std::move(t), nullptr);
    g.impls.push_back(impl.get());
    g.comms.push_back(std::make_shared<Communicator>(std::move(impl)));
  }
  return g;
}

// Rank r, element i: small integers, so every summation order is exact.
float input(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7)); }

struct Call {
  Collective collective;
  std::string algorithm;
  int root = 0;
  std::vector<float> in;
  std::vector<float> out;
  Work work;
};

// Starts one asynchronous call of `algorithm` on `count` elements per rank.
void start(Communicator& comm, Call& c, std::size_t count) {
  const std::size_t n = static_cast<std::size_t>(comm.size());
  CallOptions options;
  options.algorithm = c.algorithm;
  c.in.resize(c.collective == Collective::kReduceScatter ? count * n : count);
  for (std::size_t i = 0; i < c.in.size(); ++i) c.in[i] = input(comm.rank(), i);
  c.out.assign(c.collective == Collective::kAllgather ? count * n : count, -1.0f);
  switch (c.collective) {
    case Collective::kAllreduce:
      c.work = comm.allreduceAsync(std::span<const float>(c.in), std::span<float>(c.out), ReduceOp::kSum, options);
      break;
    case Collective::kAllgather:
      c.work = comm.allgatherAsync(std::span<const float>(c.in), std::span<float>(c.out), options);
      break;
    case Collective::kBroadcast: c.work = comm.broadcastAsync(std::span<float>(c.in), c.root, options); break;
    case Collective::kReduceScatter:
      c.work = comm.reduceScatterAsync(std::span<const float>(c.in), std::span<float>(c.out), ReduceOp::kSum, options);
      break;
    case Collective::kBarrier: c.work = comm.barrierAsync(options); break;
  }
}

// Number of wrong elements of a finished call on this rank.
std::size_t wrongElements(const Communicator& comm, const Call& c, std::size_t count) {
  const int n = comm.size();
  auto sum = [n](std::size_t i) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += input(r, i);
    return s;
  };
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    switch (c.collective) {
      case Collective::kAllreduce: wrong += c.out[i] != sum(i); break;
      case Collective::kReduceScatter: wrong += c.out[i] != sum(static_cast<std::size_t>(comm.rank()) * count + i); break;
      case Collective::kBroadcast: wrong += c.in[i] != input(c.root, i); break;
      case Collective::kAllgather:
        for (int r = 0; r < n; ++r) wrong += c.out[static_cast<std::size_t>(r) * count + i] != input(r, i);
        break;
      case Collective::kBarrier: break;
    }
  }
  return wrong;
}

class TagWindows : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two nodes of two ranks (hier runs); 64-byte chunks and up to 4096 per
    // segment, so chunk counts are bounded by the tag span alone.
    core::setTunableOverride(core::kTunableNodeLayout, "2,2");
    core::setTunableOverride(core::kTunableRingChunkBytes, "64");
    core::setTunableOverride(core::kTunableMaxChunksPerSegment, "4096");
  }
  void TearDown() override {
    core::clearTunableOverride(core::kTunableNodeLayout);
    core::clearTunableOverride(core::kTunableRingChunkBytes);
    core::clearTunableOverride(core::kTunableMaxChunksPerSegment);
  }
};

TEST_F(TagWindows, SpanAndWindowsFitTheTransportsTagRange) {
  Group small = makeGroup(4, kMpiMinTagUb);
  EXPECT_EQ(small.impls[0]->tagSpan(), 4096);
  EXPECT_EQ(small.impls[0]->maxInFlight(), 8u);
  Group large = makeGroup(4, INT_MAX);
  EXPECT_EQ(large.impls[0]->tagSpan(), executor::kMaxStepTag);
  EXPECT_EQ(large.impls[0]->maxInFlight(), 32768u);
  for (const Group* g : {&small, &large}) {
    const auto* impl = g->impls[0];
    EXPECT_LE(static_cast<long long>(impl->maxInFlight()) * impl->tagSpan(),
              static_cast<long long>(g == &small ? kMpiMinTagUb : INT_MAX) + 1);
  }
}

TEST_F(TagWindows, ManyConcurrentCallsOfEveryAlgorithmAreExactWithTagUb32767) {
  constexpr int kRanks = 4;
  constexpr int kRounds = 2;
  // 400 KB per call: 64-byte chunks would need far more tags than 4096.
  constexpr std::size_t kCount = 100000;
  Group g = makeGroup(kRanks, kMpiMinTagUb);
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *g.comms[static_cast<std::size_t>(r)];
      try {
        std::deque<Call> calls;
        for (int round = 0; round < kRounds; ++round) {
          for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                                  Collective::kReduceScatter, Collective::kBarrier}) {
            for (const std::string& algo : comm.algorithms(coll)) {
              Call& c = calls.emplace_back();
              c.collective = coll;
              c.algorithm = algo;
              c.root = static_cast<int>(calls.size() % kRanks);
              start(comm, c, coll == Collective::kAllreduce || coll == Collective::kBroadcast ? kCount : kCount / kRanks);
            }
          }
          // A blocking call among them (it drains earlier work first).
          std::vector<float> x(64, 1.0f);
          comm.allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum);
          if (x[0] != kRanks) failures[static_cast<std::size_t>(r)] += "blocking allreduce wrong; ";
        }
        if (calls.size() <= g.impls[static_cast<std::size_t>(r)]->maxInFlight()) {
          failures[static_cast<std::size_t>(r)] += "too few calls to reuse tag windows; ";
        }
        // Wait newest first: the oldest calls complete while newer ones wait.
        for (auto it = calls.rbegin(); it != calls.rend(); ++it) it->work.wait();
        for (const Call& c : calls) {
          const std::size_t count =
              c.collective == Collective::kAllreduce || c.collective == Collective::kBroadcast ? kCount : kCount / kRanks;
          if (const std::size_t wrong = wrongElements(comm, c, count); wrong > 0) {
            failures[static_cast<std::size_t>(r)] += std::string(toString(c.collective)) + " " + c.algorithm + ": " +
                                                     std::to_string(wrong) + " wrong; ";
          }
        }
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(r)] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<std::size_t>(r)], "") << "rank " << r;
}

// Call 0 and call maxInFlight() share tag window 0. Call 0 is a binomial
// broadcast from rank 0 (rank 1 forwards to rank 3 once rank 0's data
// arrived), the later ones broadcast from rank 1 (which sends to rank 3 at
// once), and rank 0 starts late. Were call 8 launched while call 0 is in
// flight, rank 1's call-8 message would meet rank 3's call-0 receive (same
// peers, same tag) and rank 3 would end call 0 with call 8's data.
TEST_F(TagWindows, AWindowIsReusedOnlyAfterItsCallFinished) {
  constexpr int kRanks = 4;
  constexpr std::size_t kCount = 256;
  Group g = makeGroup(kRanks, kMpiMinTagUb);
  const int calls = static_cast<int>(g.impls[0]->maxInFlight()) + 1;
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *g.comms[static_cast<std::size_t>(r)];
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      try {
        std::vector<std::vector<float>> buffers(static_cast<std::size_t>(calls));
        std::vector<Work> works;
        CallOptions binomial;
        binomial.algorithm = "binomial";
        for (int c = 0; c < calls; ++c) {
          const int root = c == 0 ? 0 : 1;
          std::vector<float>& buf = buffers[static_cast<std::size_t>(c)];
          buf.assign(kCount, r == root ? static_cast<float>(c + 1) : -1.0f);
          works.push_back(comm.broadcastAsync(std::span<float>(buf), root, binomial));
        }
        for (Work& w : works) w.wait();
        for (int c = 0; c < calls; ++c) {
          for (float v : buffers[static_cast<std::size_t>(c)]) {
            if (v != static_cast<float>(c + 1)) {
              failures[static_cast<std::size_t>(r)] += "call " + std::to_string(c) + " got " + std::to_string(v) + "; ";
              break;
            }
          }
        }
      } catch (const std::exception& e) {
        failures[static_cast<std::size_t>(r)] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<std::size_t>(r)], "") << "rank " << r;
}

}  // namespace
}  // namespace boostcomm
