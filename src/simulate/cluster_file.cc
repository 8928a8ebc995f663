#include "simulate/cluster_file.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace boostcomm::simulate {

using transport::sim::ClusterSpec;

transport::sim::ClusterSpec loadClusterFile(const std::string& path) {
  std::ifstream in(path);
  BC_INVALID(in.good(), -1, "--cluster-file: cannot open '" << path << "'");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    BC_INVALID(false, -1, "--cluster-file " << path << ": not valid JSON (" << e.what() << ")");
  }
  BC_INVALID(doc.is_object(), -1, "--cluster-file " << path << ": expected a JSON object");
  const std::string where = "--cluster-file " + path + ": ";
  ClusterSpec c;
  auto intField = [&](const char* key) {
    BC_INVALID(doc.contains(key) && doc[key].is_number_integer(), -1, where << "'" << key << "' must be an integer");
    return doc[key].get<long long>();
  };
  const long long nodes = intField("nodes");
  const long long perNode = intField("ranks_per_node");
  BC_INVALID(nodes >= 1 && nodes <= (1 << 20), -1, where << "'nodes' must be at least 1 (got " << nodes << ")");
  BC_INVALID(perNode >= 1 && perNode <= (1 << 20), -1, where << "'ranks_per_node' must be at least 1 (got " << perNode << ")");
  c.nodes = static_cast<int>(nodes);
  c.ranksPerNode = static_cast<int>(perNode);
  auto text = [&](const nlohmann::json& v, const std::string& key) {
    BC_INVALID(v.is_string(), -1, where << "'" << key << "' must be a string such as \"25GBps\" or \"2us\"");
    return v.get<std::string>();
  };
  for (const char* name : {"intra", "inter"}) {
    if (!doc.contains(name)) continue;
    const nlohmann::json& link = doc[name];
    BC_INVALID(link.is_object(), -1, where << "'" << name << "' must be an object with bandwidth and latency");
    auto& spec = std::string(name) == "intra" ? c.intra : c.inter;
    const std::string arg = where + name;
    if (link.contains("bandwidth")) spec.bytesPerSecond = transport::sim::parseBandwidth(text(link["bandwidth"], std::string(name) + ".bandwidth"), arg);
    if (link.contains("latency")) spec.latencySeconds = transport::sim::parseLatency(text(link["latency"], std::string(name) + ".latency"), arg);
  }
  if (doc.contains("memory_bandwidth")) {
    c.memoryBytesPerSecond = transport::sim::parseBandwidth(text(doc["memory_bandwidth"], "memory_bandwidth"), where + "memory_bandwidth");
  }
  if (doc.contains("node_bus_bandwidth") && text(doc["node_bus_bandwidth"], "node_bus_bandwidth") != "0") {
    c.nodeBusBytesPerSecond = transport::sim::parseBandwidth(doc["node_bus_bandwidth"].get<std::string>(), where + "node_bus_bandwidth");
  }
  if (doc.contains("intra_copy_on_cpu")) {
    BC_INVALID(doc["intra_copy_on_cpu"].is_boolean(), -1, where << "'intra_copy_on_cpu' must be true or false");
    c.intraCopyOnCpu = doc["intra_copy_on_cpu"].get<bool>();
  }
  transport::sim::validateCluster(c, "--cluster-file " + path);
  return c;
}

}  // namespace boostcomm::simulate
