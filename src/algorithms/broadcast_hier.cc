// Hierarchical broadcast, per pipeline piece: the ranks that share the root's
// local rank carry the piece across nodes (binomial tree over the inter-node
// communicator, rooted at the root's node), then every node spreads it
// internally (binomial over the intra-node communicator, rooted at that
// rank). The slow links carry each byte once per node.
#include "algorithms/hier.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;
using executor::Frame;

void buildBroadcastHier(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const HierContext ctx = makeHierContext(spec, 2);
  const std::size_t es = spec.elementSize();
  const int rootNode = ctx.layout.nodeOfRank[static_cast<std::size_t>(spec.root)];
  const int rootLocal = ctx.layout.localRankOf[static_cast<std::size_t>(spec.root)];
  int window = 0;
  for (int p = 0; p < ctx.pieces; ++p) {
    const Range piece = evenPart(spec.count, ctx.pieces, p);
    const BufRef part{BufferId::kRecv, piece.offset * es};
    std::vector<StepId> crossed;
    const int interWindow = window++;
    if (ctx.localRank == rootLocal) {
      CollectiveSpec inter = subSpec(spec, ctx, executor::kInterComm, ctx.phaseTags);
      inter.count = piece.count;
      inter.root = rootNode;
      crossed = inFrame(schedule, Frame{executor::kInterComm, ctx.phaseTags * interWindow, part, part, {}},
                        [&] { buildBroadcastBinomial(inter, schedule); });
    }
    CollectiveSpec intra = subSpec(spec, ctx, executor::kIntraComm, ctx.phaseTags);
    intra.count = piece.count;
    intra.root = rootLocal;
    inFrame(schedule, Frame{executor::kIntraComm, ctx.phaseTags * window++, part, part, crossed},
            [&] { buildBroadcastBinomial(intra, schedule); });
  }
}

}  // namespace boostcomm::algorithms
