#include "simulate/sim_cluster.h"

#include <cctype>
#include <charconv>
#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "core/check.h"

namespace boostcomm::simulate {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "25.5GBps" into 25.5 and "GBps"; false when no number leads.
bool splitNumber(std::string_view text, double& value, std::string_view& unit) {
  text = trim(text);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value)) return false;
  unit = trim(std::string_view(end, static_cast<std::size_t>(text.data() + text.size() - end)));
  return true;
}

bool equalsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// Units are matched exactly for bits vs bytes (Gbps vs GBps differ by 8x, the
// commonest mistake in link specs), case-insensitively otherwise.
double bandwidthUnit(std::string_view unit) {
  static const std::pair<const char*, double> kBytes[] = {
      {"GBps", 1e9},  {"GB/s", 1e9},  {"MBps", 1e6}, {"MB/s", 1e6}, {"KBps", 1e3}, {"kB/s", 1e3}, {"KB/s", 1e3},
      {"Bps", 1},     {"B/s", 1},     {"TBps", 1e12}, {"TB/s", 1e12},
      {"GiBps", 1073741824.0}, {"GiB/s", 1073741824.0}, {"MiBps", 1048576.0}, {"MiB/s", 1048576.0}};
  static const std::pair<const char*, double> kBits[] = {
      {"Gbps", 1e9 / 8}, {"Gb/s", 1e9 / 8}, {"Mbps", 1e6 / 8}, {"Mb/s", 1e6 / 8}, {"Tbps", 1e12 / 8}};
  for (const auto& [name, scale] : kBytes) {
    if (unit == name) return scale;
  }
  for (const auto& [name, scale] : kBits) {
    if (unit == name) return scale;
  }
  return 0;
}

double latencyUnit(std::string_view unit) {
  static const std::pair<const char*, double> kUnits[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  for (const auto& [name, scale] : kUnits) {
    if (equalsNoCase(unit, name)) return scale;
  }
  return 0;
}

}  // namespace

std::string ClusterSpec::describe() const {
  std::ostringstream os;
  os << nodes << "x" << ranksPerNode << ", intra " << intra.bytesPerSecond / 1e9 << " GB/s " << intra.latencySeconds * 1e6
     << " us, inter " << inter.bytesPerSecond / 1e9 << " GB/s " << inter.latencySeconds * 1e6 << " us, memory "
     << memoryBytesPerSecond / 1e9 << " GB/s";
  if (nodeBusBytesPerSecond > 0) os << ", node bus " << nodeBusBytesPerSecond / 1e9 << " GB/s";
  if (intraCopyOnCpu) os << ", intra copies on the CPU";
  if (!cache.empty()) {
    os << ", cache";
    for (const CachePoint& p : cache) os << " " << p.workingSetBytes / 1048576.0 << "MiB:x" << p.speedup;
  }
  if (firstTouchBytesPerSecond > 0) os << ", first touch " << firstTouchBytesPerSecond / 1e9 << " GB/s";
  return os.str();
}

double ClusterSpec::cacheSpeedupAt(double workingSetBytes) const {
  if (cache.empty()) return 1.0;
  if (workingSetBytes <= cache.front().workingSetBytes) return cache.front().speedup;
  if (workingSetBytes >= cache.back().workingSetBytes) return cache.back().speedup;
  std::size_t i = 1;
  while (cache[i].workingSetBytes < workingSetBytes) ++i;
  const CachePoint& a = cache[i - 1];
  const CachePoint& b = cache[i];
  const double f = std::log(workingSetBytes / a.workingSetBytes) / std::log(b.workingSetBytes / a.workingSetBytes);
  return a.speedup + f * (b.speedup - a.speedup);
}

void validateCluster(const ClusterSpec& c, std::string_view argName) {
  BC_INVALID(c.nodes >= 1, -1, argName << ": a cluster needs at least 1 node (got " << c.nodes << ")");
  BC_INVALID(c.ranksPerNode >= 1, -1, argName << ": a node needs at least 1 rank (got " << c.ranksPerNode << ")");
  BC_INVALID(static_cast<long long>(c.nodes) * c.ranksPerNode <= (1 << 20), -1,
             argName << ": " << c.nodes << "x" << c.ranksPerNode << " is more than 2^20 ranks");
  BC_INVALID(c.intra.bytesPerSecond > 0 && std::isfinite(c.intra.bytesPerSecond), -1,
             "--intra: bandwidth must be positive (got " << c.intra.bytesPerSecond << " B/s)");
  BC_INVALID(c.inter.bytesPerSecond > 0 && std::isfinite(c.inter.bytesPerSecond), -1,
             "--inter: bandwidth must be positive (got " << c.inter.bytesPerSecond << " B/s)");
  BC_INVALID(c.intra.latencySeconds >= 0 && std::isfinite(c.intra.latencySeconds), -1,
             "--intra: latency must not be negative (got " << c.intra.latencySeconds << " s)");
  BC_INVALID(c.inter.latencySeconds >= 0 && std::isfinite(c.inter.latencySeconds), -1,
             "--inter: latency must not be negative (got " << c.inter.latencySeconds << " s)");
  BC_INVALID(c.memoryBytesPerSecond > 0 && std::isfinite(c.memoryBytesPerSecond), -1,
             "--memory: bandwidth must be positive (got " << c.memoryBytesPerSecond << " B/s)");
  BC_INVALID(c.nodeBusBytesPerSecond >= 0 && std::isfinite(c.nodeBusBytesPerSecond), -1,
             "--node-bus: bandwidth must not be negative (got " << c.nodeBusBytesPerSecond << " B/s)");
  for (std::size_t i = 0; i < c.cache.size(); ++i) {
    const ClusterSpec::CachePoint& p = c.cache[i];
    BC_INVALID(p.workingSetBytes > 0 && std::isfinite(p.workingSetBytes), -1,
               "--cache: point " << i << " has working set " << p.workingSetBytes << " B; must be positive");
    BC_INVALID(p.speedup >= 1 && std::isfinite(p.speedup), -1,
               "--cache: point " << i << " has speed-up " << p.speedup << "; must be at least 1");
    BC_INVALID(i == 0 || p.workingSetBytes > c.cache[i - 1].workingSetBytes, -1,
               "--cache: points must be in ascending working-set order (point " << i << ")");
  }
  BC_INVALID(c.firstTouchBytesPerSecond >= 0 && std::isfinite(c.firstTouchBytesPerSecond), -1,
             "--first-touch: bandwidth must not be negative (got " << c.firstTouchBytesPerSecond << " B/s)");
}

ClusterSpec parseShape(std::string_view text, ClusterSpec base) {
  const std::string_view t = trim(text);
  const std::size_t x = t.find_first_of("xX");
  BC_INVALID(x != std::string_view::npos, -1,
             "--cluster: expected NODESxRANKS_PER_NODE such as 8x8, got '" << text << "'");
  auto parseInt = [&](std::string_view part, const char* what) {
    part = trim(part);
    long long v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    BC_INVALID(ec == std::errc() && end == part.data() + part.size() && !part.empty(), -1,
               "--cluster: " << what << " '" << part << "' in '" << text << "' is not a whole number");
    BC_INVALID(v >= 1 && v <= (1 << 20), -1, "--cluster: " << what << " must be at least 1 (got " << v << " in '" << text << "')");
    return static_cast<int>(v);
  };
  base.nodes = parseInt(t.substr(0, x), "node count");
  base.ranksPerNode = parseInt(t.substr(x + 1), "ranks per node");
  validateCluster(base);
  return base;
}

double parseBandwidth(std::string_view text, std::string_view argName) {
  double value = 0;
  std::string_view unit;
  BC_INVALID(splitNumber(text, value, unit), -1,
             argName << ": bandwidth '" << text << "' does not start with a number (e.g. 25GBps)");
  const double scale = bandwidthUnit(unit);
  BC_INVALID(scale > 0, -1,
             argName << ": unknown bandwidth unit '" << unit << "' in '" << text
                     << "' (use GBps, GB/s, MBps, GiBps, Gbps, Mbps, ...)");
  BC_INVALID(value > 0, -1, argName << ": bandwidth must be positive (got '" << text << "')");
  return value * scale;
}

double parseLatency(std::string_view text, std::string_view argName) {
  double value = 0;
  std::string_view unit;
  BC_INVALID(splitNumber(text, value, unit), -1,
             argName << ": latency '" << text << "' does not start with a number (e.g. 2us)");
  const double scale = latencyUnit(unit);
  BC_INVALID(scale > 0, -1, argName << ": unknown latency unit '" << unit << "' in '" << text << "' (use s, ms, us, ns)");
  BC_INVALID(value >= 0, -1, argName << ": latency must not be negative (got '" << text << "')");
  return value * scale;
}

LinkSpec parseLink(std::string_view text, std::string_view argName) {
  const std::size_t comma = text.find(',');
  BC_INVALID(comma != std::string_view::npos, -1,
             argName << ": expected BANDWIDTH,LATENCY such as 25GBps,2us, got '" << text << "'");
  return LinkSpec{parseBandwidth(text.substr(0, comma), argName), parseLatency(text.substr(comma + 1), argName)};
}

}  // namespace boostcomm::simulate
