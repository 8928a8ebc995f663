// SharedSegment over a shared window of the transport's backend (the segment
// under mpirun / srun: MPI allocates it, and every rank finds its peers' parts
// through MPI_Win_shared_query; transport/shared_window.h).
#pragma once

#include <memory>

#include "shm/segment.h"
#include "transport/transport.h"

namespace boostcomm::shm {

class WindowSegment final : public SharedSegment {
 public:
  // Collective over `transport` (every rank on this node,
  // Transport::offersSharedWindows); ends with a barrier.
  WindowSegment(transport::Transport& transport, std::size_t bytesPerRank);

  // A factory making windows over `transport` (which must outlive them).
  static SegmentFactory factory(transport::Transport& transport);

 private:
  std::unique_ptr<transport::SharedWindow> window_;  // freed by its destructor
};

}  // namespace boostcomm::shm
