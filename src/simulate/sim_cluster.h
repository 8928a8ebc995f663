// A described cluster for the simulator: how many nodes, how many ranks on
// each, and the links between them.
//
// Terms. A *node* is one shared-memory host (one NIC); a *rank* is one device
// or process. *Intra* links join ranks of one node (NVLink, PCIe, or host
// shared memory); *inter* links join nodes (InfiniBand, RoCE, Ethernet). Each
// link is an alpha-beta model: a message of b bytes takes
// latency + b / bandwidth when nothing else uses the link.
//
// Text forms (the `boostcomm simulate` options):
//   shape     "8x8"            nodes x ranks per node
//   link      "25GBps,2us"     bandwidth, latency. Bandwidth units: GBps, GB/s,
//                              MBps, MB/s, KBps (10^3 powers of bytes/s),
//                              GiBps, MiBps (2^10 powers), Gbps, Mbps (bits/s);
//                              latency units: s, ms, us, ns.
// JSON file (--cluster-file, read by src/simulate/cluster_file.h), every field
// but nodes/ranks_per_node optional:
//   {"nodes": 8, "ranks_per_node": 8,
//    "intra": {"bandwidth": "25GBps", "latency": "2us"},
//    "inter": {"bandwidth": "3GBps", "latency": "10us"},
//    "memory_bandwidth": "100GBps", "node_bus_bandwidth": "0", "intra_copy_on_cpu": false,
//    "cache": [[4194304, 2.8], [33554432, 2.4], [268435456, 1]], "first_touch_bandwidth": "0"}
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace boostcomm::simulate {

struct LinkSpec {
  double bytesPerSecond = 0;
  double latencySeconds = 0;
  // One message of `bytes`, alone on the link, latency included.
  double seconds(double bytes) const { return latencySeconds + bytes / bytesPerSecond; }
};

struct ClusterSpec {
  int nodes = 1;
  int ranksPerNode = 1;
  // Defaults: a GPU node with PCIe/NVLink-class device links and one
  // RoCE-class NIC per node (the 8x8 example).
  LinkSpec intra{25e9, 2e-6};
  LinkSpec inter{3e9, 10e-6};
  // Local reduce/copy steps stream through memory at this rate (bytes copied
  // per second; a reduce reads two inputs and writes one, so it costs 1.5x a
  // copy of the same bytes). 100 GB/s: a device's reduction kernel, well below
  // HBM peak; host CPUs sit near 5-10 GB/s per core (measure with `boostcomm bench`'s memcpy line).
  double memoryBytesPerSecond = 100e9;
  // Optional cap on all intra-node traffic of one node together (a shared
  // PCIe switch or memory bus); 0 = no cap beyond each rank's own ports.
  double nodeBusBytesPerSecond = 0;
  // Host shared memory: an intra-node message is a copy done by the
  // receiving rank's CPU, so it competes with that rank's reductions, and
  // (with a node bus) the node's local reduce/copy steps also share the bus:
  // every rank of a host streams through the same memory controllers.
  bool intraCopyOnCpu = false;
  // Host caches: how much faster than the streaming rates above a job's
  // memory resources (compute engines, and the node bus with intraCopyOnCpu)
  // run when its working set on one node (every local rank's send + receive +
  // scratch bytes) is W bytes. Points (W, speed-up) ascending in W, e.g. a
  // memcpy sweep from `boostcomm topo` (L2, L3, DRAM plateaus); between
  // points log-linear in W, outside them the end values. Empty = no cache.
  struct CachePoint {
    double workingSetBytes = 0;
    double speedup = 1;
  };
  std::vector<CachePoint> cache;
  double cacheSpeedupAt(double workingSetBytes) const;
  // Fresh pages (a new mmap) written for the first time, bytes per second:
  // page faults plus zeroing, and in a VM the host's own fault. Open MPI 4.1
  // allocates a temporary the size of the vector per allreduce call and glibc
  // serves requests >= 32 MiB with a new mmap, so the backend's own ("native")
  // allreduce pays this on every call from that size. 0 = not modelled.
  double firstTouchBytesPerSecond = 0;

  int ranks() const { return nodes * ranksPerNode; }
  // "8x8, intra 25 GB/s 2 us, inter 3 GB/s 10 us, memory 100 GB/s"
  std::string describe() const;
};

// Throws Error{kInvalidArgument} naming `argName` when the value is impossible
// (zero or negative nodes, ranks, bandwidth; negative latency; bad syntax).
void validateCluster(const ClusterSpec& cluster, std::string_view argName = "--cluster");

// "8x8" -> nodes, ranksPerNode (kept from `base` otherwise).
ClusterSpec parseShape(std::string_view text, ClusterSpec base = {});
// "25GBps,2us"; argName is named in errors (e.g. "--intra").
LinkSpec parseLink(std::string_view text, std::string_view argName);
// "25GBps" -> bytes per second (> 0).
double parseBandwidth(std::string_view text, std::string_view argName);
// "2us" -> seconds (>= 0).
double parseLatency(std::string_view text, std::string_view argName);

}  // namespace boostcomm::simulate
