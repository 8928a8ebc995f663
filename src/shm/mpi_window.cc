#include "shm/mpi_window.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "transport/mpi/mpi_errors.h"

namespace boostcomm::shm {

using transport::mpi::checkMpi;

namespace {
int rankOf(MPI_Comm comm) {
  int rank = 0;
  checkMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank", -1);
  return rank;
}
}  // namespace

MpiWindowSegment::MpiWindowSegment(MPI_Comm comm, std::size_t bytesPerRank)
    : SharedSegment(rankOf(comm), bytesPerRank) {
  int size = 0;
  checkMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size", rank_);
  BC_INVALID(bytesPerRank <= static_cast<std::size_t>(PTRDIFF_MAX), rank_,
             "shared window of " << bytesPerRank << " bytes is too large");
  // Non-contiguous: each rank's part may start on its own page (and NUMA
  // node) instead of being packed behind the previous rank's.
  MPI_Info info = MPI_INFO_NULL;
  checkMpi(MPI_Info_create(&info), "MPI_Info_create", rank_);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* mine = nullptr;
  // Round up to whole cache lines so every part stays line-aligned.
  const std::size_t rounded = std::max<std::size_t>((bytesPerRank + kLineBytes - 1) & ~(kLineBytes - 1), kLineBytes);
  // Open MPI aligns parts only to 8 bytes: ask for a line more and start
  // every part at its first line boundary (each rank computes the same).
  const int rc =
      MPI_Win_allocate_shared(static_cast<MPI_Aint>(rounded + kLineBytes), 1, info, comm, &mine, &window_);
  MPI_Info_free(&info);
  checkMpi(rc, "MPI_Win_allocate_shared", rank_);
  bases_.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    MPI_Aint bytes = 0;
    int dispUnit = 0;
    void* base = nullptr;
    checkMpi(MPI_Win_shared_query(window_, r, &bytes, &dispUnit, &base), "MPI_Win_shared_query", rank_);
    const std::uintptr_t aligned = (reinterpret_cast<std::uintptr_t>(base) + kLineBytes - 1) & ~(kLineBytes - 1);
    bases_[static_cast<std::size_t>(r)] = reinterpret_cast<char*>(aligned);
  }
  std::memset(bases_[static_cast<std::size_t>(rank_)], 0, rounded);
  // Nobody reads a peer's counters before that peer has zeroed them.
  checkMpi(MPI_Barrier(comm), "MPI_Barrier", rank_);
}

MpiWindowSegment::~MpiWindowSegment() {
  int finalized = 0;
  // A destructor cannot report; a failed free only leaks the mapping.
  if (window_ != MPI_WIN_NULL && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Win_free(&window_);
}

SegmentFactory MpiWindowSegment::factory(MPI_Comm comm) {
  return [comm](std::size_t bytesPerRank) -> std::unique_ptr<SharedSegment> {
    return std::make_unique<MpiWindowSegment>(comm, bytesPerRank);
  };
}

}  // namespace boostcomm::shm
