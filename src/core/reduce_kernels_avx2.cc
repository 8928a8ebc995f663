// AVX2 + F16C copy of the reduction kernels; see reduce_kernels_inl.h.
// Selected at run time on CPUs without AVX-512 (Haswell .. Alder Lake, Zen 1-3).
#include "core/reduce_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/half_bits.h"

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#define BC_KERNEL_NS avx2
#define BC_KERNEL_LEVEL 1
#define BC_KERNEL_NAME "avx2"
#include "core/reduce_kernels_inl.h"
#pragma GCC pop_options

namespace boostcomm::core::kernels {
const KernelTable& avx2Table() { return avx2::kTable; }
}  // namespace boostcomm::core::kernels
#endif
