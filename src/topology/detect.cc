// Detection, in order: (1) physical nodes from a shared-memory split, each
// rank learning its node leader's world rank; (2) one allgather of
// (leader, sockets, NUMA, cores) and one of hostnames, so every rank holds
// the same facts; (3) the layout, from the env override if set, else from the
// leaders; (4) probes: one ping-pong pair inside a node and one across nodes,
// each result broadcast from the pair's initiator, so every rank ends with
// bit-identical numbers. Only two ranks measure at a time; the others wait
// with sleeping polls so that, on an oversubscribed host, they do not steal
// the measuring pair's cores.
#include "topology/detect.h"

#include <unistd.h>

#include <array>
#include <cstring>

#include "core/check.h"
#include "topology/hwloc_info.h"
#include "topology/layout.h"
#include "topology/memory_probe.h"
#include "topology/probe.h"

namespace boostcomm::topology {
namespace {

constexpr std::size_t kHostnameBytes = 64;
constexpr int kFactsPerRank = 4;  // leader world rank, sockets, NUMA nodes, cores

// Allgather of `perRank` elements from every rank (blocking, quiet wait).
void allgather(transport::Transport& t, const void* send, void* recv, int perRank, DataType dtype) {
  std::vector<int> counts(static_cast<std::size_t>(t.size()), perRank);
  std::vector<int> displs(static_cast<std::size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r) displs[static_cast<std::size_t>(r)] = r * perRank;
  transport::Request req;
  t.nativeAllgatherv(send, static_cast<std::size_t>(perRank), recv, counts.data(), displs.data(), dtype, &req);
  waitQuietly(t, req);
}

// Measures the link between world ranks a (initiator) and b; every rank
// returns the fitted model (broadcast from a).
LinkModel probeLink(transport::Transport& t, int a, int b, std::span<const std::size_t> sizes, int hops) {
  // [alpha, beta, time of each size, median of each size]
  std::vector<double> result(2 + 2 * sizes.size(), 0.0);
  if (t.rank() == a || t.rank() == b) {
    const auto points = pingPong(t, t.rank() == a ? b : a, t.rank() == a, sizes);
    if (t.rank() == a) {
      const LinkModel fitted = fitLinkModel(points);
      result[0] = fitted.latencyUs;
      result[1] = fitted.bandwidthGBps;
      for (std::size_t i = 0; i < points.size(); ++i) {
        result[2 + i] = points[i].timeUs;
        result[2 + sizes.size() + i] = points[i].medianUs;
      }
    }
  }
  transport::Request req;
  t.nativeBroadcast(result.data(), result.size(), DataType::kFloat64, a, &req);
  waitQuietly(t, req);
  LinkModel model;
  model.latencyUs = result[0];
  model.bandwidthGBps = result[1];
  model.hops = hops;
  model.measured = true;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    model.samples.push_back({sizes[i], result[2 + i], result[2 + sizes.size() + i]});
  }
  return model;
}

}  // namespace

std::string thisHostname() {
  std::array<char, kHostnameBytes> hostname{};
  if (gethostname(hostname.data(), hostname.size() - 1) != 0) std::strcpy(hostname.data(), "unknown");
  return std::string(hostname.data(), strnlen(hostname.data(), kHostnameBytes));
}

Topology detectOnTransport(transport::Transport& world, const DetectOptions& options) {
  const std::unique_ptr<transport::Transport> privateComm = world.split(0, world.rank());
  transport::Transport& t = *privateComm;
  const int rank = t.rank();
  const int size = t.size();

  // (1) physical node: the world rank of this host's first rank.
  std::array<int, kFactsPerRank> facts{0, 0, 0, 0};
  bool nodeSplit = false;
  if (const std::unique_ptr<transport::Transport> local = t.splitByNode()) {
    nodeSplit = true;
    if (local->rank() == 0) {
      const HostInfo host = localHostInfo();
      facts = {rank, host.sockets, host.numaNodes, host.cores};
    }
    local->nativeBroadcast(facts.data(), facts.size(), DataType::kInt32, 0, nullptr);
  } else {
    const HostInfo host = localHostInfo();
    facts = {0, host.sockets, host.numaNodes, host.cores};
  }

  // (2) every rank's facts and hostname.
  std::vector<int> allFacts(static_cast<std::size_t>(size) * kFactsPerRank);
  allgather(t, facts.data(), allFacts.data(), kFactsPerRank, DataType::kInt32);
  std::array<char, kHostnameBytes> hostname{};
  const std::string mine = thisHostname();
  std::memcpy(hostname.data(), mine.data(), mine.size());
  std::vector<char> allHostnames(static_cast<std::size_t>(size) * kHostnameBytes);
  allgather(t, hostname.data(), allHostnames.data(), static_cast<int>(kHostnameBytes), DataType::kUInt8);

  // (3) layout.
  Topology topo;
  if (auto declared = layoutOverrideFromEnv(size, rank)) {
    setLayoutFromCounts(topo, declared->ranksPerNode);
    topo.layoutSource = declared->source;
  } else {
    std::vector<int> leaders(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) leaders[static_cast<std::size_t>(r)] = allFacts[static_cast<std::size_t>(r) * kFactsPerRank];
    setLayoutFromNodeIds(topo, leaders);
    topo.layoutSource = nodeSplit ? "shared-memory" : "single-process";
  }
  for (int node = 0; node < topo.nodes; ++node) {
    const auto first = static_cast<std::size_t>(topo.ranksOf(node).front());
    const char* name = &allHostnames[first * kHostnameBytes];
    topo.hostnames.emplace_back(name, strnlen(name, kHostnameBytes));
    topo.sockets.push_back(allFacts[first * kFactsPerRank + 1]);
    topo.numaNodes.push_back(allFacts[first * kFactsPerRank + 2]);
    topo.cores.push_back(allFacts[first * kFactsPerRank + 3]);
  }
  topo.intraNode.hops = 1;
  topo.interNode.hops = 2;  // a flat switch between nodes; no way to see more from here

  // (4) probes.
  if (!options.probe) return topo;
  const std::vector<std::size_t> sizes =
      options.probeSizesBytes.empty() ? defaultProbeSizes() : options.probeSizesBytes;
  for (int node = 0; node < topo.nodes; ++node) {
    if (topo.ranksPerNode[static_cast<std::size_t>(node)] >= 2) {
      const auto ranks = topo.ranksOf(node);
      topo.intraNode = probeLink(t, ranks[0], ranks[1], sizes, 1);
      break;
    }
  }
  if (topo.nodes >= 2) topo.interNode = probeLink(t, topo.ranksOf(0)[0], topo.ranksOf(1)[0], sizes, 2);
  if (options.probeMemory) topo.memory = probeMemory(t, topo);
  return topo;
}

}  // namespace boostcomm::topology

