// Link accounting: bytes and busy time per level (intra-node, inter-node),
// per rank and per node. Definitions in docs/OVERLAP.md, "Link accounting".
//
// Observed bytes are boostcomm's own send steps. Modelled bytes are backend
// (MPI) and shared-memory collectives, whose messages boostcomm cannot see:
// the sends of the algorithm the simulator models that call as, on this rank.
// On by default (BOOSTCOMM_LINK_STATS=0 turns it off): a couple of clock
// reads per step, no system call, no allocation in steady state.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace boostcomm {

class Communicator;

struct LinkLevelStats {
  std::uint64_t bytes = 0;          // observed + modelled, sent by this rank (node: its ranks)
  std::uint64_t observedBytes = 0;
  std::uint64_t modelledBytes = 0;
  std::uint64_t messages = 0;       // send steps
  std::uint64_t collectives = 0;    // backend / shm calls with bytes on this level
  double busySeconds = 0;           // rank: time with a transfer in flight (union); node: intra the rank sum, inter the union over its ranks
};

// One rank's counters since the last reset.
struct LinkStats {
  bool enabled = false;
  int node = 0;
  LinkLevelStats intraNode;
  LinkLevelStats interNode;
  // Inter-node in-flight intervals [start, end), steady_clock nanoseconds
  // (one clock per host, so ranks of one node can merge them).
  std::vector<std::pair<std::int64_t, std::int64_t>> interNodeIntervalsNs;
  std::uint64_t droppedIntervals = 0;  // folded out of the 4096-per-level buffer: lost to congestion
};

// One node: its ranks' counters summed, and its inter-node link's occupancy
// from their merged in-flight intervals.
struct NodeLinkStats {
  int node = 0;
  int ranks = 0;
  LinkLevelStats intraNode;
  LinkLevelStats interNode;        // busySeconds: time any of its ranks had an inter-node transfer in flight
  double interCongestedSeconds = 0;  // time two or more were in flight at once
};

// Collective: every rank's LinkStats merged per node, on every rank (node
// order). reset: the counters restart after this call (its own messages are
// not counted either).
std::vector<NodeLinkStats> nodeLinkStats(Communicator& comm, bool reset = false);
// Collective: the same from a snapshot each rank took earlier (e.g. at the end
// of a timed window, before other traffic).
std::vector<NodeLinkStats> mergeNodeLinkStats(Communicator& comm, const LinkStats& mine);

}  // namespace boostcomm
