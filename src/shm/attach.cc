#include "shm/attach.h"

#include <algorithm>

#include "core/tunables.h"
#include "shm/engine.h"
#include "transport/mpi/mpi_errors.h"

namespace boostcomm::shm {

void attachSharedMemory(transport::MpiTransport& transport) {
  using transport::mpi::checkMpi;
  // Every rank reads the same environment under mpirun; were it to differ, the
  // node check below would still be collective, and the allreduce of the
  // decision keeps the ranks in agreement.
  int wanted = core::tunableInt(core::kTunableShm) != 0 ? 1 : 0;
  MPI_Comm node = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(transport.comm(), MPI_COMM_TYPE_SHARED, transport.rank(), MPI_INFO_NULL, &node),
           "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", transport.rank());
  int nodeSize = 0;
  checkMpi(MPI_Comm_size(node, &nodeSize), "MPI_Comm_size", transport.rank());
  MPI_Comm_free(&node);
  if (nodeSize != transport.size()) wanted = 0;
  int all = 0;
  checkMpi(MPI_Allreduce(&wanted, &all, 1, MPI_INT, MPI_MIN, transport.comm()), "MPI_Allreduce",
           transport.rank());
  if (all == 0) return;
  EngineConfig config;
  // At least 4 KiB so a reduce_scatter chunk holds one cache line per rank.
  config.chunkBytes = static_cast<std::size_t>(std::max<std::int64_t>(4096, core::tunableInt(core::kTunableShmChunkBytes)));
  config.slotBytes = static_cast<std::size_t>(
      std::max<std::int64_t>(2 * static_cast<std::int64_t>(config.chunkBytes), core::tunableInt(core::kTunableShmSlotBytes)));
  transport.attachSharedMemory(std::make_unique<ShmEngine>(transport.comm(), config));
}

}  // namespace boostcomm::shm
