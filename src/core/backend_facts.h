// Facts about the backend stack under boostcomm (Open MPI 4.1 on glibc) that
// both the cost model (src/tuning) and the simulator (src/simulate) price in.
#pragma once

#include <cstddef>

namespace boostcomm::core {

// Open MPI 4.1's allreduce (recursive doubling, Rabenseifner, ring on 2 ranks)
// mallocs a temporary of the whole vector on every call, and glibc serves
// allocations of at least this many bytes (its largest dynamic mmap
// threshold, DEFAULT_MMAP_THRESHOLD_MAX on 64-bit) with a fresh mmap: from
// this size each call page-faults its temporary in; below it the heap is
// reused after the first call.
inline constexpr std::size_t kFreshAllocationBytes = std::size_t{32} << 20;

}  // namespace boostcomm::core
