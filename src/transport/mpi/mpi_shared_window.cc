// The MPI transport's node services for the shm engine: whether its group is
// on one node (MPI_COMM_TYPE_SHARED) and shared windows
// (MPI_Win_allocate_shared; transport/shared_window.h).
#include <cstdint>

#include "core/check.h"
#include "transport/mpi/mpi_errors.h"
#include "transport/mpi/mpi_transport.h"

namespace boostcomm::transport {

using mpi::checkMpi;

namespace {

class MpiSharedWindow final : public SharedWindow {
 public:
  MpiSharedWindow(MPI_Comm comm, int rank, int size, std::size_t bytesPerRank) {
    // Non-contiguous: each rank's part may start on its own page (and NUMA
    // node) instead of being packed behind the previous rank's.
    MPI_Info info = MPI_INFO_NULL;
    checkMpi(MPI_Info_create(&info), "MPI_Info_create", rank);
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void* mine = nullptr;
    const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytesPerRank), 1, info, comm, &mine, &window_);
    MPI_Info_free(&info);
    checkMpi(rc, "MPI_Win_allocate_shared", rank);
    bases.resize(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
      MPI_Aint bytes = 0;
      int dispUnit = 0;
      void* base = nullptr;
      checkMpi(MPI_Win_shared_query(window_, r, &bytes, &dispUnit, &base), "MPI_Win_shared_query", rank);
      bases[static_cast<std::size_t>(r)] = static_cast<char*>(base);
    }
  }
  ~MpiSharedWindow() override {
    int finalized = 0;
    if (window_ != MPI_WIN_NULL && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Win_free(&window_);
  }

 private:
  MPI_Win window_ = MPI_WIN_NULL;
};

}  // namespace

bool MpiTransport::groupOnThisNode() {
  MPI_Comm node = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
           "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", rank_);
  int nodeSize = 0;
  checkMpi(MPI_Comm_size(node, &nodeSize), "MPI_Comm_size", rank_);
  MPI_Comm_free(&node);
  return nodeSize == size_;
}

std::unique_ptr<SharedWindow> MpiTransport::allocateSharedWindow(std::size_t bytesPerRank) {
  return std::make_unique<MpiSharedWindow>(comm_, rank_, size_, bytesPerRank);
}

}  // namespace boostcomm::transport
