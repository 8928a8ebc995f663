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

double Network::reserve(Resource* const* path, int n, std::size_t bytes, double latency, double now) {
  double start = now;
  double slowest = path[0]->bytesPerSecond;
  for (int i = 0; i < n; ++i) {
    start = std::max(start, path[i]->freeAt);
    slowest = std::min(slowest, path[i]->bytesPerSecond);
  }
  const double b = static_cast<double>(bytes);
  for (int i = 0; i < n; ++i) path[i]->freeAt = start + b / path[i]->bytesPerSecond;
  return start + latency + b / slowest;
}

double Network::transfer(int src, int dst, std::size_t bytes, double now) {
  ++stats_.messages;
  const auto s = static_cast<std::size_t>(src);
  const auto d = static_cast<std::size_t>(dst);
  if (src == dst) {
    // A message to oneself is a local copy.
    Resource* path[] = {&cpu_[s]};
    return reserve(path, 1, bytes, 0, now);
  }
  const auto ns = static_cast<std::size_t>(nodeOf(src));
  const auto nd = static_cast<std::size_t>(nodeOf(dst));
  if (ns != nd) {
    stats_.interBytes += bytes;
    // Device -> NIC crossing inside the node is assumed not to be the
    // bottleneck (GPUDirect-class paths); the NICs are.
    Resource* path[] = {&nicOut_[ns], &nicIn_[nd]};
    return reserve(path, 2, bytes, cluster_.inter.latencySeconds, now);
  }
  stats_.intraBytes += bytes;
  Resource* path[4] = {&portOut_[s], &portIn_[d]};
  int n = 2;
  if (cluster_.nodeBusBytesPerSecond > 0) path[n++] = &bus_[ns];
  if (cluster_.intraCopyOnCpu) path[n++] = &cpu_[d];
  return reserve(path, n, bytes, cluster_.intra.latencySeconds, now);
}

double Network::localWork(int rank, std::size_t bytes, double passes, double now) {
  stats_.localBytes += bytes;
  Resource& cpu = cpu_[static_cast<std::size_t>(rank)];
  const double start = std::max(now, cpu.freeAt);
  cpu.freeAt = start + passes * static_cast<double>(bytes) / cpu.bytesPerSecond;
  return cpu.freeAt;
}

}  // namespace boostcomm::transport::sim
