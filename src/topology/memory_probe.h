// Node memory probe: how fast the ranks of one host move bytes through
// memory, alone and all at once, inside and outside the cache, and how much
// fresh pages cost. The simulator's host model (docs/SIMULATOR.md) and the
// cost model take their memory figures from here instead of guessing.
#pragma once

#include "boostcomm/topology.h"
#include "transport/transport.h"

namespace boostcomm::topology {

// Collective over `world`: the ranks of node 0 measure (the others wait with
// sleeping polls); every rank returns node 0's figures, bit-identical.
MemoryModel probeMemory(transport::Transport& world, const Topology& topo);

}  // namespace boostcomm::topology
