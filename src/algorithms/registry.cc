#include "algorithms/registry.h"

#include "algorithms/hier.h"

namespace boostcomm::algorithms {
namespace {

std::string always(const CollectiveSpec&) { return {}; }

std::string needsPowerOfTwo(const CollectiveSpec& spec) {
  if (isPowerOfTwo(spec.size)) return {};
  return "needs a power-of-two number of ranks (have " + std::to_string(spec.size) + ")";
}

constexpr Collective kAR = Collective::kAllreduce;
constexpr Collective kAG = Collective::kAllgather;
constexpr Collective kBC = Collective::kBroadcast;
constexpr Collective kRS = Collective::kReduceScatter;
constexpr Collective kBA = Collective::kBarrier;
constexpr bool kCarriesWire = true;  // AlgorithmInfo::carriesWire
constexpr AlgorithmKind kNative = AlgorithmKind::kBackend;
constexpr AlgorithmKind kShm = AlgorithmKind::kSharedMemory;
constexpr AlgorithmKind kP2P = AlgorithmKind::kPointToPoint;
constexpr AlgorithmKind kHier = AlgorithmKind::kHierarchical;

const AlgorithmInfo kAlgorithms[] = {
    {"native", kAR, kNative, nativeUnsupported, buildNative, "the backend's own MPI_Allreduce"},
    {"shm", kAR, kShm, shmUnsupported, buildShm,
     "one node: each rank reduces its slice of every chunk straight from its peers' shared memory"},
    {"ring", kAR, kP2P, always, buildAllreduceRing,
     "pipelined ring reduce-scatter + allgather; bandwidth-optimal, 2(n-1) latency steps", kCarriesWire},
    {"rhd", kAR, kP2P, always, buildAllreduceRhd,
     "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather; any n (extra ranks fold in)",
     kCarriesWire},
    {"rd", kAR, kP2P, always, buildAllreduceRecursiveDoubling,
     "recursive doubling on whole vectors; log2(n) steps, for small messages; any n (fold)"},
    {"hier", kAR, kHier, hierarchicalUnsupported, buildAllreduceHier,
     "intra-node reduce-scatter, inter-node allreduce per shard, intra-node allgather; pipelined pieces", kCarriesWire},
    {"native", kAG, kNative, nativeUnsupported, buildNative, "the backend's own MPI_Allgatherv"},
    {"shm", kAG, kShm, shmUnsupported, buildShm, "one node: every rank copies its peers' blocks from shared memory"},
    {"hier", kAG, kHier, hierarchicalUnsupported, buildAllgatherHier,
     "inter-node ring per local rank, then intra-node rings per node", kCarriesWire},
    {"ring", kAG, kP2P, always, buildAllgatherRing, "pipelined ring; varying counts", kCarriesWire},
    {"rd", kAG, kP2P, needsPowerOfTwo, buildAllgatherRecursiveDoubling, "recursive doubling; power-of-two ranks"},
    {"native", kBC, kNative, nativeUnsupported, buildNative, "the backend's own MPI_Bcast"},
    {"shm", kBC, kShm, shmUnsupported, buildShm, "one node: every rank copies the root's buffer from shared memory"},
    {"binomial", kBC, kP2P, always, buildBroadcastBinomial, "binomial tree, pipelined over chunks"},
    {"hier", kBC, kHier, hierarchicalUnsupported, buildBroadcastHier, "binomial across nodes, then binomial inside each node"},
    {"native", kRS, kNative, nativeUnsupported, buildNative, "the backend's own MPI_Reduce_scatter_block"},
    {"shm", kRS, kShm, shmUnsupported, buildShm, "one node: each rank reduces its block straight from shared memory"},
    {"ring", kRS, kP2P, always, buildReduceScatterRing, "pipelined ring reduce-scatter", kCarriesWire},
    {"hier", kRS, kHier, hierarchicalUnsupported, buildReduceScatterHier,
     "intra-node ring reduce-scatters per destination node, then an inter-node ring reduce-scatter", kCarriesWire},
    {"native", kBA, kNative, nativeUnsupported, buildNative, "the backend's own MPI_Barrier"},
    {"dissemination", kBA, kP2P, always, buildBarrierDissemination, "dissemination barrier, ceil(log2 n) rounds"},
};

}  // namespace

std::span<const AlgorithmInfo> allAlgorithms() { return kAlgorithms; }

const AlgorithmInfo* findAlgorithm(Collective collective, std::string_view name) {
  for (const AlgorithmInfo& a : kAlgorithms) {
    if (a.collective == collective && name == a.name) return &a;
  }
  return nullptr;
}

bool wireCollective(Collective collective) {
  for (const AlgorithmInfo& a : kAlgorithms) {
    if (a.collective == collective && a.carriesWire) return true;
  }
  return false;
}

std::vector<std::string> algorithmNames(Collective collective) {
  std::vector<std::string> names;
  for (const AlgorithmInfo& a : kAlgorithms) {
    if (a.collective == collective) names.emplace_back(a.name);
  }
  return names;
}

}  // namespace boostcomm::algorithms
