// Topology: which ranks share a node, what the nodes hold, and how fast the
// links inside and between nodes are (docs/TOPOLOGY.md).
//
// Terms: a node is a set of ranks that share memory (one host, or a logical
// node declared by BOOSTCOMM_RANKS_PER_NODE / BOOSTCOMM_NODE_LAYOUT); the
// local rank is a rank's position inside its node, in world-rank order.
// Nodes are numbered by their lowest world rank, so node 0 holds rank 0.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace boostcomm {

class Communicator;

// One probe measurement: a message of `bytes` took `timeUs` one way (half
// the fastest ping-pong round trip: the link's best case, what the fitted
// LinkModel describes) and `medianUs` typically (half the median round trip:
// what the simulator predicts from, as benchmarks report medians; 0 = not
// recorded, e.g. an older topology file).
struct ProbeSample {
  std::size_t bytes = 0;
  double timeUs = 0.0;
  double medianUs = 0.0;
};

// t(bytes) = latencyUs + bytes / (bandwidthGBps * 1e3) microseconds: the
// latency-bandwidth (alpha-beta) model of one link, one direction.
struct LinkModel {
  double latencyUs = 0.0;      // alpha, in microseconds
  double bandwidthGBps = 0.0;  // beta, in 1e9 bytes per second
  int hops = 0;                // switch hops: 1 inside a node, 2 across a flat switch
  bool measured = false;       // false: not probed (no such pair, or --no-probe)
  std::vector<ProbeSample> samples;  // the points the model was fitted to

  // Predicted one-way time of a message of `bytes`, in microseconds.
  double timeUs(std::size_t bytes) const;
};

// How fast one node's memory moves data for collectives run by host processes
// (measured on node 0 by detectTopology with DetectOptions::probeMemory). All
// rates are 1e9 bytes copied per second; copies are memcpy of half the
// working set into the other half.
struct MemoryModel {
  bool measured = false;
  double copyGBps = 0.0;        // one rank copying a buffer far larger than the cache, the others idle
  double nodeCopyGBps = 0.0;    // every rank of the node copying such buffers at once: their sum
  double firstTouchGBps = 0.0;  // first writes to fresh pages (mmap'd, never touched): faults + zeroing
  struct Sample {
    std::size_t workingSetBytes = 0;  // all ranks of the node together
    double copyGBps = 0.0;            // their summed copy rate
  };
  // All ranks at once, node working sets 512 KiB .. 256 MiB: the caches'
  // plateaus and the streaming rate (the last point, = nodeCopyGBps).
  std::vector<Sample> sweep;
};

struct Topology {
  int worldSize = 0;
  int nodes = 0;
  std::vector<int> ranksPerNode;    // [node]
  std::vector<int> nodeOfRank;      // [world rank]
  std::vector<int> localRankOfRank; // [world rank]
  std::vector<std::string> hostnames;  // [node]: hostname of the node's first rank
  // From hwloc, per node (of the host the node's first rank runs on).
  std::vector<int> sockets;    // [node]
  std::vector<int> numaNodes;  // [node]
  std::vector<int> cores;      // [node]: physical cores
  LinkModel intraNode;
  LinkModel interNode;
  MemoryModel memory;  // node 0's; measured only with DetectOptions::probeMemory
  // Where the layout came from: "shared-memory" (MPI_COMM_TYPE_SHARED),
  // "single-process", "BOOSTCOMM_RANKS_PER_NODE=2", "BOOSTCOMM_NODE_LAYOUT=3,1"
  // or "file:<path>".
  std::string layoutSource;

  // World ranks of `node`, ascending.
  std::vector<int> ranksOf(int node) const;
};

struct DetectOptions {
  // Measure the links with ping-pong probes; false leaves LinkModel::measured false.
  bool probe = true;
  // Probe message sizes in bytes; empty uses the built-in sweep (8 B .. 4 MiB).
  std::vector<std::size_t> probeSizesBytes;
  // Also measure node 0's memory (MemoryModel: copy rates alone and all ranks
  // at once, cache size and speed-up, fresh-page rate); ~1-2 s. Off by default
  // because every communicator-creating test would pay it; `boostcomm topo`
  // turns it on.
  bool probeMemory = false;
};

// Collective over comm: every rank calls it and every rank gets the same
// Topology. Honours BOOSTCOMM_NODE_LAYOUT / BOOSTCOMM_RANKS_PER_NODE.
Topology detectTopology(Communicator& comm, const DetectOptions& options = {});

// The topology file (JSON; format in docs/TOPOLOGY.md).
std::string topologyToJson(const Topology& topo);
Topology topologyFromJson(const std::string& text);  // throws Error{kInvalidArgument}
void saveTopology(const Topology& topo, const std::string& path);
Topology loadTopology(const std::string& path);

// Empty when `file` describes the same job layout as `job` (world size, node
// count, ranks per node, rank placement); otherwise one line per difference.
std::vector<std::string> topologyDifferences(const Topology& file, const Topology& job);

// Collective: loads `path`, detects the running job's layout (no probes) and
// throws Error{kMismatch} listing every difference when they disagree.
Topology loadTopologyFor(Communicator& comm, const std::string& path);

}  // namespace boostcomm
