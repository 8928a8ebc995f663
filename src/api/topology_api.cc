// The public topology entry points that take a Communicator: thin wrappers
// over src/topology, which works on transports and knows nothing of the API.
#include <optional>
#include <string>
#include <vector>

#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "core/check.h"
#include "topology/detect.h"
#include "tuning/tuned_selection.h"

namespace boostcomm {

Topology detectTopology(Communicator& comm, const DetectOptions& options) {
  BC_CHECK(!comm.finalized(), ErrorCategory::kFinalized, -1, "detectTopology on a finalized communicator");
  return topology::detectOnTransport(detail::implOf(comm).transport(), options);
}

Topology loadTopologyFor(Communicator& comm, const std::string& path) {
  // Rank 0 reads the file and every rank parses its text: a file that is
  // missing, truncated or being rewritten on one node only makes every rank
  // fail alike, instead of one rank throwing while the others enter the
  // collective detection below and wait for it.
  BC_CHECK(!comm.finalized(), ErrorCategory::kFinalized, -1, "loadTopologyFor on a finalized communicator");
  const std::optional<std::string> text = tuning::readOnRankZero(detail::implOf(comm).transport(), path);
  BC_INVALID(text.has_value(), comm.rank(), "cannot read topology file '" << path << "' (on rank 0)");
  Topology file;
  try {
    file = topologyFromJson(*text);
  } catch (const Error& e) {
    core::raise(e.category(), comm.rank(), e.detail() + " (in '" + path + "', as read by rank 0)");
  }
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
