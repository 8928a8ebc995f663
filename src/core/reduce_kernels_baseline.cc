// Baseline copy of the reduction kernels, compiled with the build's default
// flags (SSE2 on x86-64, whatever the target offers elsewhere); see
// reduce_kernels_inl.h. float16 uses the scalar integer conversions here.
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/half_bits.h"
#include "core/reduce_kernels.h"

#define BC_KERNEL_NS baseline
#define BC_KERNEL_LEVEL 0
#if defined(__x86_64__)
#define BC_KERNEL_NAME "sse2"
#else
#define BC_KERNEL_NAME "generic"
#endif
#include "core/reduce_kernels_inl.h"

namespace boostcomm::core::kernels {
const KernelTable& baselineTable() { return baseline::kTable; }
}  // namespace boostcomm::core::kernels
