// Facts about this host from hwloc: sockets (packages), NUMA nodes, physical cores.
#pragma once

namespace boostcomm::topology {

struct HostInfo {
  int sockets = 0;
  int numaNodes = 0;
  int cores = 0;
};

// Loaded once per process (hwloc discovery takes milliseconds); zeros when
// hwloc fails, which detection treats as "unknown", never as an error.
HostInfo localHostInfo();

}  // namespace boostcomm::topology
