// Communicator::createFromStore: the store-rendezvous world (torchrun,
// env://, file://) over Gloo's TCP transport (transport/gloo/).
#include "api/communicator_impl.h"
#include "boostcomm/communicator.h"
#include "core/check.h"
#include "shm/attach.h"
#include "transport/gloo/gloo_transport.h"

namespace boostcomm {

std::shared_ptr<Communicator> Communicator::createFromStore(std::shared_ptr<KeyValueStore> store, int rank, int size,
                                                            std::chrono::milliseconds timeout) {
  BC_INVALID(store != nullptr, rank, "createFromStore: null store");
  BC_INVALID(size >= 1, rank, "createFromStore: world size " << size << " must be at least 1");
  BC_INVALID(rank >= 0 && rank < size, rank, "createFromStore: rank " << rank << " out of range for world size " << size);
  BC_INVALID(timeout.count() > 0, rank, "createFromStore: timeout must be positive, got " << timeout.count() << " ms");
  transport::StoreBridge bridge(std::move(store), "boostcomm", timeout, rank);
  auto device = transport::GlooTransport::createDevice(rank);
  auto world = std::make_unique<transport::GlooTransport>(std::move(bridge), std::move(device), rank, size,
                                                          std::vector<long long>{});
  // Every rank on one host: the shm engine over a POSIX segment (collective;
  // every rank decides the same), so shm is selectable, and chosen, as under MPI.
  shm::attachSharedMemory(*world);
  auto impl = std::make_unique<detail::CommunicatorImpl>(std::move(world), [] {});
  return std::make_shared<Communicator>(std::move(impl));
}

}  // namespace boostcomm
