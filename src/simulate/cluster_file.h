// The JSON form of a simulated cluster (format in transport/sim/sim_cluster.h
// and docs/SIMULATOR.md).
#pragma once

#include <string>

#include "transport/sim/sim_cluster.h"

namespace boostcomm::simulate {

// Throws Error{kInvalidArgument} naming the file and the bad field.
transport::sim::ClusterSpec loadClusterFile(const std::string& path);

}  // namespace boostcomm::simulate
