// The topology file: JSON written by saveTopology / `boostcomm topo --json`.
//
//   {"format": "boostcomm-topology", "version": 1, "world_size": 4,
//    "layout_source": "...",
//    "nodes": [{"hostname": "a", "ranks": [0, 1], "sockets": 1, "numa_nodes": 1, "cores": 2}, ...],
//    "links": {"intra_node": {"latency_us": .., "bandwidth_gbps": .., "hops": 1, "measured": true},
//              "inter_node": {...}},
//    "memory": {"measured": true, "copy_gbps": .., "node_copy_gbps": .., "first_touch_gbps": ..,
//               "sweep": [{"working_set_bytes": .., "copy_gbps": ..}, ...]}}
// ("memory" is written only when measured; files without it read as not measured.)
//
// Ranks are listed per node (not as counts) so a file can describe any
// placement, e.g. round-robin. Reading checks that every rank 0..world_size-1
// appears exactly once.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "boostcomm/topology.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "topology/layout.h"

namespace boostcomm {
namespace {

// ordered_json: keys stay in the order written, so the file reads top-down.
using json = nlohmann::ordered_json;

constexpr const char* kFormat = "boostcomm-topology";
constexpr int kVersion = 1;
// Bounds what a corrupt file can make us allocate (one int per rank).
constexpr int kMaxRanks = 1 << 24;

json linkToJson(const LinkModel& link) {
  json samples = json::array();
  for (const auto& s : link.samples) {
    samples.push_back({{"bytes", s.bytes}, {"time_us", s.timeUs}, {"median_us", s.medianUs}});
  }
  return {{"latency_us", link.latencyUs},
          {"bandwidth_gbps", link.bandwidthGBps},
          {"hops", link.hops},
          {"measured", link.measured},
          {"samples", samples}};
}

LinkModel linkFromJson(const json& j) {
  LinkModel link;
  link.latencyUs = j.at("latency_us").get<double>();
  link.bandwidthGBps = j.at("bandwidth_gbps").get<double>();
  link.hops = j.at("hops").get<int>();
  link.measured = j.at("measured").get<bool>();
  if (j.contains("samples")) {
    for (const auto& s : j.at("samples")) {
      link.samples.push_back({s.at("bytes").get<std::size_t>(), s.at("time_us").get<double>(), s.value("median_us", 0.0)});
    }
  }
  return link;
}

json memoryToJson(const MemoryModel& m) {
  json sweep = json::array();
  for (const auto& s : m.sweep) sweep.push_back({{"working_set_bytes", s.workingSetBytes}, {"copy_gbps", s.copyGBps}});
  return {{"measured", m.measured},         {"copy_gbps", m.copyGBps},
          {"node_copy_gbps", m.nodeCopyGBps}, {"first_touch_gbps", m.firstTouchGBps},
          {"sweep", sweep}};
}

MemoryModel memoryFromJson(const json& j) {
  MemoryModel m;
  m.measured = j.at("measured").get<bool>();
  m.copyGBps = j.at("copy_gbps").get<double>();
  m.nodeCopyGBps = j.at("node_copy_gbps").get<double>();
  m.firstTouchGBps = j.at("first_touch_gbps").get<double>();
  BC_INVALID(m.copyGBps >= 0 && m.nodeCopyGBps >= 0 && m.firstTouchGBps >= 0, -1,
             "topology file: \"memory\" has a negative rate");
  if (j.contains("sweep")) {
    for (const auto& s : j.at("sweep")) m.sweep.push_back({s.at("working_set_bytes").get<std::size_t>(), s.at("copy_gbps").get<double>()});
  }
  return m;
}

std::string joinInts(const std::vector<int>& values) {
  std::ostringstream os;
  for (std::size_t i = 0; i < values.size(); ++i) os << (i ? "," : "") << values[i];
  return os.str();
}

}  // namespace

double LinkModel::timeUs(std::size_t bytes) const {
  return latencyUs + (bandwidthGBps > 0 ? static_cast<double>(bytes) / (bandwidthGBps * 1e3) : 0.0);
}

std::vector<int> Topology::ranksOf(int node) const {
  std::vector<int> ranks;
  for (int r = 0; r < worldSize; ++r) {
    if (nodeOfRank[static_cast<std::size_t>(r)] == node) ranks.push_back(r);
  }
  return ranks;
}

std::string topologyToJson(const Topology& topo) {
  json nodes = json::array();
  for (int node = 0; node < topo.nodes; ++node) {
    const auto n = static_cast<std::size_t>(node);
    nodes.push_back({{"hostname", n < topo.hostnames.size() ? topo.hostnames[n] : ""},
                     {"ranks", topo.ranksOf(node)},
                     {"sockets", n < topo.sockets.size() ? topo.sockets[n] : 0},
                     {"numa_nodes", n < topo.numaNodes.size() ? topo.numaNodes[n] : 0},
                     {"cores", n < topo.cores.size() ? topo.cores[n] : 0}});
  }
  json j = {{"format", kFormat},
                  {"version", kVersion},
                  {"world_size", topo.worldSize},
                  {"layout_source", topo.layoutSource},
                  {"nodes", nodes},
                  {"links", {{"intra_node", linkToJson(topo.intraNode)}, {"inter_node", linkToJson(topo.interNode)}}}};
  if (topo.memory.measured) j["memory"] = memoryToJson(topo.memory);
  return j.dump(2) + "\n";
}

Topology topologyFromJson(const std::string& text) {
  Topology topo;
  try {
    const json j = json::parse(text);
    BC_INVALID(j.value("format", "") == kFormat, -1,
               "not a topology file: \"format\" must be \"" << kFormat << "\"");
    const int version = j.at("version").get<int>();
    BC_INVALID(version == kVersion, -1, "topology file version " << version << " is not supported (valid: " << kVersion << ")");
    const int worldSize = j.at("world_size").get<int>();
    BC_INVALID(worldSize > 0 && worldSize <= kMaxRanks, -1,
               "topology file: world_size " << worldSize << " must be in [1, " << kMaxRanks << "]");
    std::vector<int> nodeOfRank(static_cast<std::size_t>(worldSize), -1);
    const json& nodes = j.at("nodes");
    BC_INVALID(nodes.is_array() && !nodes.empty(), -1, "topology file: \"nodes\" must be a non-empty array");
    int previousLowest = -1;
    for (std::size_t node = 0; node < nodes.size(); ++node) {
      const json& n = nodes[node];
      const auto ranks = n.at("ranks").get<std::vector<int>>();
      BC_INVALID(!ranks.empty(), -1, "topology file: node " << node << " has no ranks");
      // Per-node facts are kept in file order, so the file must already use
      // our numbering: nodes in order of their lowest rank.
      const int lowest = *std::min_element(ranks.begin(), ranks.end());
      BC_INVALID(lowest > previousLowest, -1,
                 "topology file: nodes must be listed in order of their lowest rank (node "
                     << node << " starts at rank " << lowest << ", node " << node - 1 << " at " << previousLowest << ")");
      previousLowest = lowest;
      for (const int r : ranks) {
        BC_INVALID(r >= 0 && r < worldSize, -1,
                   "topology file: node " << node << " lists rank " << r << ", outside 0.." << worldSize - 1);
        BC_INVALID(nodeOfRank[static_cast<std::size_t>(r)] < 0, -1,
                   "topology file: rank " << r << " is listed on node " << nodeOfRank[static_cast<std::size_t>(r)]
                                          << " and node " << node);
        nodeOfRank[static_cast<std::size_t>(r)] = static_cast<int>(node);
      }
      topo.hostnames.push_back(n.value("hostname", ""));
      topo.sockets.push_back(n.value("sockets", 0));
      topo.numaNodes.push_back(n.value("numa_nodes", 0));
      topo.cores.push_back(n.value("cores", 0));
    }
    for (int r = 0; r < worldSize; ++r) {
      BC_INVALID(nodeOfRank[static_cast<std::size_t>(r)] >= 0, -1, "topology file: rank " << r << " is on no node");
    }
    topology::setLayoutFromNodeIds(topo, nodeOfRank);
    topo.layoutSource = j.value("layout_source", "");
    const json& links = j.at("links");
    topo.intraNode = linkFromJson(links.at("intra_node"));
    topo.interNode = linkFromJson(links.at("inter_node"));
    if (j.contains("memory")) topo.memory = memoryFromJson(j.at("memory"));
  } catch (const nlohmann::json::exception& e) {
    core::raise(ErrorCategory::kInvalidArgument, -1, std::string("topology file is not valid: ") + e.what());
  }
  return topo;
}

void saveTopology(const Topology& topo, const std::string& path) {
  core::writeFileAtomically(path, topologyToJson(topo), "topology file");
}

Topology loadTopology(const std::string& path) {
  std::ifstream in(path);
  BC_INVALID(in.good(), -1, "cannot read topology file '" << path << "'");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return topologyFromJson(text.str());
  } catch (const Error& e) {
    core::raise(e.category(), e.rank(), e.detail() + " (in '" + path + "')");
  }
}

std::vector<std::string> topologyDifferences(const Topology& file, const Topology& job) {
  std::vector<std::string> out;
  if (file.worldSize != job.worldSize) {
    out.push_back("rank count: file " + std::to_string(file.worldSize) + ", job " + std::to_string(job.worldSize));
  }
  if (file.nodes != job.nodes) {
    out.push_back("node count: file " + std::to_string(file.nodes) + ", job " + std::to_string(job.nodes));
  }
  if (file.ranksPerNode != job.ranksPerNode) {
    out.push_back("ranks per node: file " + joinInts(file.ranksPerNode) + ", job " + joinInts(job.ranksPerNode));
  } else if (file.nodeOfRank != job.nodeOfRank) {
    out.push_back("rank placement: file node of each rank " + joinInts(file.nodeOfRank) + ", job " +
                  joinInts(job.nodeOfRank));
  }
  return out;
}

}  // namespace boostcomm
