// DDP's bucket memory from the node's shared segment (Backend::allocateTensor).
#include <ATen/ATen.h>

#include <memory>

#include "torch/process_group.h"

namespace boostcomm::python {

bool ProcessGroupBoostcomm::supportsTensorAlloc(c10::DeviceIndex /*deviceIdx*/) {
  // torch asks with the bucket's device index (-1 for the CPU), and this
  // backend is registered for the CPU only.
  return comm_->hasSharedMemory();
}

at::Tensor ProcessGroupBoostcomm::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK(size >= 0, "boostcomm: allocateTensor: size ", size, " is negative (rank ", rank_, ")");
  if (!options.has_device()) options = options.device(at::kCPU);
  const std::size_t bytes = static_cast<std::size_t>(size) * options.dtype().itemsize();
  // Every rank of a DDP model asks for the same buckets in the same order,
  // so the collective allocation lines up; a size that differs is a
  // kMismatch on every rank.
  std::shared_ptr<void> memory;
  if (options.device().is_cpu() && bytes > 0 && !sharedBucketsFailed_) {
    memory = comm_->allocateOwnedBuffer(bytes);
    // Null here means the node's shared memory could not hold the bucket (a
    // /dev/shm too small: Docker's default is 64 MiB; rank 0 printed why),
    // on every rank alike: torch's memory for this bucket and the later ones.
    if (!memory && comm_->hasSharedMemory()) {
      sharedBucketsFailed_ = true;
      TORCH_WARN_ONCE("boostcomm: DDP's buckets stay in ordinary memory (the shared-memory allreduce copies them in "
                      "and out): the node's shared memory could not hold a ", bytes, "-byte bucket (rank ", rank_,
                      "). A larger /dev/shm (docker run --shm-size) gives them shared memory; "
                      "DDP_DISABLE_COMM_MEM=1 skips the attempt.");
    }
  }
  if (!memory) return at::empty({size}, options);
  void* data = memory.get();
  // The tensor's storage holds the buffer: it is given back when DDP drops
  // the bucket, and stays valid if the group goes first.
  return at::from_blob(data, {size}, [memory = std::move(memory)](void*) mutable { memory.reset(); }, options);
}

}  // namespace boostcomm::python
