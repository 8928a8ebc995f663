#include "algorithms/native_model.h"

#include "algorithms/registry.h"
#include "core/check.h"

namespace boostcomm::algorithms {

const char* nativeModelOf(Collective collective, std::size_t bytes, int ranks) {
  switch (collective) {
    case Collective::kAllreduce:
      if (bytes < (std::size_t{64} << 10)) return "rd";
      return ranks < 4 ? "rhd" : "ring";
    case Collective::kAllgather: return "ring";
    case Collective::kBroadcast: return "binomial";
    case Collective::kReduceScatter: return "ring";
    case Collective::kBarrier: return "dissemination";
  }
  return "ring";
}

executor::LevelBytes nativeLinkBytes(const executor::NativeCall& call, int comm, DataType dtype, const NodeLayout& layout,
                                     int rank) {
  executor::LevelBytes out{};
  const auto r = static_cast<std::size_t>(rank);
  if (r >= layout.nodeOfRank.size()) return out;
  const int node = layout.nodeOfRank[r];
  CollectiveSpec sub;
  sub.collective = call.collective;
  sub.dtype = dtype;
  sub.op = ReduceOp::kSum;
  sub.count = call.count;
  sub.root = call.root;
  if (comm == executor::kIntraComm) {
    sub.rank = layout.localRankOf[r];
    sub.size = static_cast<int>(layout.members[static_cast<std::size_t>(node)].size());
  } else if (comm == executor::kInterComm) {
    sub.rank = node;
    sub.size = layout.nodes();
  } else {
    sub.rank = rank;
    sub.size = static_cast<int>(layout.nodeOfRank.size());
  }
  if (sub.size <= 1) return out;
  const AlgorithmInfo* algo = findAlgorithm(call.collective, nativeModelOf(call.collective, sub.payloadBytes(), sub.size));
  BC_INTERNAL(algo != nullptr, "native model: no algorithm for " << toString(call.collective));
  if (!algo->unsupportedReason(sub).empty()) return out;
  executor::Schedule schedule(sub.collective, sub.dtype, sub.op, algo->name);
  algo->build(sub, schedule);
  for (const executor::Step& s : schedule.steps()) {
    if (s.kind != executor::StepKind::kSend) continue;
    int level = executor::kIntraLevel;
    if (comm == executor::kInterComm) {
      level = executor::kInterLevel;
    } else if (comm == executor::kWorldComm) {
      const auto peer = static_cast<std::size_t>(s.peer);
      level = peer < layout.nodeOfRank.size() && layout.nodeOfRank[peer] != node ? executor::kInterLevel
                                                                                : executor::kIntraLevel;
    }
    out[static_cast<std::size_t>(level)] += s.bytes;
  }
  return out;
}

}  // namespace boostcomm::algorithms
