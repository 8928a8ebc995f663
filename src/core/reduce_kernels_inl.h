// The reduction kernels, written once and compiled once per ISA.
//
// No include guard on purpose: each reduce_kernels_<isa>.cc includes this file
// after `#pragma GCC target(...)` with these macros defined:
//   BC_KERNEL_NS     namespace for this copy (avx512, avx2, baseline)
//   BC_KERNEL_LEVEL  2 = AVX-512 (F/BW/VL/DQ) + F16C, 1 = AVX2 + F16C, 0 = baseline
//   BC_KERNEL_NAME   string returned by reduceKernelIsa()
// Every header this file needs must be included *before* the pragma: an inline
// function from a standard header first instantiated under the pragma would be
// emitted with AVX-512 code into a COMDAT section, and the linker could hand
// that copy to baseline callers (SIGILL on older nodes). Hence everything here
// lives in an anonymous namespace and uses only builtins.
//
// Terms: a *block* is kBlockCount consecutive elements of a 16-bit buffer,
// widened to float32 scratch arrays, combined, and narrowed back; a *chunk* is
// the fixed-size unit (256 bytes) of the loops over float32/64 and integers.
//
// Accumulation rule: one reduce() call combines exactly two operands per
// element and rounds once to the storage type. float16/bfloat16 operands are
// widened exactly, combined in float32 (the float32 sum/product/quotient of two
// 16-bit values rounded to float32 and then to 16 bits equals the correctly
// rounded 16-bit result, because float32 has at least 2p+2 significand bits),
// and rounded to nearest even. So every ISA gives the same bits.
//
// NaN rule for min/max (floats): if a is NaN the result is a, else if b is NaN
// the result is b (NaN propagates, as torch.maximum/minimum); -0 < +0, so
// max(-0, +0) = +0 and min(-0, +0) = -0 in either order. vmaxps/vminps are not
// used directly because they return the second operand for NaN and signed-zero
// ties, which makes the result depend on operand order.

namespace boostcomm::core::kernels::BC_KERNEL_NS {
namespace {

#define BC_KERNEL_INLINE inline __attribute__((always_inline))

// ---- element operations ----------------------------------------------------

// Integer sum/prod wrap: compute in an unsigned type at least as wide as
// unsigned int, so uint8 does not promote to (signed, UB-on-overflow) int.
template <class T>
using WrapType = decltype(static_cast<std::make_unsigned_t<T>>(0) + 0u);

template <class F>
using FloatBits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;

template <class T>
BC_KERNEL_INLINE T wrapAdd(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
}
template <class T>
BC_KERNEL_INLINE T wrapMul(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
}

// Bitwise AND/OR of two floats that compare equal: equal unless they are
// +0/-0, where AND gives +0 (for max) and OR gives -0 (for min).
template <class F>
BC_KERNEL_INLINE F andBits(F a, F b) {
  return __builtin_bit_cast(F, __builtin_bit_cast(FloatBits<F>, a) & __builtin_bit_cast(FloatBits<F>, b));
}
template <class F>
BC_KERNEL_INLINE F orBits(F a, F b) {
  return __builtin_bit_cast(F, __builtin_bit_cast(FloatBits<F>, a) | __builtin_bit_cast(FloatBits<F>, b));
}

// Written as selects, not branches, so the loops if-convert and vectorise.
template <class F>
BC_KERNEL_INLINE F propagateNan(F a, F b, F result) {
  const F r = (b != b) ? b : result;
  return (a != a) ? a : r;
}

struct SumOp {
  template <class T>
  static BC_KERNEL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) return wrapAdd(a, b);
    else return a + b;
  }
};

struct ProdOp {
  template <class T>
  static BC_KERNEL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) return wrapMul(a, b);
    else return a * b;
  }
};

struct MaxOp {
  template <class T>
  static BC_KERNEL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      const T larger = a > b ? a : b;
      return propagateNan(a, b, a == b ? andBits(a, b) : larger);
    }
  }
};

struct MinOp {
  template <class T>
  static BC_KERNEL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      const T smaller = a < b ? a : b;
      return propagateNan(a, b, a == b ? orBits(a, b) : smaller);
    }
  }
};

// ---- types stored as they are computed (float32/64, integers) ---------------

// The loops below walk the buffers in chunks of kChunkBytes. The inner loop has
// a constant trip count, so GCC vectorises it even at -O2, whose "very cheap"
// cost model skips loops of unknown length; the short remainder runs scalar
// (identical results: every operation is exactly rounded).
//
// Three loop shapes instead of one so that every pointer can be __restrict: the
// contract allows out == a or out == b exactly, and a loop over possibly
// aliasing pointers is vectorised behind a run-time overlap check (or, at -O2,
// not at all) that fails for exact aliasing, the most common case: accumulate
// in place. The pointers must be parameters of the function holding the loop;
// pointers captured by a lambda lose their __restrict.
//
// Each loop first steps element by element until out is 64-byte aligned:
// misaligned 512-bit stores split cache lines, which cost AVX-512 a quarter
// of its bandwidth at 64 MiB (63 -> 46 GB/s measured; see docs/KERNELS.md).
// glibc hands out large buffers 16 bytes past a page boundary.
template <class T>
constexpr std::size_t kChunkCount = 256 / sizeof(T);
constexpr std::size_t kAlignBytes = 64;

// Elements before out + i is kAlignBytes-aligned (0 if it never will be).
template <class T>
BC_KERNEL_INLINE std::size_t headCount(const void* out, std::size_t n) {
  const auto address = reinterpret_cast<std::uintptr_t>(out);
  if (address % sizeof(T) != 0) return 0;
  const std::size_t head = (kAlignBytes - address % kAlignBytes) % kAlignBytes / sizeof(T);
  return head < n ? head : n;
}

// The chunk loops sit in functions of their own, called after the alignment
// head: with the head loop in the same function GCC 12 -O2 declines to
// vectorise the chunk loop ("not worthwhile"). One call per reduce() is noise.

// out[i] = f(x[i], y[i]); out overlaps neither (x == y is fine: both are read-only).
template <class T, class F>
__attribute__((noinline)) void chunksBinary(T* __restrict out, const T* __restrict x, const T* __restrict y,
                                            std::size_t n, F f) {
  std::size_t i = 0;
  for (; i + kChunkCount<T> <= n; i += kChunkCount<T>) {
    for (std::size_t j = i; j < i + kChunkCount<T>; ++j) out[j] = f(x[j], y[j]);
  }
  for (; i < n; ++i) out[i] = f(x[i], y[i]);
}
template <class T, class F>
BC_KERNEL_INLINE void mapBinary(T* out, const T* x, const T* y, std::size_t n, F f) {
  const std::size_t head = headCount<T>(out, n);
  for (std::size_t i = 0; i < head; ++i) out[i] = f(x[i], y[i]);
  chunksBinary(out + head, x + head, y + head, n - head, f);
}

// io[i] = f(io[i], y[i]).
template <class T, class F>
__attribute__((noinline)) void chunksInPlace(T* __restrict io, const T* __restrict y, std::size_t n, F f) {
  std::size_t i = 0;
  for (; i + kChunkCount<T> <= n; i += kChunkCount<T>) {
    for (std::size_t j = i; j < i + kChunkCount<T>; ++j) io[j] = f(io[j], y[j]);
  }
  for (; i < n; ++i) io[i] = f(io[i], y[i]);
}
template <class T, class F>
BC_KERNEL_INLINE void mapInPlace(T* io, const T* y, std::size_t n, F f) {
  const std::size_t head = headCount<T>(io, n);
  for (std::size_t i = 0; i < head; ++i) io[i] = f(io[i], y[i]);
  chunksInPlace(io + head, y + head, n - head, f);
}

// io[i] = f(io[i]).
template <class T, class F>
__attribute__((noinline)) void chunksUnary(T* __restrict io, std::size_t n, F f) {
  std::size_t i = 0;
  for (; i + kChunkCount<T> <= n; i += kChunkCount<T>) {
    for (std::size_t j = i; j < i + kChunkCount<T>; ++j) io[j] = f(io[j]);
  }
  for (; i < n; ++i) io[i] = f(io[i]);
}
template <class T, class F>
BC_KERNEL_INLINE void mapUnary(T* io, std::size_t n, F f) {
  const std::size_t head = headCount<T>(io, n);
  for (std::size_t i = 0; i < head; ++i) io[i] = f(io[i]);
  chunksUnary(io + head, n - head, f);
}

template <class T>
struct Direct {
  template <class Op>
  static void reduce(void* out, const void* a, const void* b, std::size_t n) {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    // Operand order stays (a, b) in every shape: the NaN rule depends on it.
    if (o == x && o == y) mapUnary(o, n, [](T v) { return Op::apply(v, v); });
    else if (o == x) mapInPlace(o, y, n, [](T v, T other) { return Op::apply(v, other); });
    else if (o == y) mapInPlace(o, x, n, [](T v, T other) { return Op::apply(other, v); });
    else mapBinary(o, x, y, n, [](T p, T q) { return Op::apply(p, q); });
  }
  static void divide(void* buf, std::size_t n, int divisor) {
    // A true division, not a multiply by 1/divisor: that would round twice.
    const T d = static_cast<T>(divisor);
    mapUnary(static_cast<T*>(buf), n, [d](T v) { return v / d; });
  }
};

// ---- 16-bit floats: widen a block to float32, combine, narrow ---------------

// 64 elements = 128 bytes of input per operand, 256 bytes of float32 scratch:
// a whole number of vectors at every level and well inside L1.
constexpr std::size_t kBlockCount = 64;

#if BC_KERNEL_LEVEL >= 2
// The zero-masked forms with every lane set compile to the plain instruction;
// the unmasked intrinsics trip GCC 12's -Wmaybe-uninitialized (GCC PR 105593).
constexpr __mmask16 kAllLanes = 0xFFFF;
#endif

struct Fp16Codec {
  static BC_KERNEL_INLINE void widen(float* dst, const std::uint16_t* src) {
#if BC_KERNEL_LEVEL >= 2
    for (std::size_t j = 0; j < kBlockCount; j += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      _mm512_storeu_ps(dst + j, _mm512_maskz_cvtph_ps(kAllLanes, h));
    }
#elif BC_KERNEL_LEVEL == 1
    for (std::size_t j = 0; j < kBlockCount; j += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
      _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(h));
    }
#else
    for (std::size_t j = 0; j < kBlockCount; ++j) dst[j] = halfbits::halfToFloat(src[j]);
#endif
  }
  static BC_KERNEL_INLINE void narrow(std::uint16_t* dst, const float* src) {
    // Immediate rounding mode (nearest even), not MXCSR's, to match the scalar path.
#if BC_KERNEL_LEVEL >= 2
    for (std::size_t j = 0; j < kBlockCount; j += 16) {
      const __m256i h =
          _mm512_maskz_cvtps_ph(kAllLanes, _mm512_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), h);
    }
#elif BC_KERNEL_LEVEL == 1
    for (std::size_t j = 0; j < kBlockCount; j += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), h);
    }
#else
    for (std::size_t j = 0; j < kBlockCount; ++j) dst[j] = halfbits::floatToHalf(src[j]);
#endif
  }
};

// bfloat16 works on 32-bit words holding two elements, so every step is a
// plain 32-bit lane operation at any vector width (no widening shuffles, no
// 32->16 packing). The scratch block is laid out de-interleaved: dst[k] is the
// element in the low half of word k, dst[kWords + k] the one in the high half.
// The combine step is element-wise, so the layout is invisible outside.
struct BFloat16Codec {
  static constexpr std::size_t kWords = kBlockCount / 2;
  // A 32-bit view of the uint16 buffers that may alias them and need only
  // 2-byte alignment. (Copying through a local array instead makes GCC build
  // the vectors from 8-byte pieces and stall on store forwarding.)
  using Word __attribute__((may_alias, aligned(2))) = std::uint32_t;

  static BC_KERNEL_INLINE void widen(float* dst, const std::uint16_t* src) {
    const Word* words = reinterpret_cast<const Word*>(src);
    for (std::size_t k = 0; k < kWords; ++k) {
      dst[k] = halfbits::bitsToFloat(words[k] << 16);
      dst[kWords + k] = halfbits::bitsToFloat(words[k] & 0xFFFF0000u);
    }
  }
  static BC_KERNEL_INLINE void narrow(std::uint16_t* dst, const float* src) {
    Word* words = reinterpret_cast<Word*>(dst);
    for (std::size_t k = 0; k < kWords; ++k) {
      const std::uint32_t low = halfbits::roundToBFloat16High(halfbits::floatToBits(src[k]));
      const std::uint32_t high = halfbits::roundToBFloat16High(halfbits::floatToBits(src[kWords + k]));
      words[k] = (low >> 16) | (high & 0xFFFF0000u);
    }
  }
};

// A partial block (count < kBlockCount elements at offset i) goes through
// zero-padded scratch so it takes the same vector code as full blocks: no
// separate scalar path to disagree with.
template <class Codec, bool kBinary, class Combine>
BC_KERNEL_INLINE void partialBlock(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b,
                                   std::size_t count, Combine combine) {
  const std::size_t bytes = count * sizeof(std::uint16_t);
  alignas(64) std::uint16_t ta[kBlockCount] = {};
  alignas(64) std::uint16_t tb[kBlockCount] = {};
  alignas(64) float fa[kBlockCount];
  alignas(64) float fb[kBlockCount];
  __builtin_memcpy(ta, a, bytes);
  if constexpr (kBinary) __builtin_memcpy(tb, b, bytes);
  Codec::widen(fa, ta);
  if constexpr (kBinary) Codec::widen(fb, tb);
  combine(fa, fb);
  Codec::narrow(ta, fa);
  __builtin_memcpy(out, ta, bytes);
}

// Runs combine(fa, fb) over every block of a (and b when kBinary), writing out:
// a partial block up to out's first 64-byte boundary, full blocks, a partial
// tail. Both operands are widened before anything is written, so out may
// alias a or b.
template <class Codec, bool kBinary, class Combine>
BC_KERNEL_INLINE void forEachBlock(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b, std::size_t n,
                                   Combine combine) {
  std::size_t i = headCount<std::uint16_t>(out, n);
  if (i > 0) partialBlock<Codec, kBinary>(out, a, b, i, combine);
  alignas(64) float fa[kBlockCount];
  alignas(64) float fb[kBlockCount];
  for (; i + kBlockCount <= n; i += kBlockCount) {
    Codec::widen(fa, a + i);
    if constexpr (kBinary) Codec::widen(fb, b + i);
    combine(fa, fb);
    Codec::narrow(out + i, fa);
  }
  if (i < n) partialBlock<Codec, kBinary>(out + i, a + i, b + i, n - i, combine);
}

template <class Op>
struct CombineBlock {
  BC_KERNEL_INLINE void operator()(float* __restrict fa, const float* __restrict fb) const {
    for (std::size_t j = 0; j < kBlockCount; ++j) fa[j] = Op::apply(fa[j], fb[j]);
  }
};

struct DivideBlock {
  float divisor;
  BC_KERNEL_INLINE void operator()(float* __restrict fa, const float* __restrict) const {
    for (std::size_t j = 0; j < kBlockCount; ++j) fa[j] = fa[j] / divisor;
  }
};

template <class Codec>
struct Widened {
  template <class Op>
  static void reduce(void* out, const void* a, const void* b, std::size_t n) {
    forEachBlock<Codec, true>(static_cast<std::uint16_t*>(out), static_cast<const std::uint16_t*>(a),
                              static_cast<const std::uint16_t*>(b), n, CombineBlock<Op>{});
  }
  static void divide(void* buf, std::size_t n, int divisor) {
    auto* p = static_cast<std::uint16_t*>(buf);
    forEachBlock<Codec, false>(p, p, p, n, DivideBlock{static_cast<float>(divisor)});
  }
};

// ---- the table ---------------------------------------------------------------

// Row order follows ReduceOp: kSum, kAvg (reduces like kSum), kMin, kMax, kProd.
#define BC_REDUCE_ROW(Kind)                                                                     \
  {                                                                                             \
    &Kind::template reduce<SumOp>, &Kind::template reduce<SumOp>, &Kind::template reduce<MinOp>, \
        &Kind::template reduce<MaxOp>, &Kind::template reduce<ProdOp>                           \
  }

// Column order follows DataType: f32, f64, f16, bf16, i32, i64, u8.
constinit const KernelTable kTable = {
    BC_KERNEL_NAME,
    {BC_REDUCE_ROW(Direct<float>), BC_REDUCE_ROW(Direct<double>), BC_REDUCE_ROW(Widened<Fp16Codec>),
     BC_REDUCE_ROW(Widened<BFloat16Codec>), BC_REDUCE_ROW(Direct<std::int32_t>),
     BC_REDUCE_ROW(Direct<std::int64_t>), BC_REDUCE_ROW(Direct<std::uint8_t>)},
    {&Direct<float>::divide, &Direct<double>::divide, &Widened<Fp16Codec>::divide,
     &Widened<BFloat16Codec>::divide, nullptr, nullptr, nullptr},
};

#undef BC_REDUCE_ROW
#undef BC_KERNEL_INLINE

}  // namespace
}  // namespace boostcomm::core::kernels::BC_KERNEL_NS
