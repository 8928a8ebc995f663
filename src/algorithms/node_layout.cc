#include "algorithms/node_layout.h"

#include <charconv>
#include <map>

#include "core/check.h"

namespace boostcomm::algorithms {
namespace {

int parsePositive(std::string_view text, const char* variable) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  BC_INVALID(ec == std::errc() && ptr == text.data() + text.size() && value > 0, -1,
             variable << "='" << text << "' is not a positive integer");
  return value;
}

NodeLayout fromSizes(const std::vector<int>& sizes) {
  std::vector<long long> ids;
  for (std::size_t node = 0; node < sizes.size(); ++node) ids.insert(ids.end(), static_cast<std::size_t>(sizes[node]), static_cast<long long>(node));
  return layoutFromNodeIds(ids);
}

}  // namespace

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
  for (const auto& m : members) out += (out.empty() ? "" : "+") + std::to_string(m.size());
  return out;
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

NodeLayout parseLayoutOverride(std::string_view ranksPerNode, std::string_view explicitLayout, int worldSize) {
  if (ranksPerNode == "0") ranksPerNode = {};  // the registry's "not declared"
  BC_INVALID(ranksPerNode.empty() || explicitLayout.empty(), -1,
             "set only one of BOOSTCOMM_RANKS_PER_NODE and BOOSTCOMM_NODE_LAYOUT");
  if (!ranksPerNode.empty()) {
    const int per = parsePositive(ranksPerNode, "BOOSTCOMM_RANKS_PER_NODE");
    BC_INVALID(worldSize % per == 0, -1,
               "BOOSTCOMM_RANKS_PER_NODE=" << per << " does not divide the " << worldSize
                                           << " ranks (use BOOSTCOMM_NODE_LAYOUT=a,b,... for uneven nodes)");
    return fromSizes(std::vector<int>(static_cast<std::size_t>(worldSize / per), per));
  }
  if (!explicitLayout.empty()) {
    std::vector<int> sizes;
    int total = 0;
    std::size_t start = 0;
    while (start <= explicitLayout.size()) {
      const std::size_t comma = explicitLayout.find(',', start);
      const std::string_view part =
          explicitLayout.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      sizes.push_back(parsePositive(part, "BOOSTCOMM_NODE_LAYOUT"));
      total += sizes.back();
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    BC_INVALID(total == worldSize, -1,
               "BOOSTCOMM_NODE_LAYOUT='" << explicitLayout << "' declares " << total << " ranks but the job has "
                                         << worldSize);
    return fromSizes(sizes);
  }
  return {};
}

}  // namespace boostcomm::algorithms
