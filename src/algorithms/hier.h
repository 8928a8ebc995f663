// Shared pieces of the hierarchical (intra-node, then inter-node) algorithms.
//
// A hierarchical schedule is composed of flat builders run inside
// executor::Frame's: each phase addresses the intra-node or inter-node
// communicator, uses its own window of tags, sees redirected send/recv
// buffers, and starts when the previous phase of the same piece has finished.
// The payload is cut into pieces so that, e.g., piece 1's intra-node
// reduce-scatter runs while piece 0 crosses the slow inter-node link.
#pragma once

#include <string>

#include "algorithms/node_layout.h"
#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

// Empty when `spec` can run hierarchically, else why not.
std::string hierarchicalUnsupported(const CollectiveSpec& spec);

struct HierContext {
  const NodeLayout& layout;
  int node;        // this rank's node index (its rank in the inter communicator)
  int localRank;   // its rank in the intra communicator
  int nodes;       // inter communicator size
  int perNode;     // intra communicator size
  int pieces;      // pipeline pieces
  int phaseTags;   // tags per (piece, phase) window
};

HierContext makeHierContext(const CollectiveSpec& spec, int phasesPerPiece);

// A sub-communicator view of `spec`: rank/size of the intra or inter communicator.
CollectiveSpec subSpec(const CollectiveSpec& spec, const HierContext& ctx, std::uint8_t comm, int phaseTags);

// Runs `build` inside a frame; returns the sinks of the steps it added.
template <typename Build>
std::vector<StepId> inFrame(executor::Schedule& schedule, executor::Frame frame, Build&& build) {
  const StepId begin = static_cast<StepId>(schedule.steps().size());
  schedule.pushFrame(std::move(frame));
  build();
  schedule.popFrame();
  return schedule.sinks(begin, static_cast<StepId>(schedule.steps().size()));
}

}  // namespace boostcomm::algorithms
