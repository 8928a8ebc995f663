// AVX-512 (F/BW/VL/DQ) + F16C copy of the reduction kernels; see
// reduce_kernels_inl.h. Selected at run time only on CPUs that report all of
// these features (Skylake-SP, Ice Lake, Sapphire Rapids, Zen 4 and later).
#include "core/reduce_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/half_bits.h"

// 512-bit vectors even where GCC's tuning would prefer 256: these loops are
// memory bound, so the wider loads/stores pay and the clock penalty does not.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c,prefer-vector-width=512")
#define BC_KERNEL_NS avx512
#define BC_KERNEL_LEVEL 2
#define BC_KERNEL_NAME "avx512"
#include "core/reduce_kernels_inl.h"
#pragma GCC pop_options

namespace boostcomm::core::kernels {
const KernelTable& avx512Table() { return avx512::kTable; }
}  // namespace boostcomm::core::kernels
#endif
