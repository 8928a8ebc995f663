#include "simulate/sim_network.h"

#include <algorithm>

namespace boostcomm::simulate {

Network::Network(const ClusterSpec& cluster) : cluster_(cluster) {
  validateCluster(cluster_);
  reset();
}

void Network::reset() {
  const auto ranks = static_cast<std::size_t>(cluster_.ranks());
  const auto nodes = static_cast<std::size_t>(cluster_.nodes);
  portOut_.assign(ranks, Resource{0, cluster_.intra.bytesPerSecond});
  portIn_.assign(ranks, Resource{0, cluster_.intra.bytesPerSecond});
  cpu_.assign(ranks, Resource{0, cluster_.memoryBytesPerSecond});
  nicOut_.assign(nodes, Resource{0, cluster_.inter.bytesPerSecond});
  nicIn_.assign(nodes, Resource{0, cluster_.inter.bytesPerSecond});
  bus_.assign(nodes, Resource{0, cluster_.nodeBusBytesPerSecond});
  memoryBus_.assign(nodes, Timeline{});
  stats_ = NetworkStats{};
  links_.assign(recordLinks_ ? nodes : 0, NodeLinkLog{});
}

double Network::Timeline::book(double earliest, double seconds, double now) {
  std::size_t drop = 0;
  while (drop < busy_.size() && busy_[drop].second <= now) ++drop;
  busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(drop));
  double start = earliest;
  std::size_t at = 0;
  for (; at < busy_.size(); ++at) {
    if (busy_[at].second <= start) continue;         // ends before we would start
    if (busy_[at].first >= start + seconds) break;   // the gap before it fits
    start = busy_[at].second;                        // overlaps: try after it
  }
  busy_.insert(busy_.begin() + static_cast<std::ptrdiff_t>(at), {start, start + seconds});
  return start;
}

double Network::reserve(Resource* const* path, const double* busySeconds, int n, double duration, double now) {
  double start = now;
  for (int i = 0; i < n; ++i) start = std::max(start, path[i]->freeAt);
  for (int i = 0; i < n; ++i) path[i]->freeAt = start + busySeconds[i];
  return start + duration;
}

double Network::transfer(int src, int dst, std::size_t bytes, double now, double memoryCost) {
  ++stats_.messages;
  const auto s = static_cast<std::size_t>(src);
  const auto d = static_cast<std::size_t>(dst);
  if (src == dst) {
    // A message to oneself is a local copy.
    return localWork(src, bytes, 1.0, now, memoryCost);
  }
  const auto ns = static_cast<std::size_t>(nodeOf(src));
  const auto nd = static_cast<std::size_t>(nodeOf(dst));
  if (ns != nd) {
    stats_.interBytes += bytes;
    // Device -> NIC crossing inside the node is assumed not to be the
    // bottleneck (GPUDirect-class paths); the NICs are.
    Resource* path[] = {&nicOut_[ns], &nicIn_[nd]};
    const double seconds = cluster_.inter.seconds(static_cast<double>(bytes));
    const double busy = std::max(0.0, seconds - cluster_.inter.latencySeconds);
    const double busySeconds[] = {busy, busy};
    const double arrival = reserve(path, busySeconds, 2, seconds, now);
    if (recordLinks_) {
      links_[ns].interBytes += bytes;
      links_[ns].interIntervals.emplace_back(now, arrival);
    }
    return arrival;
  }
  stats_.intraBytes += bytes;
  if (recordLinks_) links_[ns].intraBytes += bytes;
  const bool bus = cluster_.nodeBusBytesPerSecond > 0;
  if (!cluster_.intraCopyOnCpu) {
    // A device link: the ports, and a shared switch/bus if there is one.
    Resource* path[3] = {&portOut_[s], &portIn_[d], &bus_[ns]};
    const double seconds = cluster_.intra.seconds(static_cast<double>(bytes));
    const double busy = std::max(0.0, seconds - cluster_.intra.latencySeconds);
    const double busSeconds = bus ? static_cast<double>(bytes) / cluster_.nodeBusBytesPerSecond : 0.0;
    const double busySeconds[3] = {busy, busy, busSeconds};
    return reserve(path, busySeconds, bus ? 3 : 2, std::max(seconds, cluster_.intra.latencySeconds + busSeconds), now);
  }
  // Host processes: the link phase holds both ports and the receiving CPU;
  // the copy phase then needs the CPU and, when the node's memory is shared,
  // the bus (first come, first served: two ranks copying at once each get
  // half of it, as two messages one after the other at the full rate).
  Resource& cpu = cpu_[d];
  const double start = std::max({now, portOut_[s].freeAt, portIn_[d].freeAt, cpu.freeAt});
  const double b = static_cast<double>(bytes);
  const double copyReady = start + cluster_.intra.seconds(b);
  double arrival = copyReady + memoryCost * b / cpu.bytesPerSecond;
  if (bus) {
    const double busSeconds = memoryCost * b / cluster_.nodeBusBytesPerSecond;
    arrival = std::max(arrival, memoryBus_[ns].book(copyReady, busSeconds, now) + busSeconds);
  }
  portOut_[s].freeAt = portIn_[d].freeAt = cpu.freeAt = arrival;
  return arrival;
}

double Network::localWork(int rank, std::size_t bytes, double passes, double now, double memoryCost) {
  stats_.localBytes += bytes;
  const double b = passes * memoryCost * static_cast<double>(bytes);
  Resource& cpu = cpu_[static_cast<std::size_t>(rank)];
  double start = std::max(now, cpu.freeAt);
  double end = start + b / cpu.bytesPerSecond;
  if (cluster_.intraCopyOnCpu && cluster_.nodeBusBytesPerSecond > 0) {
    // Host memory: all ranks of a node stream through the same controllers.
    const double busSeconds = b / cluster_.nodeBusBytesPerSecond;
    start = memoryBus_[static_cast<std::size_t>(nodeOf(rank))].book(start, busSeconds, now);
    end = std::max(start + b / cpu.bytesPerSecond, start + busSeconds);
  }
  cpu.freeAt = end;
  return end;
}

double Network::firstTouch(int rank, std::size_t bytes, double now) {
  if (cluster_.firstTouchBytesPerSecond <= 0 || bytes == 0) return now;
  Resource& cpu = cpu_[static_cast<std::size_t>(rank)];
  const double start = std::max(now, cpu.freeAt);
  cpu.freeAt = start + static_cast<double>(bytes) / cluster_.firstTouchBytesPerSecond;
  return cpu.freeAt;
}

}  // namespace boostcomm::simulate
