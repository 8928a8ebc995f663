#include "topology/hwloc_info.h"

#include <hwloc.h>

#include <mutex>

namespace boostcomm::topology {
namespace {

int countOf(hwloc_topology_t topo, hwloc_obj_type_t type) {
  const int n = hwloc_get_nbobjs_by_type(topo, type);
  return n < 0 ? 0 : n;  // -1: objects of this type exist at several depths
}

HostInfo load() {
  HostInfo info;
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) != 0) return info;
  if (hwloc_topology_load(topo) == 0) {
    info.sockets = countOf(topo, HWLOC_OBJ_PACKAGE);
    info.numaNodes = countOf(topo, HWLOC_OBJ_NUMANODE);
    info.cores = countOf(topo, HWLOC_OBJ_CORE);
  }
  hwloc_topology_destroy(topo);
  return info;
}

}  // namespace

HostInfo localHostInfo() {
  static std::once_flag once;
  static HostInfo info;
  std::call_once(once, [] { info = load(); });
  return info;
}

}  // namespace boostcomm::topology
