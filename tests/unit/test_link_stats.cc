// Link accounting (boostcomm/link_stats.h, executor/link_meter.h): interval
// occupancy, the table's row arithmetic, the backend model's bytes per level,
// and what a communicator counts for its own sends and for backend calls,
// in-process on a declared 2x2 layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <vector>

#include "algorithms/native_model.h"
#include "boostcomm/boostcomm.h"
#include "core/intervals.h"
#include "core/tunables.h"
#include "executor/link_meter.h"
#include "simulate/simulator.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using executor::LinkInterval;

TEST(LinkOccupancy, BusyAndCongestedTime) {
  // [0,10) and [5,15) overlap for 5; [20,30) alone; an empty one is ignored.
  const executor::IntervalOccupancy o = executor::occupancy({{20, 30}, {0, 10}, {5, 15}, {40, 40}});
  EXPECT_NEAR(o.busySeconds, 25e-9, 1e-15);
  EXPECT_NEAR(o.congestedSeconds, 5e-9, 1e-15);
  const executor::IntervalOccupancy none = executor::occupancy({});
  EXPECT_EQ(none.busySeconds, 0);
  // Touching intervals do not overlap.
  EXPECT_EQ(executor::occupancy({{0, 10}, {10, 20}}).congestedSeconds, 0);
  // Three deep counts once as congested.
  EXPECT_NEAR(executor::occupancy({{0, 10}, {0, 10}, {0, 10}}).congestedSeconds, 10e-9, 1e-15);
}

TEST(LinkOccupancy, UnionLengthAgreesWithTheSweep) {
  // core::unionLength (sorted in place, no allocation) and the busy time of
  // core::occupancy are one quantity: unordered, nested, touching, empty and
  // reversed intervals.
  const std::vector<core::Interval<std::int64_t>> cases[] = {
      {},
      {{5, 5}},
      {{9, 3}},
      {{0, 10}, {10, 20}},
      {{0, 100}, {10, 20}, {30, 40}},
      {{50, 60}, {0, 10}, {5, 15}, {70, 70}, {80, 75}, {14, 16}},
  };
  const std::int64_t expected[] = {0, 0, 0, 20, 100, 26};
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    std::vector<core::Interval<std::int64_t>> v = cases[i];
    EXPECT_EQ(core::unionLength(v), expected[i]) << "case " << i;
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "case " << i;
    EXPECT_EQ(core::occupancy(cases[i]).busy, expected[i]) << "case " << i;
  }
  // Seconds as doubles, as the simulator records them.
  EXPECT_DOUBLE_EQ(core::occupancy(std::vector<core::Interval<double>>{{0.5, 1.5}, {1.0, 2.0}}).congested, 0.5);
}

TEST(LinkOccupancy, SharesAddUpToTheUnion) {
  // core::ShareClock over A [0, 100), B [50, 150), C [120, 130): A has 50
  // alone and 50 shared with B (75); B 25 + 20 alone + 5 beside C + 20 alone
  // (70); C 5. The shares add up to the union, 150.
  core::ShareClock<double> clock;
  const double a = clock.advance(0, 0);
  EXPECT_EQ(a, 0.0);
  const double b = clock.advance(50, 1);
  const double aEnd = clock.advance(100, 2);
  const double c = clock.advance(120, 1);
  const double cEnd = clock.advance(130, 2);
  const double bEnd = clock.advance(150, 1);
  EXPECT_DOUBLE_EQ(aEnd - a, 75.0);
  EXPECT_DOUBLE_EQ(bEnd - b, 70.0);
  EXPECT_DOUBLE_EQ(cEnd - c, 5.0);
  std::vector<core::Interval<double>> all{{0, 100}, {50, 150}, {120, 130}};
  EXPECT_DOUBLE_EQ((aEnd - a) + (bEnd - b) + (cEnd - c), core::unionLength(all));
  // Time with nothing open does not advance it.
  EXPECT_EQ(clock.advance(500, 0), bEnd);
}

TEST(LinkMeter, FullBufferFoldsIntoBusyTime) {
  executor::LinkMeter m;
  m.configure({0, 1}, 0, nullptr);
  // 3 x capacity disjoint sends of 10 ns on each level: busy stays exact
  // across folds; folded inter-node intervals are reported as dropped.
  const std::size_t n = 3 * executor::LinkMeter::kIntervalCapacity + 5;
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = static_cast<std::int64_t>(100 * i);
    m.sendFinished(executor::kIntraLevel, 8, t, t + 10);
    m.sendFinished(executor::kInterLevel, 8, t, t + 10);
  }
  EXPECT_EQ(m.levelOf(executor::kWorldComm, 1), executor::kInterLevel);
  EXPECT_EQ(m.levelOf(executor::kWorldComm, 0), executor::kIntraLevel);
  for (int level : {executor::kIntraLevel, executor::kInterLevel}) {
    const executor::LevelCounters c = m.counters(level);
    EXPECT_EQ(c.observedBytes, 8 * n);
    EXPECT_EQ(c.messages, n);
    EXPECT_NEAR(c.busySeconds, 10e-9 * static_cast<double>(n), 1e-12);
  }
  EXPECT_EQ(m.droppedIntervals(), 3 * executor::LinkMeter::kIntervalCapacity);
  EXPECT_EQ(m.intervals(executor::kInterLevel).size(), 5u);
  m.reset();
  EXPECT_EQ(m.counters(executor::kInterLevel).busySeconds, 0);
  EXPECT_EQ(m.droppedIntervals(), 0u);
}

TEST(LinkMeter, FoldMergesIntervalsRecordedOutOfOrder) {
  executor::LinkMeter m;
  m.configure({0, 1}, 0, nullptr);
  // Recorded in finish order, not start order (fold sorts only then): pairs
  // (t+50, t+60) before (t, t+55) overlap into one 60 ns busy span each.
  const std::size_t pairs = executor::LinkMeter::kIntervalCapacity;  // 2 x capacity intervals: folds
  for (std::size_t i = 0; i < pairs; ++i) {
    const auto t = static_cast<std::int64_t>(1000 * i);
    m.sendFinished(executor::kIntraLevel, 1, t + 50, t + 60);
    m.sendFinished(executor::kIntraLevel, 1, t, t + 55);
  }
  EXPECT_NEAR(m.counters(executor::kIntraLevel).busySeconds, 60e-9 * static_cast<double>(pairs), 1e-12);
}

TEST(LinkRows, Arithmetic) {
  std::vector<executor::NodeLinkSample> nodes(2);
  nodes[0] = {2, 400, 100, 1.0, 0.5};
  nodes[1] = {2, 200, 300, 1.0, 0.0};
  const executor::LinkRows r = executor::linkRows(nodes, 100, 100, 2.0);
  // inter: (100/200 + 300/200) / 2; intra: (400/400 + 200/400) / 2; congestion 0.5 / 2.
  EXPECT_DOUBLE_EQ(r.interUtilisation, 1.0);
  EXPECT_DOUBLE_EQ(r.intraUtilisation, 0.75);
  EXPECT_DOUBLE_EQ(r.interCongestion, 0.25);
  EXPECT_EQ(executor::linkRows(nodes, 100, 100, 0).interUtilisation, 0);  // no communication phase
}

TEST(NativeModel, LevelsFollowTheCommunicator) {
  const algorithms::NodeLayout layout = algorithms::layoutFromSizes({2, 2});
  executor::NativeCall call;
  call.collective = Collective::kAllreduce;
  call.count = 1 << 18;  // 1 MiB of float: ring on 4 ranks
  const std::uint64_t bytes = std::uint64_t{1} << 20;
  std::uint64_t inter = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const executor::LevelBytes b = algorithms::nativeLinkBytes(call, executor::kWorldComm, DataType::kFloat32, layout, rank);
    EXPECT_EQ(b[0] + b[1], bytes * 3 / 2) << "rank " << rank;  // ring: 2 (n-1)/n of the payload
    inter += b[1];
    // On the node's communicator everything is intra-node, on the leaders' inter-node.
    const executor::LevelBytes intra = algorithms::nativeLinkBytes(call, executor::kIntraComm, DataType::kFloat32, layout, rank);
    EXPECT_EQ(intra[1], 0u);
    EXPECT_EQ(intra[0], bytes);  // 2 ranks (rhd): half in the reduce-scatter, half in the allgather
    const executor::LevelBytes across = algorithms::nativeLinkBytes(call, executor::kInterComm, DataType::kFloat32, layout, rank);
    EXPECT_EQ(across[0], 0u);
    EXPECT_EQ(across[1], bytes);
  }
  // A ring over 2 nodes of 2 crosses between nodes at 2 of its 4 edges.
  EXPECT_EQ(inter, 2 * bytes * 3 / 2);
  // One node: nothing inter-node.
  const algorithms::NodeLayout one = algorithms::layoutFromSizes({4});
  EXPECT_EQ(algorithms::nativeLinkBytes(call, executor::kWorldComm, DataType::kFloat32, one, 1)[1], 0u);
}

// The simulator's link log counts the same bytes per node as the executor's
// accounting: a ring allreduce on a simulated 2x2 cluster against the model
// (which the in-process test below checks against real sends).
TEST(SimulatedLinks, RingBytesPerNodeMatchTheModel) {
  simulate::ClusterSpec cluster;
  cluster.nodes = 2;
  cluster.ranksPerNode = 2;
  simulate::Simulation sim(cluster);
  sim.setRecordLinks(true);
  simulate::JobSpec job;
  job.algorithm = "ring";
  job.request.collective = Collective::kAllreduce;
  job.request.count = 1 << 18;
  job.request.dtype = DataType::kFloat32;
  sim.add(job);
  const simulate::SimResult r = sim.run();
  ASSERT_EQ(r.links.size(), 2u);
  const algorithms::NodeLayout layout = algorithms::layoutFromSizes({2, 2});
  executor::NativeCall call;
  call.count = 1 << 18;
  for (int node = 0; node < 2; ++node) {
    std::uint64_t intra = 0, inter = 0;
    for (int r2 = 2 * node; r2 < 2 * node + 2; ++r2) {
      const executor::LevelBytes b = algorithms::nativeLinkBytes(call, executor::kWorldComm, DataType::kFloat32, layout, r2);
      intra += b[0];
      inter += b[1];
    }
    EXPECT_EQ(r.links[static_cast<std::size_t>(node)].intraBytes, intra) << "node " << node;
    EXPECT_EQ(r.links[static_cast<std::size_t>(node)].interBytes, inter) << "node " << node;
    EXPECT_FALSE(r.links[static_cast<std::size_t>(node)].interIntervals.empty());
    for (const auto& [a, b] : r.links[static_cast<std::size_t>(node)].interIntervals) EXPECT_LE(a, b);
  }
  // Off by default: no log.
  simulate::Simulation plain(cluster);
  plain.add(job);
  EXPECT_TRUE(plain.run().links.empty());
}

class LinkStatsInProcess : public ::testing::Test {
 protected:
  void SetUp() override { core::setTunableOverride(core::kTunableNodeLayout, "2,2"); }
  void TearDown() override {
    core::clearTunableOverride(core::kTunableNodeLayout);
    core::clearTunableOverride(core::kTunableLinkStats);
  }
};

TEST_F(LinkStatsInProcess, RingSendsAreObservedAndMatchTheModel) {
  const std::size_t count = 1 << 18;
  std::mutex mutex;
  std::vector<LinkStats> stats(4);
  std::vector<std::vector<NodeLinkStats>> nodes(4);
  detail::runInProcess(4, [&](Communicator& comm) {
    std::vector<float> data(count, 1.0f);
    comm.barrier();  // the first call's setup (link probe) is not the ring's
    comm.linkStats(true);
    CallOptions ring;
    ring.algorithm = "ring";
    comm.allreduce(std::span<const float>(data), std::span<float>(data), ReduceOp::kSum, ring);
    const LinkStats s = comm.linkStats(false);
    std::vector<NodeLinkStats> n = mergeNodeLinkStats(comm, s);
    std::lock_guard lock(mutex);
    stats[static_cast<std::size_t>(comm.rank())] = s;
    nodes[static_cast<std::size_t>(comm.rank())] = n;
  });
  const algorithms::NodeLayout layout = algorithms::layoutFromSizes({2, 2});
  executor::NativeCall call;
  call.count = count;
  std::uint64_t interSum = 0;
  for (int r = 0; r < 4; ++r) {
    const LinkStats& s = stats[static_cast<std::size_t>(r)];
    EXPECT_TRUE(s.enabled);
    EXPECT_EQ(s.node, r / 2);
    EXPECT_EQ(s.intraNode.modelledBytes + s.interNode.modelledBytes, 0u) << "rank " << r;
    // The model of a 1 MiB backend allreduce on 4 ranks is this same ring.
    const executor::LevelBytes model = algorithms::nativeLinkBytes(call, executor::kWorldComm, DataType::kFloat32, layout, r);
    EXPECT_EQ(s.intraNode.observedBytes, model[0]) << "rank " << r;
    EXPECT_EQ(s.interNode.observedBytes, model[1]) << "rank " << r;
    EXPECT_GT(s.intraNode.messages + s.interNode.messages, 0u);
    EXPECT_EQ(s.interNode.messages > 0, !s.interNodeIntervalsNs.empty());
    interSum += s.interNode.bytes;
  }
  // Every rank got the same per-node view; node sums add up.
  for (int r = 0; r < 4; ++r) {
    const std::vector<NodeLinkStats>& n = nodes[static_cast<std::size_t>(r)];
    ASSERT_EQ(n.size(), 2u);
    EXPECT_EQ(n[0].ranks, 2);
    EXPECT_EQ(n[0].interNode.bytes + n[1].interNode.bytes, interSum);
    EXPECT_EQ(n[0].intraNode.bytes, stats[0].intraNode.bytes + stats[1].intraNode.bytes);
    EXPECT_LE(n[0].interCongestedSeconds, n[0].interNode.busySeconds);
  }
}

TEST_F(LinkStatsInProcess, BackendCallsAreModelledAndOffCountsNothing) {
  for (const char* setting : {"1", "0"}) {
    core::setTunableOverride(core::kTunableLinkStats, setting);
    std::mutex mutex;
    std::vector<LinkStats> stats(4);
    detail::runInProcess(4, [&](Communicator& comm) {
      std::vector<float> data(1000, 1.0f);
      comm.barrier();
      comm.linkStats(true);
      CallOptions native;
      native.algorithm = "native";
      comm.allreduce(std::span<const float>(data), std::span<float>(data), ReduceOp::kSum, native);
      std::lock_guard lock(mutex);
      stats[static_cast<std::size_t>(comm.rank())] = comm.linkStats(false);
    });
    const algorithms::NodeLayout layout = algorithms::layoutFromSizes({2, 2});
    executor::NativeCall call;
    call.count = 1000;
    for (int r = 0; r < 4; ++r) {
      const LinkStats& s = stats[static_cast<std::size_t>(r)];
      EXPECT_EQ(s.intraNode.observedBytes + s.interNode.observedBytes, 0u);
      if (setting[0] == '0') {
        EXPECT_FALSE(s.enabled);
        EXPECT_EQ(s.intraNode.bytes + s.interNode.bytes, 0u);
        continue;
      }
      // 4000 B: recursive doubling, one round inside the node and one across.
      const executor::LevelBytes model = algorithms::nativeLinkBytes(call, executor::kWorldComm, DataType::kFloat32, layout, r);
      EXPECT_EQ(model[0], 4000u);
      EXPECT_EQ(model[1], 4000u);
      EXPECT_EQ(s.intraNode.modelledBytes, model[0]) << "rank " << r;
      EXPECT_EQ(s.interNode.modelledBytes, model[1]) << "rank " << r;
      EXPECT_EQ(s.interNode.collectives, 1u);
    }
  }
}

}  // namespace
}  // namespace boostcomm
