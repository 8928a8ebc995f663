// Persistent, pooled scratch memory.
//
// Why: Open MPI 4.1.4 mallocs a temporary per large allreduce and glibc serves
// every allocation >= 32 MiB with a fresh mmap, so each call pays page faults
// (measured here: a large share of a 64 MiB allreduce). A communicator keeps
// its scratch buffers for its lifetime: after the first call of a given size
// no call allocates or faults. Each in-flight operation leases its own buffer,
// so concurrent asynchronous collectives never share scratch.
#pragma once

#include <cstddef>
#include <vector>

namespace boostcomm::executor {

class ScratchPool {
 public:
  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // A buffer of at least `bytes` (64-byte aligned, pages already touched).
  // Reuses a free buffer when one is large enough, else grows the largest
  // free one, else adds a buffer. Returns nullptr for 0 bytes.
  void* acquire(std::size_t bytes);
  void release(void* buffer);
  // Frees every buffer; all must have been released.
  void clear();
  // Forgets every buffer without freeing it: after a failure the backend may
  // still write into leased memory, so it must stay mapped.
  void abandon() { buffers_.clear(); }
  std::size_t bytesHeld() const;

 private:
  struct Buffer {
    void* data = nullptr;
    std::size_t capacityBytes = 0;
    bool inUse = false;
  };
  std::vector<Buffer> buffers_;
};

}  // namespace boostcomm::executor
