// Hierarchical allreduce, per pipeline piece of the vector:
//   1. intra-node reduce-scatter (ring): local rank l ends with shard l of the
//      piece summed over its node — or, when the node communicator has a
//      shared-memory engine, a shm allreduce of the piece (memory speed);
//   2. inter-node allreduce of shard l among the ranks with local rank l on
//      every node (ring by default, BOOSTCOMM_HIER_INTER_ALGO), all local ranks in
//      parallel, each on its own shard: the slow links carry 2(N-1)/N of the
//      vector per node, split over L parallel streams;
//   3. intra-node allgather (ring) of the shards.
// kAvg sums in phases 1 and 3 and divides once, by the world size, when phase
// 2 finalises a shard. Every element is computed by one rank and copied, so
// ranks agree bitwise. Phases of one piece run in order; pieces overlap.
//
// Wire format (spec.wire): only phase 2 crosses the slow link, so only it
// sends 16-bit messages (its ring or rhd, which round each finished shard on
// its owner; a native inter phase cannot, and gives way to the ring); the
// intra-node phases move float32, and phase 3 copies the rounded shards.
#include "algorithms/hier.h"
#include "algorithms/registry.h"

namespace boostcomm::algorithms {

using executor::BufferId;
using executor::BufRef;
using executor::Frame;

void buildAllreduceHier(const CollectiveSpec& spec, executor::Schedule& schedule) {
  const HierContext ctx = makeHierContext(spec, 3);
  const std::size_t es = spec.elementSize();
  const AlgorithmInfo* inter = findAlgorithm(Collective::kAllreduce, spec.interAlgorithm);
  if (inter == nullptr || inter->build == buildAllreduceHier ||
      (spec.wire != WireFormat::kOff && !inter->carriesWire)) {
    inter = findAlgorithm(Collective::kAllreduce, "ring");
  }
  int window = 0;
  for (int p = 0; p < ctx.pieces; ++p) {
    const Range piece = evenPart(spec.count, ctx.pieces, p);
    std::vector<std::size_t> shards(static_cast<std::size_t>(ctx.perNode));
    for (int j = 0; j < ctx.perNode; ++j) shards[static_cast<std::size_t>(j)] = evenPart(piece.count, ctx.perNode, j).count;
    const Range shard = evenPart(piece.count, ctx.perNode, ctx.localRank);
    const BufRef pieceIn{BufferId::kSend, piece.offset * es};
    const BufRef pieceOut{BufferId::kRecv, piece.offset * es};
    const BufRef shardOut{BufferId::kRecv, (piece.offset + shard.offset) * es};

    std::vector<StepId> phase1;
    if (spec.intraSharedMemory) {
      // Shared memory inside the node: reduce the whole piece at memory speed
      // (every local rank gets the node's sum; each then forwards its shard).
      CollectiveSpec ar = subSpec(spec, ctx, executor::kIntraComm, ctx.phaseTags);
      ar.count = piece.count;
      ar.avgDivisor = 1;  // kAvg divides once, in phase 2
      phase1 = inFrame(schedule, Frame{executor::kIntraComm, ctx.phaseTags * window++, pieceIn, pieceOut, {}},
                       [&] { buildShm(ar, schedule); });
    } else {
      CollectiveSpec rs = subSpec(spec, ctx, executor::kIntraComm, ctx.phaseTags);
      rs.collective = Collective::kReduceScatter;
      rs.op = spec.op == ReduceOp::kAvg ? ReduceOp::kSum : spec.op;
      rs.counts = shards;
      rs.count = shard.count;
      phase1 = inFrame(schedule, Frame{executor::kIntraComm, ctx.phaseTags * window++, pieceIn, shardOut, {}},
                       [&] { buildReduceScatterRing(rs, schedule); });
    }

    CollectiveSpec ar = subSpec(spec, ctx, executor::kInterComm, ctx.phaseTags);
    ar.count = shard.count;
    ar.avgDivisor = spec.size;
    const auto phase2 = inFrame(schedule, Frame{executor::kInterComm, ctx.phaseTags * window++, shardOut, shardOut, phase1},
                                [&] { inter->build(ar, schedule); });

    CollectiveSpec ag = subSpec(spec, ctx, executor::kIntraComm, ctx.phaseTags);
    ag.collective = Collective::kAllgather;
    ag.counts = shards;
    ag.count = shard.count;
    inFrame(schedule, Frame{executor::kIntraComm, ctx.phaseTags * window++, shardOut, pieceOut, phase2},
            [&] { buildAllgatherRing(ag, schedule); });
  }
}

}  // namespace boostcomm::algorithms
