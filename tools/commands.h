// Entry points of the `boostcomm` subcommands other than bench (bench.h).
// Each returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::tools {

// Every tunable with env name, type, default, current value and doc;
// markdown: the table of docs/TUNABLES.md (no current values).
int runTunables(bool markdown);

// Per collective: the algorithms available on this world and the selection
// table over a sweep of sizes; rank 0 prints. Finalizes comm.
int runAlgorithms(Communicator& comm);

int runVersion();

struct TopoOptions {
  bool memory = true;  // also measure node 0's memory (DetectOptions::probeMemory)
  std::vector<std::string> probeSizes;  // empty: the built-in sweep
  bool json = false;
  bool probe = true;
  std::string outputPath;  // also write the JSON topology file here (rank 0)
  std::string loadPath;    // show this topology file, after checking it matches the job
};
// detectTopology (or loadTopologyFor) on comm; rank 0 prints. Finalizes comm.
int runTopo(const TopoOptions& options, Communicator& comm);

}  // namespace boostcomm::tools
