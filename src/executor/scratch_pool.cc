#include "executor/scratch_pool.h"

#include <sys/mman.h>

#include <cstring>

#include "core/check.h"

namespace boostcomm::executor {
namespace {

// mmap directly: page-aligned, returned to the OS on free, and touched once
// here so the hot path never takes the first-touch page faults.
void* allocateTouched(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  BC_CHECK(p != MAP_FAILED, ErrorCategory::kInternal, -1, "scratch: mmap of " << bytes << " bytes failed");
  std::memset(p, 0, bytes);
  return p;
}

}  // namespace

ScratchPool::~ScratchPool() {
  for (Buffer& b : buffers_) {
    if (b.data != nullptr) munmap(b.data, b.capacityBytes);
  }
}

void* ScratchPool::acquire(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  Buffer* best = nullptr;
  Buffer* largestFree = nullptr;
  for (Buffer& b : buffers_) {
    if (b.inUse) continue;
    if (b.capacityBytes >= bytes && (best == nullptr || b.capacityBytes < best->capacityBytes)) best = &b;
    if (largestFree == nullptr || b.capacityBytes > largestFree->capacityBytes) largestFree = &b;
  }
  if (best == nullptr) {
    // Round up to 2 MiB so slightly larger requests later reuse the buffer.
    const std::size_t kGranuleBytes = std::size_t{2} << 20;
    const std::size_t capacity = (bytes + kGranuleBytes - 1) / kGranuleBytes * kGranuleBytes;
    if (largestFree != nullptr) {
      munmap(largestFree->data, largestFree->capacityBytes);
      largestFree->data = allocateTouched(capacity);
      largestFree->capacityBytes = capacity;
      best = largestFree;
    } else {
      buffers_.push_back(Buffer{allocateTouched(capacity), capacity, false});
      best = &buffers_.back();
    }
  }
  best->inUse = true;
  return best->data;
}

void ScratchPool::release(void* buffer) {
  if (buffer == nullptr) return;
  for (Buffer& b : buffers_) {
    if (b.data == buffer) {
      BC_INTERNAL(b.inUse, "scratch buffer released twice");
      b.inUse = false;
      return;
    }
  }
  BC_INTERNAL(false, "scratch buffer released that the pool does not own");
}

void ScratchPool::clear() {
  for (Buffer& b : buffers_) {
    BC_INTERNAL(!b.inUse, "scratch pool cleared while a buffer is leased");
    munmap(b.data, b.capacityBytes);
  }
  buffers_.clear();
}

std::size_t ScratchPool::bytesHeld() const {
  std::size_t total = 0;
  for (const Buffer& b : buffers_) total += b.capacityBytes;
  return total;
}

}  // namespace boostcomm::executor
