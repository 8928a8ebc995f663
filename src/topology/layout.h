// Layouts: which world ranks form each node. Pure functions, no transport.
//
// A layout is given either by a node id per rank (what detection finds) or by
// ranks per node, consecutive ranks grouped (what the env overrides declare).
// Both are normalised the same way: nodes numbered by their lowest rank.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/topology.h"

namespace boostcomm::topology {

struct LayoutOverride {
  std::vector<int> ranksPerNode;
  std::string source;  // "BOOSTCOMM_RANKS_PER_NODE=2" / "BOOSTCOMM_NODE_LAYOUT=3,1"
};

// "3,1" -> {3, 1}; every entry a positive integer and the sum == worldSize,
// or Error{kInvalidArgument} naming `what` and what would be valid.
std::vector<int> parseNodeLayout(std::string_view text, int worldSize, int rank, std::string_view what);
// ranksPerNode ranks on each node; must divide worldSize.
std::vector<int> uniformLayout(long long ranksPerNode, int worldSize, int rank, std::string_view what);
// The layout declared by BOOSTCOMM_NODE_LAYOUT or BOOSTCOMM_RANKS_PER_NODE
// (setting both is an error); empty when neither is set.
std::optional<LayoutOverride> layoutOverrideFromEnv(int worldSize, int rank);

// Fills worldSize, nodes, ranksPerNode, nodeOfRank, localRankOfRank.
// nodeIdOfRank: any label per rank; equal labels share a node.
void setLayoutFromNodeIds(Topology& topo, const std::vector<int>& nodeIdOfRank);
void setLayoutFromCounts(Topology& topo, const std::vector<int>& ranksPerNode);

}  // namespace boostcomm::topology
