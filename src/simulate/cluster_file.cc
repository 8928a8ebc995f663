#include "simulate/cluster_file.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace boostcomm::simulate {

using simulate::ClusterSpec;

simulate::ClusterSpec loadClusterFile(const std::string& path) {
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
    if (link.contains("bandwidth")) spec.bytesPerSecond = simulate::parseBandwidth(text(link["bandwidth"], std::string(name) + ".bandwidth"), arg);
    if (link.contains("latency")) spec.latencySeconds = simulate::parseLatency(text(link["latency"], std::string(name) + ".latency"), arg);
  }
  if (doc.contains("memory_bandwidth")) {
    c.memoryBytesPerSecond = simulate::parseBandwidth(text(doc["memory_bandwidth"], "memory_bandwidth"), where + "memory_bandwidth");
  }
  if (doc.contains("node_bus_bandwidth") && text(doc["node_bus_bandwidth"], "node_bus_bandwidth") != "0") {
    c.nodeBusBytesPerSecond = simulate::parseBandwidth(doc["node_bus_bandwidth"].get<std::string>(), where + "node_bus_bandwidth");
  }
  if (doc.contains("intra_copy_on_cpu")) {
    BC_INVALID(doc["intra_copy_on_cpu"].is_boolean(), -1, where << "'intra_copy_on_cpu' must be true or false");
    c.intraCopyOnCpu = doc["intra_copy_on_cpu"].get<bool>();
  }
  if (doc.contains("cache")) {
    const nlohmann::json& points = doc["cache"];
    BC_INVALID(points.is_array(), -1, where << "'cache' must be an array of [working_set_bytes, speedup] pairs");
    for (const auto& p : points) {
      BC_INVALID(p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number(), -1,
                 where << "'cache' entries must be [working_set_bytes, speedup] pairs of numbers");
      c.cache.push_back({p[0].get<double>(), p[1].get<double>()});
    }
  }
  if (doc.contains("first_touch_bandwidth") && text(doc["first_touch_bandwidth"], "first_touch_bandwidth") != "0") {
    c.firstTouchBytesPerSecond =
        simulate::parseBandwidth(doc["first_touch_bandwidth"].get<std::string>(), where + "first_touch_bandwidth");
  }
  simulate::validateCluster(c, "--cluster-file " + path);
  return c;
}

ClusterSpec clusterFromTopology(const Topology& topo, const std::string& path) {
  const std::string where = "--topology " + path + ": ";
  BC_INVALID(topo.nodes >= 1, -1, where << "no nodes");
  for (const int perNode : topo.ranksPerNode) {
    BC_INVALID(perNode == topo.ranksPerNode.front(), -1,
               where << "nodes hold different rank counts; the simulator needs the same count on every node");
  }
  ClusterSpec c;
  c.nodes = topo.nodes;
  c.ranksPerNode = topo.ranksPerNode.front();
  // The simulator predicts typical times of long runs of messages, so a link
  // is read from the probes' medians as a stream sees it: latency from the
  // smallest probe, bandwidth from the two largest (the marginal cost of
  // another byte). A token-bucket-shaped link bursts small messages after
  // idle time, which a fit over all sizes would mistake for its rate (a
  // 1 Gbit/s tbf link probes as ~7 Gbit/s); host copies slow down as
  // messages outgrow the cache.
  auto link = [&](const LinkModel& l, simulate::LinkSpec& out) {
    if (!l.measured || l.bandwidthGBps <= 0) return;
    std::vector<ProbeSample> points = l.samples;
    std::sort(points.begin(), points.end(), [](const ProbeSample& x, const ProbeSample& y) { return x.bytes < y.bytes; });
    auto typical = [](const ProbeSample& p) { return p.medianUs > 0 ? p.medianUs : p.timeUs; };
    out.bytesPerSecond = l.bandwidthGBps * 1e9;
    out.latencySeconds = l.latencyUs * 1e-6;
    if (points.size() < 2) return;
    const ProbeSample& a = points[points.size() - 2];
    const ProbeSample& b = points.back();
    const double usPerByte = (typical(b) - typical(a)) / static_cast<double>(b.bytes - a.bytes);
    if (b.bytes > a.bytes && usPerByte > 0) out.bytesPerSecond = 1e6 / usPerByte;
    out.latencySeconds = typical(points.front()) * 1e-6;
  };
  link(topo.intraNode, c.intra);
  link(topo.interNode, c.inter);
  // The topology was measured by host processes: messages between ranks of a
  // node are copies by the receiving CPU, through the node's memory.
  c.intraCopyOnCpu = true;
  const MemoryModel& m = topo.memory;
  if (m.measured && m.nodeCopyGBps > 0 && m.copyGBps > 0) {
    c.memoryBytesPerSecond = m.copyGBps * 1e9;
    c.nodeBusBytesPerSecond = m.nodeCopyGBps * 1e9;
    for (const auto& s : m.sweep) c.cache.push_back({static_cast<double>(s.workingSetBytes), std::max(1.0, s.copyGBps / m.nodeCopyGBps)});
    c.firstTouchBytesPerSecond = m.firstTouchGBps * 1e9;
    // The ping-pong probe times the whole message, copy included, with its
    // buffers in cache; the link alone (pinning and mapping pages) is what
    // is left after that copy, which the simulator adds back at each job's
    // own memory speed: 1/link = 1/probed - 1/(copy rate at the probe's working set).
    std::size_t largest = 0;
    for (const auto& p : topo.intraNode.samples) largest = std::max(largest, p.bytes);
    const double copy = c.memoryBytesPerSecond * c.cacheSpeedupAt(2.0 * static_cast<double>(largest) * c.ranksPerNode);
    const double perByte = 1.0 / c.intra.bytesPerSecond - 1.0 / copy;
    if (topo.intraNode.measured && perByte > 0.5 / c.intra.bytesPerSecond) c.intra.bytesPerSecond = 1.0 / perByte;
  }
  simulate::validateCluster(c, "--topology " + path);
  return c;
}

ClusterSpec medianCluster(const std::vector<ClusterSpec>& clusters) {
  BC_INVALID(!clusters.empty(), -1, "--topology: no topology file given");
  const ClusterSpec& first = clusters.front();
  for (std::size_t i = 1; i < clusters.size(); ++i) {
    const ClusterSpec& c = clusters[i];
    BC_INVALID(c.nodes == first.nodes && c.ranksPerNode == first.ranksPerNode && c.intraCopyOnCpu == first.intraCopyOnCpu,
               -1, "--topology: file " << i + 1 << " describes " << c.nodes << "x" << c.ranksPerNode << ", file 1 "
                                       << first.nodes << "x" << first.ranksPerNode << ": give files of one job layout");
    BC_INVALID(c.cache.size() == first.cache.size(), -1,
               "--topology: file " << i + 1 << " has " << c.cache.size() << " cache points, file 1 " << first.cache.size());
    for (std::size_t k = 0; k < c.cache.size(); ++k) {
      BC_INVALID(c.cache[k].workingSetBytes == first.cache[k].workingSetBytes, -1,
                 "--topology: file " << i + 1 << " measured its memory at other working sets than file 1");
    }
  }
  auto median = [&](auto field) {
    std::vector<double> v;
    for (const ClusterSpec& c : clusters) v.push_back(field(c));
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  ClusterSpec m = first;
  m.intra.bytesPerSecond = median([](const ClusterSpec& c) { return c.intra.bytesPerSecond; });
  m.intra.latencySeconds = median([](const ClusterSpec& c) { return c.intra.latencySeconds; });
  m.inter.bytesPerSecond = median([](const ClusterSpec& c) { return c.inter.bytesPerSecond; });
  m.inter.latencySeconds = median([](const ClusterSpec& c) { return c.inter.latencySeconds; });
  m.memoryBytesPerSecond = median([](const ClusterSpec& c) { return c.memoryBytesPerSecond; });
  m.nodeBusBytesPerSecond = median([](const ClusterSpec& c) { return c.nodeBusBytesPerSecond; });
  m.firstTouchBytesPerSecond = median([](const ClusterSpec& c) { return c.firstTouchBytesPerSecond; });
  for (std::size_t k = 0; k < m.cache.size(); ++k) {
    m.cache[k].speedup = median([k](const ClusterSpec& c) { return c.cache[k].speedup; });
  }
  simulate::validateCluster(m, "--topology");
  return m;
}

}  // namespace boostcomm::simulate
