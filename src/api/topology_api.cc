// The public topology entry points that take a Communicator: thin wrappers
// over src/topology, which works on transports and knows nothing of the API.
#include <string>
#include <vector>

#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "core/check.h"
#include "topology/detect.h"

namespace boostcomm {

Topology detectTopology(Communicator& comm, const DetectOptions& options) {
  BC_CHECK(!comm.finalized(), ErrorCategory::kFinalized, -1, "detectTopology on a finalized communicator");
  return topology::detectOnTransport(detail::implOf(comm).transport(), options);
}

Topology loadTopologyFor(Communicator& comm, const std::string& path) {
  Topology file = loadTopology(path);
  DetectOptions layoutOnly;
  layoutOnly.probe = false;
  const Topology job = detectTopology(comm, layoutOnly);
  const std::vector<std::string> differences = topologyDifferences(file, job);
  if (!differences.empty()) {
    std::string text;
    for (const auto& d : differences) text += "\n  " + d;
    core::raise(ErrorCategory::kMismatch, comm.rank(),
                "topology file '" + path + "' does not match the running job (" + job.layoutSource + "):" + text);
  }
  file.layoutSource = "file:" + path;
  return file;
}

}  // namespace boostcomm
