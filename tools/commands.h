// Entry points of the `boostcomm` subcommands other than bench (bench.h).
// Each returns the process exit code.
#pragma once

#include "boostcomm/communicator.h"

namespace boostcomm::tools {

// Every tunable with env name, type, default, current value and doc;
// markdown: the table of docs/TUNABLES.md (no current values).
int runTunables(bool markdown);

// Per collective: the algorithms available on this world and the selection
// table over a sweep of sizes; rank 0 prints. Finalizes comm.
int runAlgorithms(Communicator& comm);

int runVersion();

}  // namespace boostcomm::tools
