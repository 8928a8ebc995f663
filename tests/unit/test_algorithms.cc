// Static checks of every algorithm's schedules, for world sizes far beyond
// what the in-process tests run (up to 64 ranks): each builder's schedules
// must validate, and across all ranks every send must have exactly one
// matching receive (same source, destination, tag and byte count).
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "algorithms/node_layout.h"
#include "algorithms/registry.h"
#include "algorithms/selection.h"
#include "boostcomm/error.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {
namespace {

using executor::Schedule;
using executor::StepKind;

struct Case {
  Collective collective;
  std::size_t count;
  int size;
};

CollectiveSpec specFor(const Case& c, int rank, ReduceOp op) {
  CollectiveSpec s;
  s.collective = c.collective;
  s.dtype = DataType::kFloat32;
  s.op = op;
  s.count = c.count;
  s.rank = rank;
  s.size = c.size;
  s.root = c.size > 1 ? 1 : 0;
  s.chunkBytes = 4096;  // many chunks even for small counts: exercises pipelining
  s.maxChunks = 8;
  return s;
}

// (from, to, tag) -> list of byte counts, in posting order.
using Traffic = std::map<std::tuple<int, int, int>, std::vector<std::size_t>>;

// World rank of `peer` on communicator `comm` as seen from world rank `self`.
int worldRank(const NodeLayout* layout, std::uint8_t comm, int self, int peer) {
  if (comm == executor::kWorldComm) return peer;
  const int node = layout->nodeOfRank[static_cast<std::size_t>(self)];
  const int local = layout->localRankOf[static_cast<std::size_t>(self)];
  const auto& nodeMembers = layout->members[static_cast<std::size_t>(node)];
  if (comm == executor::kIntraComm) {
    if (peer < 0 || peer >= static_cast<int>(nodeMembers.size())) return -1000 - peer;  // reported by the caller
    return nodeMembers[static_cast<std::size_t>(peer)];
  }
  if (peer < 0 || peer >= layout->nodes()) return -1000 - peer;
  return layout->members[static_cast<std::size_t>(peer)][static_cast<std::size_t>(local)];
}

void checkMatching(const AlgorithmInfo& algo, const Case& c, ReduceOp op, const NodeLayout* layout = nullptr) {
  Traffic sends;
  Traffic recvs;
  for (int r = 0; r < c.size; ++r) {
    CollectiveSpec spec = specFor(c, r, op);
    spec.layout = layout;
    if (!algo.unsupportedReason(spec).empty()) return;
    Schedule schedule(spec.collective, spec.dtype, spec.op, algo.name);
    algo.build(spec, schedule);
    ASSERT_NO_THROW(schedule.validate(c.size)) << schedule.toString();
    for (const auto& step : schedule.steps()) {
      if (step.kind != StepKind::kSend && step.kind != StepKind::kRecv) continue;
      // Tags are per communicator: fold the communicator into the key.
      const int peer = worldRank(layout, step.comm, r, step.peer);
      if (peer < 0) {
        ADD_FAILURE() << algo.name << " rank " << r << ": peer " << step.peer << " outside communicator "
                      << int(step.comm) << "\n" << schedule.toString();
        return;
      }
      const int tag = step.tag + executor::kMaxStepTag * step.comm;
      if (step.kind == StepKind::kSend) sends[{r, peer, tag}].push_back(step.bytes);
      if (step.kind == StepKind::kRecv) recvs[{peer, r, tag}].push_back(step.bytes);
      EXPECT_NE(peer, r) << algo.name << " sends to itself";
    }
  }
  EXPECT_EQ(sends, recvs) << toString(c.collective) << "/" << algo.name << " n=" << c.size << " count=" << c.count;
}

TEST(AlgorithmSchedules, SendsAndReceivesMatchUpTo64Ranks) {
  const std::vector<int> sizes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 64};
  const std::vector<std::size_t> counts = {0, 1, 7, 1000, 65537};
  for (const AlgorithmInfo& algo : allAlgorithms()) {
    if (std::string(algo.name) == "native") continue;  // one backend call, nothing to match
    for (int n : sizes) {
      for (std::size_t count : counts) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          checkMatching(algo, Case{algo.collective, count, n}, op);
        }
      }
    }
  }
}

TEST(AlgorithmSchedules, HierarchicalSendsAndReceivesMatch) {
  // Uniform layouts, with consecutive and with interleaved rank placement.
  std::vector<std::vector<long long>> layouts = {{0, 0, 1, 1}, {0, 1, 0, 1}, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}};
  std::vector<long long> big;
  for (int r = 0; r < 64; ++r) big.push_back(r / 8);
  layouts.push_back(big);
  for (const auto& ids : layouts) {
    const NodeLayout layout = layoutFromNodeIds(ids);
    const int n = static_cast<int>(ids.size());
    for (const AlgorithmInfo& algo : allAlgorithms()) {
      if (!isHierarchical(algo)) continue;
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{65537}}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          checkMatching(algo, Case{algo.collective, count, n}, op, &layout);
        }
      }
    }
  }
}

TEST(AlgorithmSchedules, RingPipelinesIntoChunks) {
  CollectiveSpec spec = specFor(Case{Collective::kAllreduce, 1 << 16, 4}, 0, ReduceOp::kSum);
  Schedule schedule(spec.collective, spec.dtype, spec.op, "ring");
  buildAllreduceRing(spec, schedule);
  std::size_t sends = 0;
  for (const auto& s : schedule.steps()) sends += s.kind == StepKind::kSend;
  // 2(n-1) ring steps, each cut into maxChunks chunks (segment 64 KiB > 8 x 4 KiB).
  EXPECT_EQ(sends, std::size_t{2 * 3 * 8});
}

TEST(AlgorithmSchedules, NativeChunksBeyondIntRange) {
  CollectiveSpec spec = specFor(Case{Collective::kAllreduce, (std::size_t{1} << 31) + 5, 2}, 0, ReduceOp::kAvg);
  Schedule schedule(spec.collective, spec.dtype, spec.op, "native");
  buildNative(spec, schedule);
  std::size_t natives = 0;
  std::size_t covered = 0;
  for (const auto& s : schedule.steps()) {
    if (s.kind != StepKind::kNative) continue;
    ++natives;
    EXPECT_EQ(s.native.elementOffset, covered);
    EXPECT_LE(s.native.count, std::size_t{1} << 30);
    covered += s.native.count;
  }
  EXPECT_EQ(natives, 3u);
  EXPECT_EQ(covered, spec.count);
  EXPECT_EQ(schedule.steps().back().kind, StepKind::kDivide);
}

TEST(AlgorithmSchedules, PowerOfTwoOnlyAlgorithmsSayWhy) {
  const AlgorithmInfo* rd = findAlgorithm(Collective::kAllgather, "rd");
  ASSERT_NE(rd, nullptr);
  const std::string why = rd->unsupportedReason(specFor(Case{Collective::kAllgather, 10, 3}, 0, ReduceOp::kSum));
  EXPECT_NE(why.find("power-of-two"), std::string::npos) << why;
  EXPECT_TRUE(rd->unsupportedReason(specFor(Case{Collective::kAllgather, 10, 4}, 0, ReduceOp::kSum)).empty());
}

// The table's rule for `bytes` ("native" when none matches), as the selection map lays it down.
std::string tableChoice(const SelectionTable& t, Collective coll, std::size_t bytes) {
  for (const SelectionRule& r : t.rules(coll)) {
    if (bytes >= r.minBytes && bytes <= r.maxBytes) return r.algorithm;
  }
  return "native";
}

TEST(Selection, BuiltInTableAndOverrides) {
  SelectionTable t = SelectionTable::builtIn();
  EXPECT_EQ(tableChoice(t, Collective::kAllreduce, 8), "native");
  t.applyOverride("allreduce:0-1023=rd;1024-=rhd|broadcast:0-=binomial");
  EXPECT_EQ(tableChoice(t, Collective::kAllreduce, 1023), "rd");
  EXPECT_EQ(tableChoice(t, Collective::kAllreduce, 1024), "rhd");
  EXPECT_EQ(tableChoice(t, Collective::kBroadcast, 1 << 30), "binomial");
  EXPECT_EQ(tableChoice(t, Collective::kAllgather, 5), "native");
}

TEST(Selection, BadOverridesNameTheProblem) {
  SelectionTable t = SelectionTable::builtIn();
  try {
    t.applyOverride("allreduce:0-=fastest");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fastest"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ring"), std::string::npos) << "lists valid names: " << e.what();
  }
  EXPECT_THROW(t.applyOverride("allreduce:abc-=ring"), Error);
  EXPECT_THROW(t.applyOverride("gather:0-=ring"), Error);
  EXPECT_THROW(parseAlgoOverride("allreduce:nope"), Error);
  EXPECT_THROW(parseAlgoOverride("nope"), Error);
  const auto parsed = parseAlgoOverride("ring");
  EXPECT_EQ(parsed[static_cast<int>(Collective::kAllreduce)], "ring");
  EXPECT_EQ(parsed[static_cast<int>(Collective::kAllgather)], "ring");
  EXPECT_EQ(parsed[static_cast<int>(Collective::kBroadcast)], "");
}

}  // namespace
}  // namespace boostcomm::algorithms
