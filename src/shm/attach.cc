#include "shm/attach.h"

#include <exception>

#include "core/check.h"
#include "core/tunables.h"
#include "shm/engine.h"
#include "transport/mpi/mpi_errors.h"

namespace boostcomm::shm {

namespace {

// The engine's tunables, read before the agreement step so that a bad value
// can travel through it (see attachSharedMemory).
struct Wanted {
  bool enable = false;
  EngineConfig config;
};

Wanted readTunables(int rank) {
  Wanted w;
  w.enable = core::tunableBool(core::kTunableShm);
  w.config.chunkBytes = core::tunableBytes(core::kTunableShmChunkBytes);
  w.config.slotBytes = core::tunableBytes(core::kTunableShmSlotBytes);
  w.config.cma = core::tunableBool(core::kTunableShmCma);
  // The staging ring pipelines chunks: one is copied in while another is read.
  BC_INVALID(w.config.slotBytes >= 2 * w.config.chunkBytes, rank,
             core::kTunableShmSlotBytes << "=" << w.config.slotBytes << " holds fewer than two chunks of "
                                        << core::kTunableShmChunkBytes << "=" << w.config.chunkBytes);
  return w;
}

}  // namespace

void attachSharedMemory(transport::MpiTransport& transport) {
  using transport::mpi::checkMpi;
  // Every rank reads the same environment under mpirun; were it to differ, the
  // node check below would still be collective, and the allreduce of the
  // decision keeps the ranks in agreement. A rank with a bad tunable votes -1,
  // so every rank raises together instead of the others entering
  // MPI_Win_allocate_shared without it.
  constexpr int kInvalid = -1;
  Wanted local;
  std::exception_ptr localError;
  try {
    local = readTunables(transport.rank());
  } catch (const Error&) {
    localError = std::current_exception();
  }
  int wanted = localError ? kInvalid : (local.enable ? 1 : 0);
  MPI_Comm node = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(transport.comm(), MPI_COMM_TYPE_SHARED, transport.rank(), MPI_INFO_NULL, &node),
           "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", transport.rank());
  int nodeSize = 0;
  checkMpi(MPI_Comm_size(node, &nodeSize), "MPI_Comm_size", transport.rank());
  MPI_Comm_free(&node);
  if (nodeSize != transport.size() && wanted == 1) wanted = 0;
  int all = 0;
  checkMpi(MPI_Allreduce(&wanted, &all, 1, MPI_INT, MPI_MIN, transport.comm()), "MPI_Allreduce",
           transport.rank());
  if (localError) std::rethrow_exception(localError);
  BC_INVALID(all != kInvalid, transport.rank(),
             "another rank has an invalid shared-memory tunable (" << core::kTunableShm << ", "
                 << core::kTunableShmChunkBytes << ", " << core::kTunableShmSlotBytes << "); see its error");
  if (all == 0) return;
  transport.attachSharedMemory(std::make_unique<ShmEngine>(transport.comm(), local.config));
}

}  // namespace boostcomm::shm
