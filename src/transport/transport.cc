// Defaults of the optional Transport services.
#include "transport/transport.h"

#include "core/check.h"

namespace boostcomm::transport {

void Transport::irecvAnySource(void*, std::size_t, int, Request&) {
  BC_INVALID(false, rank(), "transport '" << name() << "' has no any-source receive (recvAnysource)");
}

bool Transport::testAnySource(Request&, int*) {
  BC_INVALID(false, rank(), "transport '" << name() << "' has no any-source receive (recvAnysource)");
  return false;
}

void Transport::attachSharedMemory(std::unique_ptr<SharedMemoryEngine>) {
  BC_INTERNAL(false, "transport '" << name() << "' takes no shared-memory engine");
}

bool Transport::groupOnThisNode() {
  const std::vector<long long> nodes = nodeIdOfEachRank();
  for (long long id : nodes) {
    if (id != nodes.front()) return false;
  }
  return true;
}

std::unique_ptr<SharedWindow> Transport::allocateSharedWindow(std::size_t) {
  BC_INTERNAL(false, "transport '" << name() << "' offers no shared window");
  return nullptr;
}

}  // namespace boostcomm::transport
