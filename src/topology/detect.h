// Detection on a transport: the engine behind detectTopology(Communicator&),
// usable by algorithms that hold a transport rather than a Communicator.
#pragma once

#include <string>

#include "boostcomm/topology.h"
#include "transport/transport.h"

namespace boostcomm::topology {

// Collective over `world`. Works on a private split of it, so probe messages
// never match traffic of the communicator that owns `world`. Nodes come from
// MPI_COMM_TYPE_SHARED on an MPI transport (one node for any other
// transport: its ranks are threads of one process), unless an env override
// declares a layout. Every rank returns the same Topology.
Topology detectOnTransport(transport::Transport& world, const DetectOptions& options);

// This host's name as detection records it in Topology::hostnames (at most
// 63 bytes; "unknown" when gethostname fails).
std::string thisHostname();

}  // namespace boostcomm::topology
