#include "algorithms/hier.h"

#include <algorithm>

namespace boostcomm::algorithms {

std::string hierarchicalUnsupported(const CollectiveSpec& spec) {
  if (spec.layout == nullptr || spec.layout->nodes() < 2) {
    return "needs several nodes (layout " + (spec.layout ? spec.layout->describe() : std::string("unknown")) + ")";
  }
  if (!spec.layout->uniform()) {
    return "needs the same number of ranks on every node (layout " + spec.layout->describe() +
           "); flat algorithms serve uneven layouts";
  }
  if (spec.layout->ranksPerNode() < 2) return "needs several ranks per node (layout " + spec.layout->describe() + ")";
  return {};
}

HierContext makeHierContext(const CollectiveSpec& spec, int phasesPerPiece) {
  const NodeLayout& layout = *spec.layout;
  // Pipeline pieces: enough to overlap phases, few enough that each piece
  // still moves whole chunks (one piece per 4 chunks of payload, at most
  // spec.hierMaxPieces, BOOSTCOMM_HIER_MAX_PIECES).
  const std::size_t bytes = spec.payloadBytes();
  const std::size_t perPiece = std::max<std::size_t>(spec.chunkBytes, 1) * 4;
  const std::size_t maxPieces = static_cast<std::size_t>(std::max(spec.hierMaxPieces, 1));
  const int pieces = static_cast<int>(std::clamp<std::size_t>((bytes + perPiece - 1) / perPiece, 1, maxPieces));
  const int windows = pieces * phasesPerPiece;
  return HierContext{layout,
                     layout.nodeOfRank[static_cast<std::size_t>(spec.rank)],
                     layout.localRankOf[static_cast<std::size_t>(spec.rank)],
                     layout.nodes(),
                     layout.ranksPerNode(),
                     pieces,
                     spec.tagSpan / windows};
}

CollectiveSpec subSpec(const CollectiveSpec& spec, const HierContext& ctx, std::uint8_t comm, int phaseTags) {
  CollectiveSpec sub = spec;
  sub.layout = nullptr;
  sub.counts.clear();
  sub.rank = comm == executor::kIntraComm ? ctx.localRank : ctx.node;
  // Only the inter-node level compresses (it is the slow link).
  if (comm == executor::kIntraComm) sub.wire = WireFormat::kOff;
  sub.size = comm == executor::kIntraComm ? ctx.perNode : ctx.nodes;
  // The phase's builder keeps its tags inside the phase's window; rings use
  // 2(n-1) per chunk.
  sub.tagSpan = phaseTags;
  sub.maxChunks = std::max(1, std::min(spec.maxChunks, phaseTags / std::max(2 * sub.size, 1)));
  return sub;
}

}  // namespace boostcomm::algorithms
