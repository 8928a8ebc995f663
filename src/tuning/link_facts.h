// Link facts a communicator learns when it is created: what the cost model
// needs to pick algorithms on a multi-node layout without a tuning cache.
//
// One node: nothing is probed (the built-in selection table was measured on
// one host and decides there). Several nodes: the leaders of nodes 0 and 1
// ping-pong 8 B and 2 MiB (one warm-up and kLinkProbeReps timed round
// trips each; the fastest counts): latency from the first, bandwidth from
// what the second adds. Node 0's
// leader broadcasts the fit and its core count, so every rank builds the
// same model. 2 MiB exceeds a token-bucket shaper's burst (the emulated
// cluster's is 500 KB at 1 Gbit/s) and TCP's first windows: smaller probes
// measured 1.9 GB/s on a 1 Gbit/s link. Cost: 8 round trips, dominated by
// 4 x 2 x 2 MiB crossing the link: ~0.14 s at 1 Gbit/s, ~15 ms at 10 Gbit/s.
// Rejected: probing every node pair (creation cost grows with N^2 for a fact
// the model uses once: its slowest-link assumption) and reusing the full
// `boostcomm topo` sweep (0.3-2 s at 1 Gbit/s).
#pragma once

#include "algorithms/node_layout.h"
#include "boostcomm/topology.h"
#include "transport/transport.h"

namespace boostcomm::tuning {

struct LinkFacts {
  LinkModel inter;        // measured = false: not probed (one node, or BOOSTCOMM_LINK_PROBE=0)
  int coresPerNode = 0;   // node 0's leader's hardware threads; 0 = unknown
  double probeMs = 0.0;   // wall time of the probe on this rank (creation cost)
};

// Collective over `world` whenever layout.nodes() > 1 (every rank must call
// it); returns the same facts on every rank.
LinkFacts learnLinkFacts(transport::Transport& world, const algorithms::NodeLayout& layout);

}  // namespace boostcomm::tuning
