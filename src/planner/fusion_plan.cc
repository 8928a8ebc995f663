#include "planner/fusion_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/check.h"
#include "core/hash.h"

namespace boostcomm::planner {
namespace {

bool reducing(Collective kind) { return kind == Collective::kAllreduce || kind == Collective::kReduceScatter; }

// Byte range [begin, end) a request reads or writes on this rank.
struct Range {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool overlaps(const Range& other) const { return begin < other.end && other.begin < end; }
};

Range writeRange(const RequestInfo& r, int worldSize) {
  const std::size_t bytes = resultCount(r, worldSize) * dataTypeSize(r.dtype);
  return {r.recvAddress, r.recvAddress + bytes};
}

Range readRange(const RequestInfo& r) {
  const std::uintptr_t base = r.kind == Collective::kBroadcast ? r.recvAddress : r.sendAddress;
  return {base, base + r.sendCount * dataTypeSize(r.dtype)};
}

void checkCounts(const RequestInfo& r, std::size_t index, int worldSize, int rank) {
  const std::size_t need = resultCount(r, worldSize);
  BC_INVALID(r.recvCapacity >= need, rank,
             "request " << index << " (" << toString(r.kind) << "): receive buffer holds " << r.recvCapacity
                        << " elements, the result needs " << need);
  if (r.kind == Collective::kBroadcast) {
    BC_INVALID(r.root >= 0 && r.root < worldSize, rank,
               "request " << index << " (broadcast): root " << r.root << " is not a rank of a " << worldSize
                          << "-rank communicator");
  }
  BC_INVALID(r.op != ReduceOp::kAvg || !reducing(r.kind) || isFloatingPoint(r.dtype), rank,
             "request " << index << " (" << toString(r.kind) << "): op avg needs a floating-point dtype, got "
                        << toString(r.dtype));
}

// Kahn's algorithm in request order; returns the longest-chain level of every
// request, or throws naming the requests on a cycle.
std::vector<int> levelsOf(std::size_t n, std::span<const Dependency> deps, int rank) {
  std::vector<std::vector<std::size_t>> next(n);
  std::vector<std::size_t> indegree(n, 0);
  for (const Dependency& d : deps) {
    next[d.before].push_back(d.after);
    ++indegree[d.after];
  }
  std::vector<int> level(n, 0);
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push_back(i);
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::size_t i = ready.back();
    ready.pop_back();
    ++done;
    for (std::size_t j : next[i]) {
      level[j] = std::max(level[j], level[i] + 1);
      if (--indegree[j] == 0) ready.push_back(j);
    }
  }
  if (done != n) {
    std::ostringstream cycle;
    for (std::size_t i = 0, shown = 0; i < n && shown < 8; ++i)
      if (indegree[i] > 0) cycle << (shown++ ? ", " : "") << i;
    core::raise(ErrorCategory::kInvalidArgument, rank,
                "dependency cycle among requests " + cycle.str() + " (and the requests they wait for)");
  }
  return level;
}

// reach[i][j]: a dependency path leads from i to j (i != j). Filled in level
// order so every predecessor row is final before it is merged.
std::vector<std::vector<bool>> reachability(std::size_t n, std::span<const Dependency> deps,
                                            const std::vector<int>& level) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return level[a] > level[b]; });
  std::vector<std::vector<std::size_t>> next(n);
  for (const Dependency& d : deps) next[d.before].push_back(d.after);
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (std::size_t i : order) {  // successors (higher level) first
    for (std::size_t j : next[i]) {
      reach[i][j] = true;
      for (std::size_t k = 0; k < n; ++k)
        if (reach[j][k]) reach[i][k] = true;
    }
  }
  return reach;
}

void checkMemory(std::span<const RequestInfo> requests, int worldSize, const std::vector<std::vector<bool>>& reach,
                 int rank) {
  const std::size_t n = requests.size();
  for (std::size_t a = 0; a < n; ++a) {
    const Range wa = writeRange(requests[a], worldSize);
    if (wa.begin == wa.end) continue;
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b || reach[a][b] || reach[b][a]) continue;
      const Range wb = writeRange(requests[b], worldSize);
      BC_INVALID(b < a || !wa.overlaps(wb), rank,
                 "requests " << a << " and " << b << " write overlapping memory and neither depends on the other");
      BC_INVALID(!wa.overlaps(readRange(requests[b])), rank,
                 "request " << b << " reads memory that request " << a
                            << " writes, without a dependency between them (add dependsOn(" << b << ", " << a
                            << ") or use separate buffers)");
    }
  }
}

}  // namespace

std::size_t resultCount(const RequestInfo& r, int worldSize) {
  const std::size_t world = static_cast<std::size_t>(worldSize);
  switch (r.kind) {
    case Collective::kAllgather: return r.sendCount * world;
    case Collective::kReduceScatter: return r.sendCount / world;
    default: return r.sendCount;
  }
}

std::size_t unitCountOf(const RequestInfo& r, int worldSize) {
  return r.kind == Collective::kReduceScatter ? r.sendCount / static_cast<std::size_t>(worldSize) : r.sendCount;
}

FusionPlan planFusion(std::span<const RequestInfo> requests, std::span<const Dependency> dependencies,
                      int worldSize, const FusionOptions& options, int rank) {
  BC_INVALID(worldSize >= 1, rank, "worldSize must be >= 1, got " << worldSize);
  const std::size_t n = requests.size();
  for (std::size_t i = 0; i < n; ++i) {
    const RequestInfo& r = requests[i];
    BC_INVALID(r.kind != Collective::kBarrier, rank, "request " << i << ": barrier cannot be fused");
    BC_INVALID(r.kind != Collective::kReduceScatter || r.sendCount % static_cast<std::size_t>(worldSize) == 0, rank,
               "request " << i << " (reduce_scatter): send count " << r.sendCount << " is not a multiple of the "
                          << worldSize << " ranks");
    checkCounts(r, i, worldSize, rank);
  }
  for (const Dependency& d : dependencies) {
    BC_INVALID(d.before < n && d.after < n, rank,
               "dependency " << d.after << " -> " << d.before << " names a request that does not exist (" << n
                             << " requests)");
    BC_INVALID(d.before != d.after, rank, "dependency cycle: request " << d.after << " depends on itself");
  }
  const std::vector<int> level = levelsOf(n, dependencies, rank);
  checkMemory(requests, worldSize, reachability(n, dependencies, level), rank);

  FusionPlan plan;
  plan.groupOf.assign(n, 0);
  plan.launchesBefore = n;
  for (int l : level) plan.levels = std::max(plan.levels, l + 1);
  for (int l = 0; l < plan.levels; ++l) {
    // Open group per compatibility class on this level.
    std::map<std::tuple<int, int, int, int>, std::size_t> open;
    for (std::size_t i = 0; i < n; ++i) {
      if (level[i] != l) continue;
      const RequestInfo& r = requests[i];
      const auto key = std::make_tuple(static_cast<int>(r.kind), static_cast<int>(r.dtype),
                                       reducing(r.kind) ? static_cast<int>(r.op) : -1,
                                       r.kind == Collective::kBroadcast ? r.root : -1);
      const std::size_t count = unitCountOf(r, worldSize);
      auto it = open.find(key);
      if (it != open.end()) {
        const FusionGroup& g = plan.groups[it->second];
        const std::size_t es = dataTypeSize(r.dtype);
        const bool tooBig = options.maxGroupBytes > 0 && (g.unitCount + count) * es > options.maxGroupBytes;
        if (!options.fuse || tooBig) open.erase(it), it = open.end();
      }
      if (it == open.end()) {
        FusionGroup g;
        g.kind = r.kind;
        g.dtype = r.dtype;
        g.op = reducing(r.kind) ? r.op : ReduceOp::kSum;
        g.root = r.kind == Collective::kBroadcast ? r.root : 0;
        g.level = l;
        plan.groups.push_back(std::move(g));
        it = open.emplace(key, plan.groups.size() - 1).first;
      }
      FusionGroup& g = plan.groups[it->second];
      g.requests.push_back(i);
      g.offsets.push_back(g.unitCount);
      g.unitCount += count;
      plan.groupOf[i] = it->second;
    }
  }
  for (const Dependency& d : dependencies) plan.groups[plan.groupOf[d.after]].dependsOn.push_back(plan.groupOf[d.before]);
  for (FusionGroup& g : plan.groups) {
    std::sort(g.dependsOn.begin(), g.dependsOn.end());
    g.dependsOn.erase(std::unique(g.dependsOn.begin(), g.dependsOn.end()), g.dependsOn.end());
  }
  plan.launchesAfter = plan.groups.size();
  return plan;
}

std::uint64_t requestListSignature(std::span<const RequestInfo> requests, std::span<const Dependency> dependencies) {
  std::uint64_t hash = core::kFnvOffset;
  const auto mix = [&hash](std::uint64_t value) { hash = core::fnvWord(hash, value); };
  mix(requests.size());
  for (const RequestInfo& r : requests) {
    mix(static_cast<std::uint64_t>(r.kind) | static_cast<std::uint64_t>(r.dtype) << 8 |
        static_cast<std::uint64_t>(r.op) << 16);
    mix(static_cast<std::uint64_t>(static_cast<std::int64_t>(r.root)));
    mix(r.sendCount);
  }
  mix(dependencies.size());
  for (const Dependency& d : dependencies) {
    mix(d.before);
    mix(d.after);
  }
  return hash;
}

std::string describeFusionPlan(const FusionPlan& plan, std::span<const RequestInfo> requests) {
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "fusion plan: %zu requests -> %zu collectives (was %zu), %d dependency levels\n",
                plan.groupOf.size(), plan.launchesAfter, plan.launchesBefore, plan.levels);
  text += line;
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const FusionGroup& group = plan.groups[g];
    std::string kind(toString(group.kind));
    if (group.kind == Collective::kAllreduce || group.kind == Collective::kReduceScatter)
      kind.append(" ").append(toString(group.op));
    if (group.kind == Collective::kBroadcast) kind.append(" root ").append(std::to_string(group.root));
    std::string members;
    for (std::size_t i = 0; i < group.requests.size(); ++i)
      members.append(i ? "," : "").append(std::to_string(group.requests[i]));
    std::snprintf(line, sizeof line, "  launch %zu [level %d]: %s %s, requests {%s}, %zu elements/unit (%.1f KiB)",
                  g, group.level, kind.c_str(), std::string(toString(group.dtype)).c_str(), members.c_str(),
                  group.unitCount, static_cast<double>(group.unitCount * dataTypeSize(group.dtype)) / 1024.0);
    text += line;
    if (!group.dependsOn.empty()) {
      text += ", after launch";
      for (std::size_t i = 0; i < group.dependsOn.size(); ++i)
        text.append(i ? "," : " ").append(std::to_string(group.dependsOn[i]));
    }
    text += "\n";
  }
  (void)requests;
  return text;
}

}  // namespace boostcomm::planner
