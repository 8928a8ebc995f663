#include "algorithms/node_layout.h"

#include <map>


namespace boostcomm::algorithms {

NodeLayout layoutFromSizes(const std::vector<int>& sizes) {
  std::vector<long long> ids;
  for (std::size_t node = 0; node < sizes.size(); ++node) ids.insert(ids.end(), static_cast<std::size_t>(sizes[node]), static_cast<long long>(node));
  return layoutFromNodeIds(ids);
}

bool NodeLayout::uniform() const {
  for (const auto& m : members) {
    if (m.size() != members.front().size()) return false;
  }
  return !members.empty();
}

int NodeLayout::ranksPerNode() const { return uniform() ? static_cast<int>(members.front().size()) : 0; }

std::string NodeLayout::describe() const {
  if (members.empty()) return "unknown";
  if (uniform()) return std::to_string(nodes()) + "x" + std::to_string(ranksPerNode());
  std::string out;
  for (const auto& m : members) {
    if (!out.empty()) out += '+';
    out += std::to_string(m.size());
  }
  return out;
}

std::vector<int> NodeLayout::nodeSizes() const {
  std::vector<int> sizes;
  for (const auto& m : members) sizes.push_back(static_cast<int>(m.size()));
  return sizes;
}

NodeLayout layoutFromNodeIds(const std::vector<long long>& nodeIdOfRank) {
  NodeLayout layout;
  std::map<long long, int> nodeIndex;  // id -> node number, in order of first rank
  const int n = static_cast<int>(nodeIdOfRank.size());
  layout.nodeOfRank.resize(static_cast<std::size_t>(n));
  layout.localRankOf.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto [it, fresh] = nodeIndex.emplace(nodeIdOfRank[static_cast<std::size_t>(r)], layout.nodes());
    if (fresh) layout.members.emplace_back();
    const int node = it->second;
    layout.nodeOfRank[static_cast<std::size_t>(r)] = node;
    layout.localRankOf[static_cast<std::size_t>(r)] = static_cast<int>(layout.members[static_cast<std::size_t>(node)].size());
    layout.members[static_cast<std::size_t>(node)].push_back(r);
  }
  return layout;
}

}  // namespace boostcomm::algorithms
