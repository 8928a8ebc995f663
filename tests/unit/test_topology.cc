// Topology: layout overrides, the latency-bandwidth fit, the topology file
// and detection on in-process groups (threads of one process = one host).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <tuple>
#include <cstdio>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/topology.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"
#include "topology/layout.h"
#include "topology/probe.h"

namespace bt = boostcomm::topology;
using boostcomm::Error;
using boostcomm::ErrorCategory;
using boostcomm::Topology;

namespace {

// Expects fn to throw Error of `category` whose message contains every `needle`.
template <typename Fn>
void expectError(Fn&& fn, ErrorCategory category, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), category) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in " << e.what();
  }
}

// Sets layout tunables for one test and clears them afterwards.
struct LayoutEnv {
  LayoutEnv(const std::string& perNode, const std::string& layout) {
    if (!perNode.empty()) boostcomm::core::setTunableOverride(boostcomm::core::kTunableRanksPerNode, perNode);
    if (!layout.empty()) boostcomm::core::setTunableOverride(boostcomm::core::kTunableNodeLayout, layout);
  }
  ~LayoutEnv() {
    boostcomm::core::clearTunableOverride(boostcomm::core::kTunableRanksPerNode);
    boostcomm::core::clearTunableOverride(boostcomm::core::kTunableNodeLayout);
  }
};

Topology sampleTopology() {
  Topology t;
  bt::setLayoutFromCounts(t, {3, 1});
  t.hostnames = {"alpha", "beta"};
  t.sockets = {2, 1};
  t.numaNodes = {2, 1};
  t.cores = {32, 16};
  t.intraNode = {1.25, 12.5, 1, true, {{8, 1.25}, {1 << 20, 85.0}}};
  t.interNode = {9.5, 0.118, 2, true, {}};
  t.layoutSource = "BOOSTCOMM_NODE_LAYOUT=3,1";
  return t;
}

}  // namespace

TEST(Layout, ParseExplicit) {
  EXPECT_EQ(bt::parseNodeLayout("3,1", 4, 0, "X"), (std::vector<int>{3, 1}));
  EXPECT_EQ(bt::parseNodeLayout("4", 4, 0, "X"), (std::vector<int>{4}));
  EXPECT_EQ(bt::parseNodeLayout("1,1,1,1", 4, 0, "X"), (std::vector<int>{1, 1, 1, 1}));
}

TEST(Layout, ExplicitBadInput) {
  for (const char* text : {"", "3,", ",3", "3,0", "a,1", "2,-1", "2;2", "2.5,1.5"}) {
    expectError([&] { bt::parseNodeLayout(text, 4, 0, "BOOSTCOMM_NODE_LAYOUT"); }, ErrorCategory::kInvalidArgument,
                {"BOOSTCOMM_NODE_LAYOUT", "summing to 4"});
  }
  expectError([] { bt::parseNodeLayout("3,2", 4, 0, "BOOSTCOMM_NODE_LAYOUT"); }, ErrorCategory::kInvalidArgument,
              {"places 5 ranks", "has 4"});
}

TEST(Layout, Uniform) {
  EXPECT_EQ(bt::uniformLayout(2, 4, 0, "X"), (std::vector<int>{2, 2}));
  EXPECT_EQ(bt::uniformLayout(1, 3, 0, "X"), (std::vector<int>{1, 1, 1}));
  expectError([] { bt::uniformLayout(3, 4, 0, "BOOSTCOMM_RANKS_PER_NODE"); }, ErrorCategory::kInvalidArgument,
              {"BOOSTCOMM_RANKS_PER_NODE=3 does not divide the 4 ranks", "valid: 1, 2, 4"});
  expectError([] { bt::uniformLayout(-2, 4, 0, "R"); }, ErrorCategory::kInvalidArgument, {"does not divide"});
  expectError([] { bt::uniformLayout(8, 4, 0, "R"); }, ErrorCategory::kInvalidArgument, {"does not divide"});
}

TEST(Layout, FromEnv) {
  EXPECT_FALSE(bt::layoutOverrideFromEnv(4, 0).has_value());
  {
    LayoutEnv env("2", "");
    const auto o = bt::layoutOverrideFromEnv(4, 0);
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->ranksPerNode, (std::vector<int>{2, 2}));
    EXPECT_EQ(o->source, "BOOSTCOMM_RANKS_PER_NODE=2");
  }
  {
    LayoutEnv env("", "3,1");
    EXPECT_EQ(bt::layoutOverrideFromEnv(4, 0)->ranksPerNode, (std::vector<int>{3, 1}));
  }
  {
    LayoutEnv env("2", "3,1");
    expectError([] { bt::layoutOverrideFromEnv(4, 0); }, ErrorCategory::kInvalidArgument, {"set only one"});
  }
  {
    LayoutEnv env("two", "");
    expectError([] { bt::layoutOverrideFromEnv(4, 0); }, ErrorCategory::kInvalidArgument, {"not an integer"});
  }
}

TEST(Layout, FromNodeIdsNumbersNodesByLowestRank) {
  Topology t;
  bt::setLayoutFromNodeIds(t, {7, 3, 7, 3, 9});
  EXPECT_EQ(t.nodes, 3);
  EXPECT_EQ(t.ranksPerNode, (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(t.nodeOfRank, (std::vector<int>{0, 1, 0, 1, 2}));
  EXPECT_EQ(t.localRankOfRank, (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(t.ranksOf(1), (std::vector<int>{1, 3}));
}

TEST(Fit, RecoversExactModel) {
  // alpha = 2 us, beta = 10 GB/s = 1e4 bytes/us.
  std::vector<bt::ProbePoint> points;
  for (std::size_t bytes : {8ul, 4096ul, 65536ul, 1ul << 20, 4ul << 20}) points.push_back({bytes, 2.0 + bytes / 1e4});
  const auto m = bt::fitLinkModel(points);
  EXPECT_TRUE(m.measured);
  EXPECT_NEAR(m.latencyUs, 2.0, 1e-6);
  EXPECT_NEAR(m.bandwidthGBps, 10.0, 1e-6);
  EXPECT_NEAR(m.timeUs(1 << 20), 2.0 + (1 << 20) / 1e4, 1e-6);
  EXPECT_EQ(m.samples.size(), points.size());
}

TEST(Fit, NoisyPointsStayClose) {
  // 1 Gbit/s = 0.125 GB/s, 50 us latency, +-5% alternating noise.
  std::vector<bt::ProbePoint> points;
  int i = 0;
  for (std::size_t bytes : {8ul, 4096ul, 65536ul, 1ul << 20, 4ul << 20}) {
    const double t = 50.0 + bytes / 125.0;
    points.push_back({bytes, t * (i++ % 2 ? 1.05 : 0.95)});
  }
  const auto m = bt::fitLinkModel(points);
  EXPECT_NEAR(m.bandwidthGBps, 0.125, 0.125 * 0.1);
  EXPECT_NEAR(m.latencyUs, 50.0, 50.0 * 0.15);
}

TEST(Fit, NegativeInterceptClampsToZero) {
  // Small message faster than the line through the big ones would predict.
  const std::vector<bt::ProbePoint> points{{1000, 0.5}, {2000, 2.0}, {4000, 5.0}};
  const auto m = bt::fitLinkModel(points);
  EXPECT_EQ(m.latencyUs, 0.0);
  EXPECT_GT(m.bandwidthGBps, 0.0);
}

TEST(Fit, BadInput) {
  const std::vector<bt::ProbePoint> one{{8, 1.0}};
  expectError([&] { bt::fitLinkModel(one); }, ErrorCategory::kInvalidArgument, {">= 2 distinct sizes"});
  const std::vector<bt::ProbePoint> same{{8, 1.0}, {8, 1.1}};
  expectError([&] { bt::fitLinkModel(same); }, ErrorCategory::kInvalidArgument, {">= 2 distinct sizes"});
  const std::vector<bt::ProbePoint> zero{{8, 0.0}, {16, 1.0}};
  expectError([&] { bt::fitLinkModel(zero); }, ErrorCategory::kInvalidArgument, {"must be > 0"});
}

TEST(File, JsonRoundTrip) {
  const Topology t = sampleTopology();
  const Topology back = boostcomm::topologyFromJson(boostcomm::topologyToJson(t));
  EXPECT_EQ(back.worldSize, 4);
  EXPECT_EQ(back.nodes, 2);
  EXPECT_EQ(back.ranksPerNode, t.ranksPerNode);
  EXPECT_EQ(back.nodeOfRank, t.nodeOfRank);
  EXPECT_EQ(back.localRankOfRank, t.localRankOfRank);
  EXPECT_EQ(back.hostnames, t.hostnames);
  EXPECT_EQ(back.sockets, t.sockets);
  EXPECT_EQ(back.numaNodes, t.numaNodes);
  EXPECT_EQ(back.cores, t.cores);
  EXPECT_EQ(back.layoutSource, t.layoutSource);
  EXPECT_DOUBLE_EQ(back.intraNode.latencyUs, 1.25);
  EXPECT_DOUBLE_EQ(back.intraNode.bandwidthGBps, 12.5);
  EXPECT_EQ(back.intraNode.samples.size(), 2u);
  EXPECT_EQ(back.intraNode.samples[1].bytes, std::size_t{1} << 20);
  EXPECT_DOUBLE_EQ(back.interNode.bandwidthGBps, 0.118);
  EXPECT_EQ(back.interNode.hops, 2);
  EXPECT_TRUE(back.interNode.measured);
  EXPECT_TRUE(boostcomm::topologyDifferences(back, t).empty());
}

TEST(File, SaveLoad) {
  const std::string path = ::testing::TempDir() + "/bc_topology_test.json";
  boostcomm::saveTopology(sampleTopology(), path);
  const Topology back = boostcomm::loadTopology(path);
  EXPECT_EQ(back.hostnames, (std::vector<std::string>{"alpha", "beta"}));
  std::remove(path.c_str());
  expectError([&] { boostcomm::loadTopology(path); }, ErrorCategory::kInvalidArgument, {"cannot read", path});
}

TEST(File, Invalid) {
  std::string good = boostcomm::topologyToJson(sampleTopology());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  expectError([] { boostcomm::topologyFromJson("{not json"); }, ErrorCategory::kInvalidArgument, {"not valid"});
  expectError([] { boostcomm::topologyFromJson("{}"); }, ErrorCategory::kInvalidArgument, {"not a topology file"});
  expectError([&] { boostcomm::topologyFromJson(replaced("\"version\": 1", "\"version\": 9")); },
              ErrorCategory::kInvalidArgument, {"version 9"});
  expectError([&] { boostcomm::topologyFromJson(replaced("\"world_size\": 4", "\"world_size\": 5")); },
              ErrorCategory::kInvalidArgument, {"rank 4 is on no node"});
  expectError([&] { boostcomm::topologyFromJson(replaced("\"world_size\": 4", "\"world_size\": 3")); },
              ErrorCategory::kInvalidArgument, {"outside 0..2"});
}

TEST(File, DifferencesListEveryMismatch) {
  const Topology file = sampleTopology();  // 3,1
  Topology job;
  bt::setLayoutFromCounts(job, {2, 2, 2});
  const auto d = boostcomm::topologyDifferences(file, job);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], "rank count: file 4, job 6");
  EXPECT_EQ(d[1], "node count: file 2, job 3");
  EXPECT_EQ(d[2], "ranks per node: file 3,1, job 2,2,2");

  Topology same;
  bt::setLayoutFromCounts(same, {3, 1});
  EXPECT_TRUE(boostcomm::topologyDifferences(file, same).empty());
  Topology interleaved;
  bt::setLayoutFromNodeIds(interleaved, {0, 0, 1, 0});
  const auto p = boostcomm::topologyDifferences(file, interleaved);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("rank placement"), std::string::npos) << p[0];
}

// Detection on threads: every rank agrees, the declared layout is used, and
// the probes measured something plausible.
TEST(Detect, InProcessDeclaredLayout) {
  for (const auto& [perNode, layout, expected] :
       std::vector<std::tuple<std::string, std::string, std::vector<int>>>{
           {"", "", {4}}, {"2", "", {2, 2}}, {"", "3,1", {3, 1}}, {"1", "", {1, 1, 1, 1}}}) {
    LayoutEnv env(perNode, layout);
    std::vector<Topology> results(4);
    boostcomm::detail::runInProcess(4, [&](boostcomm::Communicator& comm) {
      boostcomm::DetectOptions options;
      options.probeSizesBytes = {8, 1 << 20};
      results[static_cast<std::size_t>(comm.rank())] = boostcomm::detectTopology(comm, options);
    });
    const Topology& t = results[0];
    EXPECT_EQ(t.ranksPerNode, expected) << perNode << layout;
    EXPECT_EQ(t.intraNode.measured, expected[0] >= 2);
    EXPECT_EQ(t.interNode.measured, expected.size() >= 2);
    if (t.intraNode.measured) {
      EXPECT_GT(t.intraNode.bandwidthGBps, 0.0);
    }
    EXPECT_EQ(t.intraNode.hops, 1);
    EXPECT_EQ(t.interNode.hops, 2);
    EXPECT_GE(t.cores[0], 1);
    for (const Topology& other : results) {
      EXPECT_EQ(boostcomm::topologyToJson(other), boostcomm::topologyToJson(t)) << "ranks disagree";
    }
  }
}

TEST(Detect, BadOverrideIsAnError) {
  // Raised by detection, or earlier by a communicator that reads the layout itself.
  LayoutEnv env("3", "");
  expectError([] { boostcomm::detail::runInProcess(4, [](boostcomm::Communicator& comm) { boostcomm::detectTopology(comm); }); },
              ErrorCategory::kInvalidArgument, {"BOOSTCOMM_RANKS_PER_NODE", "3"});
}

TEST(Fit, FlatTimesStillGiveABandwidth) {
  const std::vector<bt::ProbePoint> points{{8, 5.0}, {1 << 16, 4.0}};
  const auto m = bt::fitLinkModel(points);
  EXPECT_DOUBLE_EQ(m.latencyUs, 5.0);
  EXPECT_NEAR(m.bandwidthGBps, (1 << 16) / 4.0 * 1e-3, 1e-9);
}
