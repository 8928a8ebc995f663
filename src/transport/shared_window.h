// SharedWindow: memory the ranks of a group on one node all map, allocated
// by the backend (MPI: MPI_Win_allocate_shared), for the shm engine's
// segments (shm/window_segment.h). Where a transport offers none, the engine
// uses POSIX shared memory (shm/posix_segment.h).
#pragma once

#include <vector>

namespace boostcomm::transport {

class SharedWindow {
 public:
  // Frees the memory (collectively where the backend requires it; a
  // destructor cannot report, so a failed free only leaks the mapping).
  virtual ~SharedWindow() = default;
  // Rank r's part, as this rank maps it (each part its own allocation, with
  // the backend's alignment only).
  std::vector<char*> bases;
};

}  // namespace boostcomm::transport
