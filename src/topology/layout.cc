#include "topology/layout.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>
#include <sstream>

#include "core/check.h"
#include "core/tunables.h"

namespace boostcomm::topology {
namespace {

// The divisors of n, as the valid values of a uniform layout.
std::string divisorsOf(int n) {
  std::ostringstream os;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) os << (d == 1 ? "" : ", ") << d;
  }
  return os.str();
}

}  // namespace

std::vector<int> parseNodeLayout(std::string_view text, int worldSize, int rank, std::string_view what) {
  std::vector<int> counts;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    int value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    BC_INVALID(!item.empty() && ec == std::errc() && ptr == item.data() + item.size() && value > 0, rank,
               what << "='" << text << "': '" << item
                    << "' is not a positive rank count (valid: comma-separated positive integers summing to "
                    << worldSize << ", e.g. '" << (worldSize > 1 ? worldSize - 1 : 1)
                    << (worldSize > 1 ? ",1" : "") << "')");
    counts.push_back(value);
    pos = comma + 1;
  }
  const long long sum = std::accumulate(counts.begin(), counts.end(), 0LL);
  BC_INVALID(sum == worldSize, rank,
             what << "='" << text << "' places " << sum << " ranks but the job has " << worldSize
                  << " (valid: comma-separated positive integers summing to " << worldSize << ")");
  return counts;
}

std::vector<int> uniformLayout(long long ranksPerNode, int worldSize, int rank, std::string_view what) {
  BC_INVALID(ranksPerNode > 0 && ranksPerNode <= worldSize && worldSize % ranksPerNode == 0, rank,
             what << "=" << ranksPerNode << " does not divide the " << worldSize
                  << " ranks of this job (valid: " << divisorsOf(worldSize)
                  << "; for uneven nodes use BOOSTCOMM_NODE_LAYOUT, e.g. '3,1')");
  return std::vector<int>(static_cast<std::size_t>(worldSize / ranksPerNode), static_cast<int>(ranksPerNode));
}

std::optional<LayoutOverride> layoutOverrideFromEnv(int worldSize, int rank) {
  const std::string layout = core::tunableString(core::kTunableNodeLayout);
  const std::int64_t perNode = core::tunableInt(core::kTunableRanksPerNode);
  BC_INVALID(layout.empty() || perNode == 0, rank,
             "both " << core::kTunableNodeLayout << "='" << layout << "' and " << core::kTunableRanksPerNode << "="
                     << perNode << " are set: set only one");
  if (!layout.empty()) {
    return LayoutOverride{parseNodeLayout(layout, worldSize, rank, core::kTunableNodeLayout.env),
                          std::string(core::kTunableNodeLayout) + "=" + layout};
  }
  if (perNode != 0) {
    return LayoutOverride{uniformLayout(perNode, worldSize, rank, core::kTunableRanksPerNode.env),
                          std::string(core::kTunableRanksPerNode) + "=" + std::to_string(perNode)};
  }
  return std::nullopt;
}

void setLayoutFromNodeIds(Topology& topo, const std::vector<int>& nodeIdOfRank) {
  const int worldSize = static_cast<int>(nodeIdOfRank.size());
  std::map<int, int> nodeOfLabel;  // label -> node index, in order of first (lowest) rank
  topo.worldSize = worldSize;
  topo.nodeOfRank.assign(static_cast<std::size_t>(worldSize), 0);
  topo.localRankOfRank.assign(static_cast<std::size_t>(worldSize), 0);
  topo.ranksPerNode.clear();
  for (int r = 0; r < worldSize; ++r) {
    auto [it, inserted] = nodeOfLabel.try_emplace(nodeIdOfRank[static_cast<std::size_t>(r)],
                                                  static_cast<int>(nodeOfLabel.size()));
    if (inserted) topo.ranksPerNode.push_back(0);
    const int node = it->second;
    topo.nodeOfRank[static_cast<std::size_t>(r)] = node;
    topo.localRankOfRank[static_cast<std::size_t>(r)] = topo.ranksPerNode[static_cast<std::size_t>(node)]++;
  }
  topo.nodes = static_cast<int>(topo.ranksPerNode.size());
}

void setLayoutFromCounts(Topology& topo, const std::vector<int>& ranksPerNode) {
  std::vector<int> ids;
  for (std::size_t node = 0; node < ranksPerNode.size(); ++node) {
    ids.insert(ids.end(), static_cast<std::size_t>(ranksPerNode[node]), static_cast<int>(node));
  }
  setLayoutFromNodeIds(topo, ids);
}

}  // namespace boostcomm::topology
