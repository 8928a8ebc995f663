#include "transport/sim/sim_network.h"

#include <algorithm>

namespace boostcomm::transport::sim {

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
  stats_ = NetworkStats{};
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
    return reserve(path, busySeconds, 2, seconds, now);
  }
  stats_.intraBytes += bytes;
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
    Resource& shared = bus_[ns];
    shared.freeAt = std::max(shared.freeAt, copyReady) + memoryCost * b / shared.bytesPerSecond;
    arrival = std::max(arrival, shared.freeAt);
  }
  portOut_[s].freeAt = portIn_[d].freeAt = cpu.freeAt = arrival;
  return arrival;
}

double Network::localWork(int rank, std::size_t bytes, double passes, double now, double memoryCost) {
  stats_.localBytes += bytes;
  const double b = passes * memoryCost * static_cast<double>(bytes);
  Resource* path[2] = {&cpu_[static_cast<std::size_t>(rank)], &bus_[static_cast<std::size_t>(nodeOf(rank))]};
  const double busySeconds[2] = {b / path[0]->bytesPerSecond, b / std::max(path[1]->bytesPerSecond, 1e-300)};
  // Host memory: all ranks of a node stream through the same controllers.
  const bool bus = cluster_.intraCopyOnCpu && cluster_.nodeBusBytesPerSecond > 0;
  return reserve(path, busySeconds, bus ? 2 : 1, bus ? std::max(busySeconds[0], busySeconds[1]) : busySeconds[0], now);
}

double Network::firstTouch(int rank, std::size_t bytes, double now) {
  if (cluster_.firstTouchBytesPerSecond <= 0 || bytes == 0) return now;
  Resource& cpu = cpu_[static_cast<std::size_t>(rank)];
  const double start = std::max(now, cpu.freeAt);
  cpu.freeAt = start + static_cast<double>(bytes) / cluster_.firstTouchBytesPerSecond;
  return cpu.freeAt;
}

}  // namespace boostcomm::transport::sim
