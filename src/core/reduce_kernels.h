// Internal interface between reduce.cc (validation + run-time dispatch) and the
// per-ISA kernel tables. Also used by the reduce tests and benchmark to run one
// specific ISA's kernels side by side with the others.
//
// Dispatch design: reduce_kernels_inl.h holds the kernels once, as templates.
// Each reduce_kernels_<isa>.cc compiles it under `#pragma GCC target(...)` into
// its own namespace and exports a table of function pointers, one per
// (dtype, op). reduce.cc picks the best table the CPU supports once
// (__builtin_cpu_supports) and every call is one indirect call. The default
// build needs no -march flag, so one binary runs on every node of a
// heterogeneous cluster.
#pragma once

#include <cstddef>

#include "boostcomm/types.h"

namespace boostcomm::core {

// Ordered from the baseline up; the selector takes the highest one supported.
enum class KernelIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
inline constexpr int kNumKernelIsas = 3;

// out[i] = a[i] op b[i]; handles out == a / out == b itself. count > 0.
using ReduceKernelFn = void (*)(void* out, const void* a, const void* b, std::size_t count);
// buf[i] /= divisor (divisor > 0), float dtypes only (null entries elsewhere).
using DivideKernelFn = void (*)(void* buf, std::size_t count, int divisor);

struct KernelTable {
  const char* isaName;
  ReduceKernelFn reduce[kNumDataTypes][kNumReduceOps];  // indexed by DataType, ReduceOp
  DivideKernelFn divide[kNumDataTypes];
};

// The table for isa, or nullptr when it was not compiled in or this CPU lacks
// the instructions it needs.
const KernelTable* kernelTableFor(KernelIsa isa);
// The table reduce()/divideBy() use: the best one this CPU supports.
const KernelTable& activeKernelTable();

namespace kernels {
// Defined by reduce_kernels_<isa>.cc (x86-64 only for avx2/avx512).
const KernelTable& baselineTable();
const KernelTable& avx2Table();
const KernelTable& avx512Table();
}  // namespace kernels

}  // namespace boostcomm::core
