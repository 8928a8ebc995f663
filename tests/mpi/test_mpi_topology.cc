// detectTopology under mpirun: every rank must get the same answer, the
// layout must be the declared one (BOOSTCOMM_RANKS_PER_NODE /
// BOOSTCOMM_NODE_LAYOUT) or, without one, the shared-memory one; a topology
// file of another layout must be refused on every rank with kMismatch.
// BC_TEST_EXPECT_NODES=N additionally requires N nodes (the emulated cluster).
// Own main; exit 0 when every check passed on every rank.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/topology.h"

namespace {

int failures = 0;
int worldRank = 0;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "rank %d: FAILED %s: ", worldRank, #cond);     \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

// Rank 0's text on every rank.
std::string broadcastText(std::string text) {
  int length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

// The node layout expected from the environment, or from MPI itself.
std::vector<int> expectedNodeOfRank(int size) {
  std::vector<int> nodeOf(static_cast<std::size_t>(size));
  std::vector<int> counts;
  if (const char* layout = std::getenv("BOOSTCOMM_NODE_LAYOUT"); layout != nullptr && *layout != '\0') {
    for (const char* p = layout; *p != '\0';) {
      char* end = nullptr;
      counts.push_back(static_cast<int>(std::strtol(p, &end, 10)));
      p = *end == ',' ? end + 1 : end;
    }
  } else if (const char* perNode = std::getenv("BOOSTCOMM_RANKS_PER_NODE"); perNode != nullptr && std::atoi(perNode) > 0) {
    counts.assign(static_cast<std::size_t>(size / std::atoi(perNode)), std::atoi(perNode));
  }
  if (!counts.empty()) {
    int r = 0;
    for (std::size_t node = 0; node < counts.size(); ++node) {
      for (int i = 0; i < counts[node] && r < size; ++i) nodeOf[static_cast<std::size_t>(r++)] = static_cast<int>(node);
    }
    return nodeOf;
  }
  // No declaration: the ranks sharing memory, numbered by their lowest rank.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank, MPI_INFO_NULL, &local);
  int leader = worldRank;
  MPI_Bcast(&leader, 1, MPI_INT, 0, local);
  MPI_Comm_free(&local);
  std::vector<int> leaders(static_cast<std::size_t>(size));
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> seen;
  for (int r = 0; r < size; ++r) {
    int node = 0;
    while (node < static_cast<int>(seen.size()) && seen[static_cast<std::size_t>(node)] != leaders[static_cast<std::size_t>(r)]) ++node;
    if (node == static_cast<int>(seen.size())) seen.push_back(leaders[static_cast<std::size_t>(r)]);
    nodeOf[static_cast<std::size_t>(r)] = node;
  }
  return nodeOf;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    auto comm = boostcomm::Communicator::createMpiWorld();
    boostcomm::DetectOptions options;
    options.probeSizesBytes = {8, 65536, 1 << 20};
    const boostcomm::Topology topo = boostcomm::detectTopology(*comm, options);
    const std::string json = boostcomm::topologyToJson(topo);

    // Same answer everywhere (probe numbers included: they are broadcast).
    CHECK(broadcastText(json) == json, "rank %d's topology differs from rank 0's:\n%s", worldRank, json.c_str());

    const std::vector<int> expected = expectedNodeOfRank(size);
    CHECK(topo.worldSize == size, "worldSize %d, expected %d", topo.worldSize, size);
    CHECK(topo.nodeOfRank == expected, "node placement differs from the expected one (%s)", topo.layoutSource.c_str());
    int sum = 0;
    for (int n = 0; n < topo.nodes; ++n) sum += topo.ranksPerNode[static_cast<std::size_t>(n)];
    CHECK(sum == size, "ranksPerNode sums to %d", sum);
    const int node = topo.nodeOfRank[static_cast<std::size_t>(worldRank)];
    const auto mine = topo.ranksOf(node);
    CHECK(mine[static_cast<std::size_t>(topo.localRankOfRank[static_cast<std::size_t>(worldRank)])] == worldRank,
          "local rank %d does not index this rank in its node", topo.localRankOfRank[static_cast<std::size_t>(worldRank)]);
    if (const char* nodes = std::getenv("BC_TEST_EXPECT_NODES"); nodes != nullptr) {
      CHECK(topo.nodes == std::atoi(nodes), "%d nodes detected, expected %s (%s)", topo.nodes, nodes, topo.layoutSource.c_str());
      char host[256] = {};
      gethostname(host, sizeof host - 1);
      CHECK(topo.layoutSource != "shared-memory" || topo.hostnames[static_cast<std::size_t>(node)] == host,
            "node %d hostname '%s', this rank runs on '%s'", node, topo.hostnames[static_cast<std::size_t>(node)].c_str(), host);
    }
    const bool hasPair = [&] {
      for (int n : topo.ranksPerNode) if (n >= 2) return true;
      return false;
    }();
    CHECK(topo.intraNode.measured == hasPair, "intra-node measured=%d", topo.intraNode.measured);
    CHECK(topo.interNode.measured == (topo.nodes >= 2), "inter-node measured=%d", topo.interNode.measured);
    if (topo.intraNode.measured) CHECK(topo.intraNode.bandwidthGBps > 0, "intra-node bandwidth %g", topo.intraNode.bandwidthGBps);
    if (topo.interNode.measured) CHECK(topo.interNode.bandwidthGBps > 0, "inter-node bandwidth %g", topo.interNode.bandwidthGBps);

    // A file of this job loads; one of another layout is refused everywhere.
    // Rank 0 names the file (one shared filesystem: one host, or the emulated cluster).
    const std::string path = broadcastText("/tmp/bc_test_topology_" + std::to_string(getpid()) + ".json");
    if (worldRank == 0) boostcomm::saveTopology(topo, path);
    MPI_Barrier(MPI_COMM_WORLD);
    const boostcomm::Topology loaded = boostcomm::loadTopologyFor(*comm, path);
    CHECK(loaded.nodeOfRank == topo.nodeOfRank, "loaded file has another placement");
    MPI_Barrier(MPI_COMM_WORLD);
    if (worldRank == 0) {
      boostcomm::Topology other = topo;
      other.worldSize = size + 1;
      other.nodeOfRank.push_back(topo.nodes);
      other.localRankOfRank.push_back(0);
      other.ranksPerNode.push_back(1);
      other.nodes += 1;
      other.hostnames.push_back("elsewhere");
      other.sockets.push_back(1);
      other.numaNodes.push_back(1);
      other.cores.push_back(1);
      boostcomm::saveTopology(other, path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    try {
      boostcomm::loadTopologyFor(*comm, path);
      CHECK(false, "a file for %d ranks was accepted by a job of %d", size + 1, size);
    } catch (const boostcomm::Error& e) {
      const std::string what = e.what();
      CHECK(e.category() == boostcomm::ErrorCategory::kMismatch, "category of: %s", what.c_str());
      CHECK(what.find("rank count: file " + std::to_string(size + 1)) != std::string::npos, "message: %s", what.c_str());
      CHECK(what.find("node count: file " + std::to_string(topo.nodes + 1)) != std::string::npos, "message: %s", what.c_str());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (worldRank == 0) {
      std::remove(path.c_str());
      std::printf("%s", json.c_str());
    }
    comm->finalize();
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (worldRank == 0) std::printf("test_mpi_topology: %d rank(s), %d failure(s)\n", size, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
