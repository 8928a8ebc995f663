// planFusion (src/planner/fusion_plan.h): exhaustive over every set of three
// requests drawn from a 14-request alphabet with every acyclic dependency set
// between them, randomised (seeded) batches of up to 40 requests, and the
// bad-input rejections. Properties are checked against an independent
// reference (transitive closure and longest-path levels computed here):
//   - every request is in exactly one group;
//   - a group holds only compatible requests (kind, dtype, op, root) with no
//     dependency path between any two of them;
//   - the launch order is topological (every dependency points backwards);
//   - with fusion on and no size limit, requests of one class on one level
//     share a group (nothing fusable is left unfused);
//   - the packed offsets are the prefix sums of the members' unit counts;
//   - planning is deterministic (same inputs, same plan and text).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "boostcomm/error.h"
#include "planner/fusion_plan.h"

namespace {

using namespace boostcomm;
using planner::Dependency;
using planner::FusionOptions;
using planner::FusionPlan;
using planner::RequestInfo;

// Requests get disjoint buffers (1 MiB apart) so the memory checks pass.
RequestInfo makeRequest(Collective kind, DataType dtype, ReduceOp op, int root, std::size_t count, int world,
                        std::size_t index) {
  RequestInfo r;
  r.kind = kind;
  r.dtype = dtype;
  r.op = op;
  r.root = root;
  r.sendCount = kind == Collective::kReduceScatter ? count * static_cast<std::size_t>(world) : count;
  r.recvCapacity = kind == Collective::kAllgather ? count * static_cast<std::size_t>(world) : count;
  r.sendAddress = 0x10000000 + index * (2u << 20);
  r.recvAddress = r.kind == Collective::kBroadcast ? r.sendAddress : r.sendAddress + (1u << 20);
  return r;
}

std::vector<RequestInfo> alphabet(int world) {
  std::vector<RequestInfo> a;
  for (DataType dtype : {DataType::kFloat32, DataType::kInt32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      a.push_back(makeRequest(Collective::kAllreduce, dtype, op, 0, 5, world, 0));
      a.push_back(makeRequest(Collective::kReduceScatter, dtype, op, 0, 3, world, 0));
    }
    a.push_back(makeRequest(Collective::kAllgather, dtype, ReduceOp::kSum, 0, 4, world, 0));
    for (int root : {0, 1}) a.push_back(makeRequest(Collective::kBroadcast, dtype, ReduceOp::kSum, root, 6, world, 0));
  }
  return a;
}

using Closure = std::vector<std::vector<bool>>;

Closure closure(std::size_t n, const std::vector<Dependency>& deps) {
  Closure reach(n, std::vector<bool>(n, false));
  for (const Dependency& d : deps) reach[d.before][d.after] = true;
  for (std::size_t k = 0; k < n; ++k)  // Floyd-Warshall
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (reach[i][k] && reach[k][j]) reach[i][j] = true;
  return reach;
}

bool hasCycle(const Closure& reach) {
  for (std::size_t i = 0; i < reach.size(); ++i)
    if (reach[i][i]) return true;
  return false;
}

std::vector<int> levels(std::size_t n, const Closure& reach, const std::vector<Dependency>& deps) {
  // Longest path by relaxation n times (fine for small n; independent of the planner's Kahn pass).
  std::vector<int> level(n, 0);
  for (std::size_t round = 0; round < n; ++round)
    for (const Dependency& d : deps) level[d.after] = std::max(level[d.after], level[d.before] + 1);
  (void)reach;
  return level;
}

auto classOf(const RequestInfo& r) {
  const bool reducing = r.kind == Collective::kAllreduce || r.kind == Collective::kReduceScatter;
  return std::make_tuple(r.kind, r.dtype, reducing ? r.op : ReduceOp::kSum,
                         r.kind == Collective::kBroadcast ? r.root : -1);
}

void checkPlan(const std::vector<RequestInfo>& requests, const std::vector<Dependency>& deps, int world,
               const FusionOptions& options, const std::string& context) {
  SCOPED_TRACE(context);
  const std::size_t n = requests.size();
  const FusionPlan plan = planner::planFusion(requests, deps, world, options);
  const Closure reach = closure(n, deps);
  const std::vector<int> level = levels(n, reach, deps);
  ASSERT_EQ(plan.groupOf.size(), n);
  EXPECT_EQ(plan.launchesBefore, n);
  EXPECT_EQ(plan.launchesAfter, plan.groups.size());
  std::vector<int> seen(n, 0);
  std::set<std::tuple<int, Collective, DataType, ReduceOp, int>> classesPerLevel;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const planner::FusionGroup& group = plan.groups[g];
    ASSERT_FALSE(group.requests.empty());
    ASSERT_EQ(group.offsets.size(), group.requests.size());
    std::size_t offset = 0;
    for (std::size_t m = 0; m < group.requests.size(); ++m) {
      const std::size_t i = group.requests[m];
      ++seen[i];
      EXPECT_EQ(plan.groupOf[i], g);
      EXPECT_EQ(classOf(requests[i]), classOf(requests[group.requests[0]])) << "incompatible requests fused";
      EXPECT_EQ(group.offsets[m], offset);
      offset += planner::unitCountOf(requests[i], world);
      for (std::size_t j : group.requests) EXPECT_FALSE(reach[i][j]) << "dependent requests " << i << ", " << j << " fused";
    }
    EXPECT_EQ(group.unitCount, offset);
    for (std::size_t d : group.dependsOn) EXPECT_LT(d, g) << "group depends on a later launch";
    const auto c = classOf(requests[group.requests[0]]);
    classesPerLevel.insert(std::tuple_cat(std::make_tuple(level[group.requests[0]]), c));
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "request " << i;
  for (const Dependency& d : deps) {
    EXPECT_LT(plan.groupOf[d.before], plan.groupOf[d.after]) << d.before << " -> " << d.after;
    const auto& dependsOn = plan.groups[plan.groupOf[d.after]].dependsOn;
    EXPECT_TRUE(std::find(dependsOn.begin(), dependsOn.end(), plan.groupOf[d.before]) != dependsOn.end());
  }
  if (options.fuse && options.maxGroupBytes == 0) {
    EXPECT_EQ(plan.groups.size(), classesPerLevel.size());
  }
  if (!options.fuse) {
    EXPECT_EQ(plan.groups.size(), n);
  }
  if (options.maxGroupBytes > 0) {
    for (const planner::FusionGroup& group : plan.groups) {
      if (group.requests.size() > 1) {
        EXPECT_LE(group.unitCount * dataTypeSize(group.dtype), options.maxGroupBytes);
      }
    }
  }
  // Deterministic: a second planning gives the same plan and the same text.
  const FusionPlan again = planner::planFusion(requests, deps, world, options);
  EXPECT_EQ(planner::describeFusionPlan(plan, requests), planner::describeFusionPlan(again, requests));
  EXPECT_EQ(plan.groupOf, again.groupOf);
}

TEST(PlannerFusion, ExhaustiveThreeRequestsAllAcyclicDependencies) {
  const int world = 3;
  const std::vector<RequestInfo> a = alphabet(world);
  const std::pair<std::size_t, std::size_t> pairs[] = {{0, 1}, {0, 2}, {1, 2}};
  std::size_t plans = 0;
  for (std::size_t x = 0; x < a.size(); ++x) {
    for (std::size_t y = 0; y < a.size(); ++y) {
      for (std::size_t z = 0; z < a.size(); ++z) {
        std::vector<RequestInfo> requests = {a[x], a[y], a[z]};
        for (std::size_t i = 0; i < 3; ++i) requests[i] = makeRequest(requests[i].kind, requests[i].dtype,
                                                                      requests[i].op, requests[i].root,
                                                                      planner::unitCountOf(requests[i], world), world, i);
        // Every subset of edges, each in either direction, that stays acyclic.
        for (int mask = 0; mask < 27; ++mask) {
          std::vector<Dependency> deps;
          int m = mask;
          for (const auto& [i, j] : pairs) {
            const int state = m % 3;  // 0 none, 1 i->j, 2 j->i
            m /= 3;
            if (state == 1) deps.push_back({i, j});
            if (state == 2) deps.push_back({j, i});
          }
          const bool cyclic = hasCycle(closure(3, deps));
          const std::string context = "requests " + std::to_string(x) + "," + std::to_string(y) + "," +
                                      std::to_string(z) + " mask " + std::to_string(mask);
          if (cyclic) {
            EXPECT_THROW(planner::planFusion(requests, deps, world, {}), Error) << context;
            continue;
          }
          checkPlan(requests, deps, world, FusionOptions{}, context);
          checkPlan(requests, deps, world, FusionOptions{false, 0}, context + " unfused");
          ++plans;
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
  EXPECT_GT(plans, 50000u);
}

TEST(PlannerFusion, RandomisedBatches) {
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    std::mt19937 rng(seed);
    const int world = 1 + static_cast<int>(rng() % 5);
    const std::vector<RequestInfo> a = alphabet(2);
    const std::size_t n = rng() % 41;
    std::vector<RequestInfo> requests;
    for (std::size_t i = 0; i < n; ++i) {
      const RequestInfo& pick = a[rng() % a.size()];
      const std::size_t count = rng() % 4 == 0 ? 0 : rng() % 3000;
      requests.push_back(makeRequest(pick.kind, pick.dtype, pick.op, pick.root % world, count, world, i));
    }
    std::vector<Dependency> deps;
    const double density = (rng() % 4) * 0.05;
    std::bernoulli_distribution edge(density);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j)
        if (edge(rng)) deps.push_back({i, j});
    std::shuffle(deps.begin(), deps.end(), rng);
    const std::size_t maxBytes = rng() % 3 == 0 ? 1 + rng() % 20000 : 0;
    checkPlan(requests, deps, world, FusionOptions{true, maxBytes}, "seed " + std::to_string(seed));
    if (::testing::Test::HasFailure()) return;
    // A back edge from the last to the first request of a path closes a cycle.
    if (!deps.empty()) {
      std::vector<Dependency> cyclic = deps;
      cyclic.push_back({deps[0].after, deps[0].before});
      EXPECT_THROW(planner::planFusion(requests, cyclic, world, {}), Error) << "seed " << seed;
    }
  }
}

void expectInvalid(const std::vector<RequestInfo>& requests, const std::vector<Dependency>& deps, int world,
                   const std::string& needle) {
  try {
    planner::planFusion(requests, deps, world, {}, 1);
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(e.detail().find(needle), std::string::npos) << e.detail();
  }
}

TEST(PlannerFusion, BadInput) {
  const int world = 2;
  auto ar = makeRequest(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 10, world, 0);
  auto ag = makeRequest(Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 10, world, 1);
  auto bc = makeRequest(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 10, world, 2);
  auto rs = makeRequest(Collective::kReduceScatter, DataType::kFloat32, ReduceOp::kSum, 0, 10, world, 3);

  auto small = ag;
  small.recvCapacity = 19;
  expectInvalid({ar, small}, {}, world, "receive buffer holds 19 elements, the result needs 20");
  auto smallRs = rs;
  smallRs.recvCapacity = 9;
  expectInvalid({smallRs}, {}, world, "receive buffer holds 9");
  auto odd = rs;
  odd.sendCount = 21;
  expectInvalid({odd}, {}, world, "not a multiple");
  auto badRoot = bc;
  badRoot.root = 2;
  expectInvalid({badRoot}, {}, world, "root 2");
  auto intAvg = makeRequest(Collective::kAllreduce, DataType::kInt32, ReduceOp::kAvg, 0, 4, world, 4);
  expectInvalid({intAvg}, {}, world, "avg needs a floating-point dtype");
  auto barrier = ar;
  barrier.kind = Collective::kBarrier;
  expectInvalid({barrier}, {}, world, "barrier");
  expectInvalid({ar, ag}, {{0, 5}}, world, "does not exist");
  expectInvalid({ar, ag}, {{1, 1}}, world, "depends on itself");
  expectInvalid({ar, ag, bc}, {{0, 1}, {1, 2}, {2, 0}}, world, "dependency cycle among requests 0, 1, 2");

  // Two writers of overlapping memory: rejected unless ordered by a dependency.
  auto twin = ar;
  twin.sendAddress += 4096;
  twin.recvAddress = ar.recvAddress + 8;
  expectInvalid({ar, twin}, {}, world, "write overlapping memory");
  EXPECT_NO_THROW(planner::planFusion(std::vector{ar, twin}, std::vector<Dependency>{{0, 1}}, world, {}));
  // A reader of memory another request writes, without a dependency: a race.
  auto reader = ag;
  reader.sendAddress = ar.recvAddress;
  expectInvalid({ar, reader}, {}, world, "reads memory that request 0 writes");
  const FusionPlan ordered = planner::planFusion(std::vector{ar, reader}, std::vector<Dependency>{{0, 1}}, world, {});
  EXPECT_EQ(ordered.groups.size(), 2u);
  // In place is not a conflict: an allreduce reading and writing its own buffer.
  auto inPlace = ar;
  inPlace.sendAddress = inPlace.recvAddress;
  EXPECT_NO_THROW(planner::planFusion(std::vector{inPlace}, std::vector<Dependency>{}, world, {}));
}

TEST(PlannerFusion, ThreeRequestPatternAndDescription) {
  // AllGather of activations, AllReduce of gradients (two tensors), Broadcast of
  // parameters that read the reduced gradients.
  const int world = 4;
  std::vector<RequestInfo> r = {
      makeRequest(Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 100, world, 0),
      makeRequest(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 1000, world, 1),
      makeRequest(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 500, world, 2),
      makeRequest(Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 50, world, 3),
      makeRequest(Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 100, world, 4)};
  const std::vector<Dependency> deps = {{1, 3}};
  const FusionPlan plan = planner::planFusion(r, deps, world, {});
  EXPECT_EQ(plan.launchesBefore, 5u);
  EXPECT_EQ(plan.launchesAfter, 3u);  // {0,4} allgather, {1,2} allreduce, {3} broadcast after the allreduce
  EXPECT_EQ(plan.groups[0].requests, (std::vector<std::size_t>{0, 4}));
  EXPECT_EQ(plan.groups[1].requests, (std::vector<std::size_t>{1, 2}));
  EXPECT_EQ(plan.groups[2].dependsOn, (std::vector<std::size_t>{1}));
  const std::string text = planner::describeFusionPlan(plan, r);
  EXPECT_NE(text.find("5 requests -> 3 collectives (was 5)"), std::string::npos) << text;
  EXPECT_NE(text.find("after launch 1"), std::string::npos) << text;
  // Signatures see counts and dependencies, not addresses.
  auto moved = r;
  moved[0].sendAddress += 64;
  EXPECT_EQ(planner::requestListSignature(r, deps), planner::requestListSignature(moved, deps));
  moved[0].sendCount += 1;
  EXPECT_NE(planner::requestListSignature(r, deps), planner::requestListSignature(moved, deps));
  EXPECT_NE(planner::requestListSignature(r, deps), planner::requestListSignature(r, {}));
}

}  // namespace
