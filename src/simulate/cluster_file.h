// The JSON form of a simulated cluster (format in simulate/sim_cluster.h
// and docs/SIMULATOR.md).
#pragma once

#include <string>
#include <vector>

#include "boostcomm/topology.h"
#include "simulate/sim_cluster.h"

namespace boostcomm::simulate {

// Throws Error{kInvalidArgument} naming the file and the bad field.
simulate::ClusterSpec loadClusterFile(const std::string& path);

// The cluster a `boostcomm topo --output` file measured: its shape, its
// links (unmeasured ones keep the defaults), host-memory messages
// (intraCopyOnCpu) and, when the file has a measured "memory" section, the
// per-rank copy rate (compute engines), the node's summed rate (node bus),
// its cache and its fresh-page rate. `path` is only named in errors.
simulate::ClusterSpec clusterFromTopology(const Topology& topo, const std::string& path);

// Several measurements of one machine (e.g. `boostcomm topo` before and after
// a benchmark) as one cluster: every rate, latency and cache speed-up is the
// median over them, so one noisy probe run does not decide the prediction.
// The clusters must agree on shape, host copies and cache points' sizes.
simulate::ClusterSpec medianCluster(const std::vector<simulate::ClusterSpec>& clusters);

}  // namespace boostcomm::simulate
