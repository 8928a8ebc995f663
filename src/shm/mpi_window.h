// SharedSegment over one MPI_Win_allocate_shared window (the segment under
// mpirun / srun): MPI allocates it and every rank finds its peers' parts
// through MPI_Win_shared_query.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "shm/segment.h"

namespace boostcomm::shm {

class MpiWindowSegment final : public SharedSegment {
 public:
  // Collective over comm (every rank on this node); ends with a barrier.
  MpiWindowSegment(MPI_Comm comm, std::size_t bytesPerRank);
  ~MpiWindowSegment() override;  // collective (MPI_Win_free)

  // A factory making windows over comm (which must outlive them).
  static SegmentFactory factory(MPI_Comm comm);

 private:
  MPI_Win window_ = MPI_WIN_NULL;
};

}  // namespace boostcomm::shm
