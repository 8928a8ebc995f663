// The simulated network: when does a message arrive, when does local work end.
//
// Every link end that traffic can queue on is a *resource* with a bandwidth
// and the virtual time at which it is next free:
//   - each rank's intra-node ports (out and in), at the intra bandwidth;
//   - each node's NIC (out and in, full duplex), at the inter bandwidth, shared
//     by all inter-node traffic of the node's ranks;
//   - optionally each node's intra-node bus (ClusterSpec::nodeBusBytesPerSecond);
//   - each rank's compute engine (local reduce/copy at memory bandwidth; with
//     intraCopyOnCpu also the receiver side of intra-node copies, and the
//     node bus, when set, carries the node's local reduce/copy steps too).
// A job's memory cost factor (1 / ClusterSpec::cacheSpeedupAt(its working
// set)) scales its bytes on the memory resources (compute engines, and the
// node bus when it is host memory); links are not sped up by caches.
//
// Host processes (intraCopyOnCpu): an intra-node message is a single copy by
// the receiving process (Open MPI's CMA path), which first pins and maps the
// sender's pages and then copies. The two add up: the link (ports) accounts
// for the per-page work at the intra bandwidth, then the copy streams through
// the receiver's compute engine and the node bus at memory speed for the
// job's working set. The receiver is busy for the whole message.
// A message holds every resource on its path from the moment all are free:
//   start  = max(now, free time of each resource on the path)
//   finish = start + latency + bytes / min(bandwidth on the path)
// and each resource stays busy for bytes / its own bandwidth. Resources serve
// messages first come, first served in virtual time.
//
// Rejected alternative: max-min fair flow sharing (recompute every active
// flow's rate on each start and finish). It is the textbook model, but costs
// O(active flows) per event — too slow for 1024 ranks with thousands of
// messages each — and the algorithms already cut payloads into chunks
// (about 1 MiB), so first-come service interleaves concurrent flows at chunk
// granularity, which gives the same aggregate throughput on a shared link.
// Known error of this model: a message waiting for one busy resource does not
// let a later message use the gap on the others (slightly pessimistic).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "simulate/sim_cluster.h"

namespace boostcomm::simulate {

struct NetworkStats {
  std::uint64_t messages = 0;
  std::uint64_t intraBytes = 0;
  std::uint64_t interBytes = 0;
  std::uint64_t localBytes = 0;  // moved by local copy/reduce steps
};

// Link accounting per node (Network::setRecordLinks), the simulator's side of
// executor/link_meter.h: bytes its ranks sent per level, and each inter-node
// message's in-flight interval [ready to move, arrival) in virtual seconds,
// from which congestion (two or more at once on the node's NIC) is computed.
struct NodeLinkLog {
  std::uint64_t intraBytes = 0;
  std::uint64_t interBytes = 0;
  std::vector<std::pair<double, double>> interIntervals;
};

class Network {
 public:
  explicit Network(const ClusterSpec& cluster);

  const ClusterSpec& cluster() const { return cluster_; }
  int nodeOf(int rank) const { return rank / cluster_.ranksPerNode; }

  // A message of `bytes` from world rank src to dst, ready to move at `now`
  // (both ends posted); returns its arrival time and reserves its path.
  // memoryCost: the job's factor on memory resources (1 = streaming from DRAM).
  double transfer(int src, int dst, std::size_t bytes, double now, double memoryCost = 1.0);
  // Local work on `rank` streaming `bytes` through memory, `passes` times the
  // cost of a copy of those bytes (copy 1, reduce 1.5); returns its end time.
  double localWork(int rank, std::size_t bytes, double passes, double now, double memoryCost = 1.0);
  // First writes to `bytes` of fresh pages on `rank` (page faults: CPU time of
  // the rank, not memory bandwidth); returns its end time.
  double firstTouch(int rank, std::size_t bytes, double now);

  const NetworkStats& stats() const { return stats_; }
  void reset();
  // Keep per-node link logs (off by default: memory grows with the messages).
  void setRecordLinks(bool on) { recordLinks_ = on; }
  const std::vector<NodeLinkLog>& links() const { return links_; }

 private:
  struct Resource {
    double freeAt = 0;
    double bytesPerSecond = 0;
  };
  // A node's host memory bus, booked by interval. Unlike the per-rank
  // resources (which serve their own ops in issue order), many ranks book it,
  // often for a time in the future (after the booking rank's CPU is free); a
  // single "free at" would make every later request wait behind such a
  // booking, idle gap or not. Booking takes the earliest gap that fits.
  class Timeline {
   public:
    // Books `seconds` starting no earlier than `earliest`; returns the start.
    // Intervals that ended before `now` (the event loop's time, which only
    // grows) are dropped, so the list holds only future bookings.
    double book(double earliest, double seconds, double now);
   private:
    std::vector<std::pair<double, double>> busy_;  // [start, end), sorted
  };
  // Holds up to 3 resources, all from one start (the latest free time among
  // them); resource i is busy for busySeconds[i]. Returns start + duration.
  double reserve(Resource* const* path, const double* busySeconds, int n, double duration, double now);

  ClusterSpec cluster_;
  std::vector<Resource> portOut_, portIn_, cpu_;  // per rank
  std::vector<Resource> nicOut_, nicIn_, bus_;    // per node (bus_: device links)
  std::vector<Timeline> memoryBus_;                // per node, host processes
  NetworkStats stats_;
  bool recordLinks_ = false;
  std::vector<NodeLinkLog> links_;  // per node, when recordLinks_
};

}  // namespace boostcomm::simulate
