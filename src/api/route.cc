#include "api/route.h"

namespace boostcomm::detail {

RouteTable::RouteTable(const algorithms::SelectionMap& map, std::size_t trialFloor, bool settled)
    : trialFloor_(trialFloor), settled_(settled) {
  using algorithms::AlgorithmKind;
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    const algorithms::AlgorithmInfo* native = algorithms::findAlgorithm(coll, "native");
    const algorithms::AlgorithmInfo* shm = algorithms::findAlgorithm(coll, "shm");
    const algorithms::AlgorithmInfo* first = map.at(coll, 0).top();
    Limits& l = limits_[static_cast<std::size_t>(c)];
    if (native == nullptr || first == nullptr) continue;
    l.backend = first->kind == AlgorithmKind::kBackend;
    l.local = l.backend || first->kind == AlgorithmKind::kSharedMemory;
    if (l.backend) l.backendUpTo = map.topChoiceUpTo(*native);
    if (l.local) l.localUpTo = map.topChoiceUpTo(coll, {native, shm});
  }
}

}  // namespace boostcomm::detail
