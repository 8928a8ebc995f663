// The simulator's host-memory model (host processes on shared memory, as
// measured by `boostcomm topo`): an intra-node message is a link phase then a
// copy by the receiver; a node's ranks share its memory bus for copies and
// local work; a job's working set decides its cache speed-up; the backend's
// per-call temporary pays fresh-page faults from 32 MiB; and a topology file
// becomes a cluster description. Every number checked is virtual time or a
// value derived by hand from the inputs; nothing is timed on the wall clock.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "boostcomm/topology.h"
#include "common/expect_error.h"
#include "common/sim_jobs.h"
#include "simulate/cluster_file.h"
#include "simulate/simulator.h"
#include "simulate/sim_network.h"

namespace boostcomm {
namespace {

using testing::expectInvalid;
using simulate::ClusterSpec;

constexpr double kMiB = 1048576.0;

// One host, `ranks` processes: 5 GB/s links (1 us), 10 GB/s per-rank copies.
ClusterSpec host(int ranks) {
  ClusterSpec c;
  c.nodes = 1;
  c.ranksPerNode = ranks;
  c.intra = {5e9, 1e-6};
  c.memoryBytesPerSecond = 10e9;
  c.intraCopyOnCpu = true;
  return c;
}

using testing::simAllreduce;

TEST(SimHost, MessageIsTheLinkThenTheReceiversCopy) {
  simulate::Network net(host(2));
  const double b = kMiB;
  EXPECT_DOUBLE_EQ(net.transfer(0, 1, kMiB, 0), 1e-6 + b / 5e9 + b / 10e9);
  // A job in cache (memory cost 1/4) copies four times faster; the link is not sped up.
  simulate::Network cached(host(2));
  EXPECT_DOUBLE_EQ(cached.transfer(0, 1, kMiB, 0, 0.25), 1e-6 + b / 5e9 + 0.25 * b / 10e9);
  // The receiver's CPU is busy until the bytes are in: its own reduce waits.
  const double arrival = 1e-6 + b / 5e9 + b / 10e9;
  EXPECT_DOUBLE_EQ(net.localWork(1, kMiB, 1.5, 0), arrival + 1.5 * b / 10e9);
}

TEST(SimHost, RanksOfANodeShareItsMemoryBus) {
  // Bus 10 GB/s = one rank's copy rate: two ranks reducing at once take twice as long.
  ClusterSpec c = host(2);
  c.nodeBusBytesPerSecond = 10e9;
  simulate::Network net(c);
  const double b = 4 * kMiB;
  EXPECT_DOUBLE_EQ(net.localWork(0, 4 << 20, 1.0, 0), b / 10e9);
  EXPECT_DOUBLE_EQ(net.localWork(1, 4 << 20, 1.0, 0), 2 * b / 10e9);
  // Two messages crossing at once: the second copy waits for the bus.
  simulate::Network both(c);
  const double link = 1e-6 + b / 5e9;
  EXPECT_DOUBLE_EQ(both.transfer(0, 1, 4 << 20, 0), link + b / 10e9);
  EXPECT_DOUBLE_EQ(both.transfer(1, 0, 4 << 20, 0), link + 2 * b / 10e9);
  // A booking for later (rank 0's CPU is busy faulting pages until 1 s)
  // leaves the bus free before it: rank 1's copy now is not held behind it.
  ClusterSpec faulting = c;
  faulting.firstTouchBytesPerSecond = 1e9;
  simulate::Network later(faulting);
  EXPECT_DOUBLE_EQ(later.firstTouch(0, 1000000000, 0), 1.0);
  EXPECT_DOUBLE_EQ(later.localWork(0, 4 << 20, 1.0, 0), 1.0 + b / 10e9);
  EXPECT_DOUBLE_EQ(later.localWork(1, 4 << 20, 1.0, 0), b / 10e9);
  // Device ranks (no host copies): local work does not touch the bus.
  c.intraCopyOnCpu = false;
  simulate::Network devices(c);
  EXPECT_DOUBLE_EQ(devices.localWork(0, 4 << 20, 1.0, 0), b / 10e9);
  EXPECT_DOUBLE_EQ(devices.localWork(1, 4 << 20, 1.0, 0), b / 10e9);
}

TEST(SimHost, CacheSpeedupIsLogLinearBetweenPoints) {
  ClusterSpec c = host(2);
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(kMiB), 1.0);  // no cache described
  c.cache = {{1 * kMiB, 5.0}, {16 * kMiB, 3.0}, {256 * kMiB, 1.0}};
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(0.25 * kMiB), 5.0);
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(4 * kMiB), 4.0);  // halfway in log(W)
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(16 * kMiB), 3.0);
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(64 * kMiB), 2.0);
  EXPECT_DOUBLE_EQ(c.cacheSpeedupAt(1024 * kMiB), 1.0);
  simulate::validateCluster(c);
  ClusterSpec slow = c;
  slow.cache[1].speedup = 0.5;
  expectInvalid([&] { simulate::validateCluster(slow); }, "--cache");
  ClusterSpec unordered = c;
  std::swap(unordered.cache[0], unordered.cache[2]);
  expectInvalid([&] { simulate::validateCluster(unordered); }, "--cache");
  ClusterSpec touch = c;
  touch.firstTouchBytesPerSecond = -1;
  expectInvalid([&] { simulate::validateCluster(touch); }, "--first-touch");
}

TEST(SimHost, SmallJobsRunFromCacheLargeOnesStream) {
  ClusterSpec plain = host(2);
  plain.nodeBusBytesPerSecond = 12e9;
  ClusterSpec cached = plain;
  cached.cache = {{64 * kMiB, 4.0}, {128 * kMiB, 1.0}};
  // 1 MiB: send + receive + scratch of 2 ranks is far below 64 MiB.
  const double small = simulate::simulateOnce(plain, simAllreduce("rhd", 1 << 20));
  const double smallCached = simulate::simulateOnce(cached, simAllreduce("rhd", 1 << 20));
  EXPECT_LT(smallCached, small);
  // The link phase is not sped up, so the gain is bounded by the copies.
  const double linkOnly = 2 * (0.5 * kMiB / 5e9 + 1e-6);
  EXPECT_GT(smallCached, linkOnly);
  // 256 MiB: every rank's working set alone exceeds the last point.
  EXPECT_DOUBLE_EQ(simulate::simulateOnce(cached, simAllreduce("rhd", 256 << 20)),
                   simulate::simulateOnce(plain, simAllreduce("rhd", 256 << 20)));
}

TEST(SimHost, BackendTemporaryPaysFreshPagesFrom32MiB) {
  ClusterSpec c = host(2);
  ClusterSpec faulting = c;
  faulting.firstTouchBytesPerSecond = 1e9;
  // One host: the ranks are CPU-bound, so faulting in the 64 MiB temporary
  // (64 ms at 1 GB/s) adds nearly all of its time to the call.
  const std::size_t big = std::size_t{64} << 20;
  const double faults = static_cast<double>(big) / 1e9;
  const double extra = simulate::simulateOnce(faulting, simAllreduce("native", big)) -
                       simulate::simulateOnce(c, simAllreduce("native", big));
  EXPECT_GT(extra, 0.9 * faults);
  EXPECT_LE(extra, faults * (1 + 1e-12));
  // Below glibc's 32 MiB mmap threshold the heap is reused: no faults.
  const std::size_t small = std::size_t{16} << 20;
  EXPECT_DOUBLE_EQ(simulate::simulateOnce(faulting, simAllreduce("native", small)),
                   simulate::simulateOnce(c, simAllreduce("native", small)));
  // boostcomm's own algorithms keep their buffers: no faults either.
  EXPECT_DOUBLE_EQ(simulate::simulateOnce(faulting, simAllreduce("ring", big)),
                   simulate::simulateOnce(c, simAllreduce("ring", big)));
  // Two nodes on a slow network: the faults happen while the rank waits for
  // the NIC (0.1 GB/s: the exchange alone takes ~0.34 s), so most are hidden.
  ClusterSpec net;
  net.nodes = 2;
  net.ranksPerNode = 1;
  net.inter = {0.1e9, 10e-6};
  net.memoryBytesPerSecond = 10e9;
  ClusterSpec netFaulting = net;
  netFaulting.firstTouchBytesPerSecond = 1e9;
  const double hidden = simulate::simulateOnce(netFaulting, simAllreduce("native", big)) -
                        simulate::simulateOnce(net, simAllreduce("native", big));
  EXPECT_GE(hidden, 0.0);
  EXPECT_LT(hidden, 0.25 * faults);
}

Topology measuredHost() {
  Topology t;
  t.worldSize = 2;
  t.nodes = 1;
  t.ranksPerNode = {2};
  t.nodeOfRank = {0, 0};
  t.localRankOfRank = {0, 1};
  t.hostnames = {"h"};
  t.sockets = {1};
  t.numaNodes = {1};
  t.cores = {2};
  t.layoutSource = "test";
  t.intraNode.measured = true;
  t.intraNode.hops = 1;
  t.intraNode.latencyUs = 0.5;
  t.intraNode.bandwidthGBps = 12;  // the best-case fit: not what the simulator takes
  t.intraNode.samples = {{8, 0.8, 1.0}, {1 << 20, 100, 110}, {4 << 20, 400, 440}};
  t.interNode.hops = 2;
  t.memory.measured = true;
  t.memory.copyGBps = 10;
  t.memory.nodeCopyGBps = 20;
  t.memory.firstTouchGBps = 0.5;
  t.memory.sweep = {{1 << 20, 100}, {256 << 20, 20}};
  return t;
}

TEST(SimHost, TopologyFileBecomesTheCluster) {
  const ClusterSpec c = simulate::clusterFromTopology(measuredHost(), "t.json");
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.ranksPerNode, 2);
  EXPECT_TRUE(c.intraCopyOnCpu);
  EXPECT_DOUBLE_EQ(c.intra.latencySeconds, 1e-6);  // median of the smallest probe
  EXPECT_DOUBLE_EQ(c.memoryBytesPerSecond, 10e9);
  EXPECT_DOUBLE_EQ(c.nodeBusBytesPerSecond, 20e9);
  EXPECT_DOUBLE_EQ(c.firstTouchBytesPerSecond, 0.5e9);
  ASSERT_EQ(c.cache.size(), 2u);
  EXPECT_DOUBLE_EQ(c.cache[0].speedup, 5.0);  // 100 / 20 GB/s
  EXPECT_DOUBLE_EQ(c.cache[1].speedup, 1.0);
  // Bandwidth: the marginal median cost between the two largest probes
  // (330 us for 3 MiB), less the in-cache copy the probe included (working
  // set 2 x 4 MiB x 2 ranks = 16 MiB: speed-up 3, i.e. 30 GB/s).
  const double probed = 3 * kMiB / 330e-6;
  EXPECT_NEAR(1 / c.intra.bytesPerSecond, 1 / probed - 1 / 30e9, 1e-15);
  // Without a memory section: host copies, the default memory figures.
  Topology bare = measuredHost();
  bare.memory = MemoryModel{};
  const ClusterSpec b = simulate::clusterFromTopology(bare, "t.json");
  EXPECT_TRUE(b.intraCopyOnCpu);
  EXPECT_TRUE(b.cache.empty());
  EXPECT_DOUBLE_EQ(b.intra.bytesPerSecond, probed);
  // A layout the simulator cannot describe.
  Topology uneven = measuredHost();
  uneven.worldSize = 3;
  uneven.nodes = 2;
  uneven.ranksPerNode = {2, 1};
  expectInvalid([&] { simulate::clusterFromTopology(uneven, "t.json"); }, "--topology t.json");
}

TEST(SimHost, SeveralMeasurementsGiveTheMedianCluster) {
  std::vector<ClusterSpec> runs;
  for (double gbps : {6.0, 9.0, 7.0}) {
    ClusterSpec c = host(2);
    c.intra.bytesPerSecond = gbps * 1e9;
    c.memoryBytesPerSecond = 2 * gbps * 1e9;
    c.firstTouchBytesPerSecond = gbps * 1e8;
    c.cache = {{kMiB, gbps / 3}, {64 * kMiB, 1.0}};
    runs.push_back(c);
  }
  const ClusterSpec m = simulate::medianCluster(runs);
  EXPECT_DOUBLE_EQ(m.intra.bytesPerSecond, 7e9);
  EXPECT_DOUBLE_EQ(m.memoryBytesPerSecond, 14e9);
  EXPECT_DOUBLE_EQ(m.firstTouchBytesPerSecond, 7e8);
  EXPECT_DOUBLE_EQ(m.cache[0].speedup, 7.0 / 3);
  runs.pop_back();  // an even count: the mean of the middle two
  EXPECT_DOUBLE_EQ(simulate::medianCluster(runs).intra.bytesPerSecond, 7.5e9);
  runs[1].ranksPerNode = 4;
  expectInvalid([&] { simulate::medianCluster(runs); }, "--topology");
  runs[1] = runs[0];
  runs[1].cache[1].workingSetBytes = 32 * kMiB;
  expectInvalid([&] { simulate::medianCluster(runs); }, "--topology");
  expectInvalid([] { simulate::medianCluster({}); }, "--topology");
}

TEST(SimHost, TopologyFileKeepsMemoryAndMedians) {
  const Topology t = measuredHost();
  const Topology back = topologyFromJson(topologyToJson(t));
  ASSERT_EQ(back.intraNode.samples.size(), 3u);
  EXPECT_DOUBLE_EQ(back.intraNode.samples[1].medianUs, 110);
  EXPECT_TRUE(back.memory.measured);
  EXPECT_DOUBLE_EQ(back.memory.copyGBps, 10);
  EXPECT_DOUBLE_EQ(back.memory.nodeCopyGBps, 20);
  EXPECT_DOUBLE_EQ(back.memory.firstTouchGBps, 0.5);
  ASSERT_EQ(back.memory.sweep.size(), 2u);
  EXPECT_EQ(back.memory.sweep[1].workingSetBytes, std::size_t{256} << 20);
  // Unmeasured memory is not written, and reads back as unmeasured.
  Topology bare = t;
  bare.memory = MemoryModel{};
  EXPECT_EQ(topologyToJson(bare).find("\"memory\""), std::string::npos);
  EXPECT_FALSE(topologyFromJson(topologyToJson(bare)).memory.measured);
}

}  // namespace
}  // namespace boostcomm
