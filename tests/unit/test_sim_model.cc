// The simulator's timing model and its inputs: link arithmetic against the
// alpha-beta formulas, NIC sharing, traffic volumes of hierarchical vs flat
// algorithms, determinism, timing-only mode at 256 ranks, the replay's
// before/after modes, and clear errors for impossible cluster descriptions.
// No wall-clock timing: every number checked is virtual time or a byte count.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "boostcomm/error.h"
#include "common/expect_error.h"
#include "common/sim_jobs.h"
#include "workloads/model_profile.h"
#include "simulate/cluster_file.h"
#include "simulate/predict.h"
#include "simulate/replay_sim.h"
#include "simulate/simulator.h"
#include "simulate/sim_network.h"

namespace boostcomm {
namespace {

using simulate::ClusterSpec;

ClusterSpec cluster(int nodes, int perNode) {
  ClusterSpec c;
  c.nodes = nodes;
  c.ranksPerNode = perNode;
  c.intra = {20e9, 2e-6};
  c.inter = {2e9, 10e-6};
  c.memoryBytesPerSecond = 10e9;
  return c;
}

using testing::simAllreduce;

TEST(SimNetwork, IdleLinksFollowAlphaBeta) {
  simulate::Network net(cluster(2, 2));
  const std::size_t b = 1 << 20;
  EXPECT_DOUBLE_EQ(net.transfer(0, 1, b, 0), 2e-6 + b / 20e9);            // same node
  EXPECT_DOUBLE_EQ(net.transfer(1, 2, b, 1.0), 1.0 + 10e-6 + b / 2e9);     // across nodes
  EXPECT_DOUBLE_EQ(net.localWork(3, b, 1.5, 0), 1.5 * b / 10e9);           // a reduce
  EXPECT_EQ(net.stats().interBytes, b);
  EXPECT_EQ(net.stats().intraBytes, b);
}

TEST(SimNetwork, ConcurrentFlowsShareTheNodeNic) {
  // 4 ranks of node 0 each send to their peer on node 1 at once: the NIC
  // (2 GB/s) serves them one after another; the last arrives after 4 b / beta.
  simulate::Network net(cluster(2, 4));
  const std::size_t b = 4 << 20;
  double last = 0;
  for (int r = 0; r < 4; ++r) last = std::max(last, net.transfer(r, 4 + r, b, 0));
  EXPECT_DOUBLE_EQ(last, 10e-6 + 4.0 * b / 2e9);
  // Intra-node flows between distinct pairs do not share (per-rank ports).
  simulate::Network net2(cluster(1, 4));
  EXPECT_DOUBLE_EQ(std::max(net2.transfer(0, 1, b, 0), net2.transfer(2, 3, b, 0)), 2e-6 + b / 20e9);
}

TEST(SimTiming, TwoRankRecursiveDoublingIsOneExchangeAndOneReduce) {
  // rd on 2 ranks: both send the whole vector, then reduce it (1.5 copies).
  const std::size_t bytes = 8 << 20;
  const double predicted = simulate::simulateOnce(cluster(1, 2), simAllreduce("rd", bytes));
  EXPECT_NEAR(predicted, 2e-6 + bytes / 20e9 + 1.5 * bytes / 10e9, 1e-12);
}

TEST(SimTiming, HierarchicalMovesLessOverTheNicsThanFlatRhd) {
  const ClusterSpec c = cluster(8, 8);
  const std::size_t bytes = 64 << 20;
  algorithms::CollectiveSpec request;
  request.count = bytes / 4;
  const auto p = simulate::predictAll(c, request, {"native", "ring", "rhd", "hier"});
  const auto& hier = p[3];
  // Hierarchical ring: each node sends 2 (N - 1) / N of the vector, N = 8 nodes.
  const double expectedInter = 8 * 2.0 * 7 / 8 * bytes;
  EXPECT_NEAR(static_cast<double>(hier.detail.network.interBytes), expectedInter, 0.001 * expectedInter);
  EXPECT_GT(static_cast<double>(p[2].detail.network.interBytes), 4 * expectedInter);  // rhd: every rank crosses
  EXPECT_LT(hier.seconds, p[2].seconds);
  // No algorithm beats the NIC bound: 2 (N - 1) / N * bytes / beta per node.
  for (const auto& q : p) EXPECT_GT(q.seconds, 2.0 * 7 / 8 * bytes / 2e9) << q.algorithm;
  for (const auto& q : p) EXPECT_LE(simulate::fastest(p).seconds, q.seconds);
  // The backend's allreduce at this size and rank count is modelled as the
  // ring: expanded from one native step, it takes exactly the ring's time.
  EXPECT_EQ(p[0].ranAlgorithm, "native(ring)");
  EXPECT_DOUBLE_EQ(p[0].seconds, p[1].seconds);
}

TEST(SimTiming, DeterministicAndTimingOnlyAt256Ranks) {
  // Timing only: 256 ranks x 64 MiB needs no payload memory at all.
  const ClusterSpec c = cluster(32, 8);
  const double a = simulate::simulateOnce(c, simAllreduce("hier", 64 << 20));
  const double b = simulate::simulateOnce(c, simAllreduce("hier", 64 << 20));
  EXPECT_GT(a, 0);
  EXPECT_EQ(a, b);
}

TEST(SimReplay, BoostedIsNoSlowerThanBaselineOn8x8) {
  const workloads::ModelProfile& model = workloads::resnet50();
  simulate::ReplaySimOptions o;
  o.deviceFlopsPerSecond = 50e12;
  const simulate::ReplaySimReport r = simulate::simulateReplay(cluster(8, 8), model, o);
  ASSERT_EQ(r.modes.size(), 3u);
  EXPECT_EQ(r.modes[0].mode, "baseline");
  EXPECT_EQ(r.modes[0].collectives, model.tensors.size());
  EXPECT_LT(r.modes[2].collectives, r.modes[0].collectives);
  EXPECT_GT(r.computeSeconds, 0);
  for (const auto& m : r.modes) {
    EXPECT_GE(m.stepSeconds, r.computeSeconds) << m.mode;
    EXPECT_NEAR(m.exposedSeconds, m.stepSeconds - m.computeSeconds, 1e-12) << m.mode;
  }
  EXPECT_LE(r.modes[2].stepSeconds, r.modes[1].stepSeconds);
  EXPECT_LE(r.modes[2].stepSeconds, r.modes[0].stepSeconds);
  EXPECT_DOUBLE_EQ(r.modes[0].speedup, 1.0);
  // Calibrated compute: the baseline then communicates about that share.
  o.commShare = 0.3;
  const simulate::ReplaySimReport cal = simulate::simulateReplay(cluster(2, 4), model, o);
  EXPECT_NEAR(cal.modes[0].commShare, 0.3, 0.02);
}

using testing::expectInvalid;

TEST(SimCluster, ParsesUnitsAndRejectsImpossibleValues) {
  using namespace simulate;
  EXPECT_EQ(parseShape("128x8").ranks(), 1024);
  EXPECT_DOUBLE_EQ(parseLink("25GBps,2us", "--intra").bytesPerSecond, 25e9);
  EXPECT_DOUBLE_EQ(parseLink("25GBps,2us", "--intra").latencySeconds, 2e-6);
  EXPECT_DOUBLE_EQ(parseLink("100Gbps,1.5us", "--inter").bytesPerSecond, 12.5e9);  // bits
  EXPECT_DOUBLE_EQ(parseLink("3 GB/s, 10 us", "--inter").latencySeconds, 10e-6);
  EXPECT_DOUBLE_EQ(parseBandwidth("1GiBps", "--memory"), 1073741824.0);
  expectInvalid([] { parseShape("0x8"); }, "--cluster");
  expectInvalid([] { parseShape("8x0"); }, "--cluster");
  expectInvalid([] { parseShape("8"); }, "--cluster");
  expectInvalid([] { parseShape("-2x4"); }, "--cluster");
  expectInvalid([] { parseLink("0GBps,2us", "--intra"); }, "--intra");
  expectInvalid([] { parseLink("-3GBps,2us", "--inter"); }, "--inter");
  expectInvalid([] { parseLink("3GBps", "--inter"); }, "--inter");
  expectInvalid([] { parseLink("3GBps,-1us", "--inter"); }, "--inter");
  expectInvalid([] { parseLink("3furlongs,1us", "--inter"); }, "--inter");
  expectInvalid([] { parseLink("fast,1us", "--intra"); }, "--intra");
  ClusterSpec c;
  c.memoryBytesPerSecond = 0;
  expectInvalid([&] { validateCluster(c); }, "--memory");
}

TEST(SimCluster, JsonFileAndItsErrors) {
  const std::string path = ::testing::TempDir() + "sim_cluster.json";
  {
    std::ofstream(path) << R"({"nodes": 4, "ranks_per_node": 2, "inter": {"bandwidth": "25Gbps", "latency": "5us"},
                              "memory_bandwidth": "50GBps", "intra_copy_on_cpu": true})";
  }
  const ClusterSpec c = simulate::loadClusterFile(path);
  EXPECT_EQ(c.ranks(), 8);
  EXPECT_DOUBLE_EQ(c.inter.bytesPerSecond, 25e9 / 8);
  EXPECT_DOUBLE_EQ(c.inter.latencySeconds, 5e-6);
  EXPECT_DOUBLE_EQ(c.intra.bytesPerSecond, ClusterSpec{}.intra.bytesPerSecond);  // default kept
  EXPECT_TRUE(c.intraCopyOnCpu);
  { std::ofstream(path) << R"({"nodes": 0, "ranks_per_node": 2})"; }
  expectInvalid([&] { simulate::loadClusterFile(path); }, "nodes");
  { std::ofstream(path) << R"({"nodes": 2, "ranks_per_node": 2, "intra": {"bandwidth": "-1GBps"}})"; }
  expectInvalid([&] { simulate::loadClusterFile(path); }, "intra");
  { std::ofstream(path) << "{not json"; }
  expectInvalid([&] { simulate::loadClusterFile(path); }, path);
  std::remove(path.c_str());
  expectInvalid([&] { simulate::loadClusterFile(path); }, path);
}

TEST(SimCluster, InapplicableAlgorithmIsAClearError) {
  simulate::Simulation sim(cluster(1, 8));
  expectInvalid([&] { sim.add(simAllreduce("hier", 1024)); }, "hier");
  expectInvalid([&] { sim.add(simAllreduce("nonesuch", 1024)); }, "nonesuch");
}

}  // namespace
}  // namespace boostcomm
