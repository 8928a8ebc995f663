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

}  // namespace boostcomm::transport
