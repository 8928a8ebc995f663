// Which world ranks share a node: the input of hierarchical algorithms.
//
// Ranks of a node are numbered by ascending world rank ("local rank"); nodes
// by their lowest world rank. The intra-node communicator of a rank holds its
// node's ranks in local-rank order; the inter-node communicator of local rank
// l holds local rank l of every node, in node order (needs equal ranks per node).
#pragma once

#include <string>
#include <vector>

namespace boostcomm::algorithms {

struct NodeLayout {
  std::vector<int> nodeOfRank;
  std::vector<int> localRankOf;
  std::vector<std::vector<int>> members;  // node -> world ranks, ascending

  int nodes() const { return static_cast<int>(members.size()); }
  // Ranks of each node, in node order.
  std::vector<int> nodeSizes() const;
  bool uniform() const;
  // Ranks per node when uniform(), else 0.
  int ranksPerNode() const;
  // "2x2", or "3+1" when uneven.
  std::string describe() const;
};

// From any per-rank node identifier (hostname hash, leader rank, ...).
NodeLayout layoutFromNodeIds(const std::vector<long long>& nodeIdOfRank);

// From node sizes in rank order (consecutive ranks share a node), e.g. {3, 1}.
NodeLayout layoutFromSizes(const std::vector<int>& ranksPerNode);

}  // namespace boostcomm::algorithms
