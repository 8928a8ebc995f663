#include "api/mpi_comm.h"

#include "api/access.h"
#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/tunables.h"
#include "shm/attach.h"
#include "transport/mpi/mpi_errors.h"
#include "transport/mpi/mpi_transport.h"

namespace boostcomm::detail {

std::shared_ptr<Communicator> createCommunicatorOverMpi(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  transport::mpi::checkMpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup", -1);
  auto mpi = std::make_unique<transport::MpiTransport>(dup, true);  // frees dup on any later throw
  shm::attachSharedMemory(*mpi);  // collective: every rank decides the same
  auto impl = std::make_unique<CommunicatorImpl>(std::move(mpi), [] {});
  return std::make_shared<Communicator>(std::move(impl));
}

std::shared_ptr<Communicator> createCommunicatorOverReservedMpi(MPI_Comm reserved) {
  auto mpi = std::make_unique<transport::MpiTransport>(reserved, false);
  BC_CHECK(shm::attachPosixSharedMemory(*mpi), ErrorCategory::kTransport, mpi->rank(),
           "no shared-memory engine over the reserved communicator (" << core::kTunableShm
                                                                      << " off, or the POSIX segment failed)");
  auto impl = std::make_unique<CommunicatorImpl>(std::move(mpi), [] {});
  return std::make_shared<Communicator>(std::move(impl));
}

std::optional<std::size_t> backendUpTo(Communicator& comm, Collective coll) {
  return implOf(comm).backendUpTo(coll);
}

}  // namespace boostcomm::detail
