// `boostcomm topo`: the topology of the job this command runs in (run it
// under mpirun with the same layout as training), as a table or as the JSON
// topology file (docs/TOPOLOGY.md).
#include <cstdio>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "cli_util.h"
#include "commands.h"

namespace boostcomm::tools {
namespace {

// "0-3" for consecutive ranks, else "0,2,5".
std::string rankList(const std::vector<int>& ranks) {
  bool consecutive = true;
  for (std::size_t i = 1; i < ranks.size(); ++i) consecutive = consecutive && ranks[i] == ranks[i - 1] + 1;
  if (consecutive && ranks.size() > 1) return std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
  std::string out;
  for (const int r : ranks) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

void printLink(const char* name, const LinkModel& link) {
  if (!link.measured) {
    std::printf("  %-10s  %12s  %14s  %10s  %4d\n", name, "-", "-", "-", link.hops);
    return;
  }
  std::printf("  %-10s  %12.2f  %14.3f  %10.2f  %4d\n", name, link.latencyUs, link.bandwidthGBps,
              link.bandwidthGBps * 8, link.hops);
}

void printTable(const Topology& topo) {
  std::printf("# %d rank%s on %d node%s (layout: %s)\n", topo.worldSize, topo.worldSize == 1 ? "" : "s", topo.nodes,
              topo.nodes == 1 ? "" : "s", topo.layoutSource.c_str());
  std::printf("  %4s  %-20s  %5s  %-12s  %7s  %4s  %5s\n", "node", "hostname", "ranks", "world ranks", "sockets",
              "numa", "cores");
  for (int node = 0; node < topo.nodes; ++node) {
    const auto n = static_cast<std::size_t>(node);
    std::printf("  %4d  %-20s  %5d  %-12s  %7d  %4d  %5d\n", node, topo.hostnames[n].c_str(), topo.ranksPerNode[n],
                rankList(topo.ranksOf(node)).c_str(), topo.sockets[n], topo.numaNodes[n], topo.cores[n]);
  }
  std::printf("\n  %-10s  %12s  %14s  %10s  %4s\n", "link", "latency_us", "bandwidth_GB/s", "Gbit/s", "hops");
  printLink("intra-node", topo.intraNode);
  printLink("inter-node", topo.interNode);
  if (!topo.intraNode.measured || !topo.interNode.measured) {
    std::printf("# '-': not measured (--no-probe, or no pair of ranks on such a link)\n");
  }
  const MemoryModel& m = topo.memory;
  if (!m.measured) return;
  std::printf("\n  memory of node 0 (memcpy, 1e9 B/s):\n");
  std::printf("    one rank, 64 MiB copies, others idle   %8.2f GB/s\n", m.copyGBps);
  std::printf("    all %d ranks at once, streaming (sum)  %8.2f GB/s\n", topo.ranksPerNode.front(), m.nodeCopyGBps);
  std::printf("    fresh pages (mmap, first write)        %8.2f GB/s\n", m.firstTouchGBps);
  std::printf("    all ranks at once by node working set (caches):");
  for (const auto& s : m.sweep) std::printf(" %zuK %.1f", s.workingSetBytes >> 10, s.copyGBps);
  std::printf("\n");
}

}  // namespace

int runTopo(const TopoOptions& options, Communicator& comm) {
  Topology topo;
  if (!options.loadPath.empty()) {
    topo = loadTopologyFor(comm, options.loadPath);
  } else {
    DetectOptions detect;
    detect.probe = options.probe;
    detect.probeMemory = options.probe && options.memory;
    for (const std::string& text : options.probeSizes) detect.probeSizesBytes.push_back(positiveBytes(text, "--probe-sizes"));
    topo = detectTopology(comm, detect);
  }
  if (comm.rank() == 0) {
    if (!options.outputPath.empty()) saveTopology(topo, options.outputPath);
    if (options.json) {
      std::fputs(topologyToJson(topo).c_str(), stdout);
    } else {
      printTable(topo);
    }
    std::fflush(stdout);
  }
  comm.finalize();
  return 0;
}

}  // namespace boostcomm::tools
