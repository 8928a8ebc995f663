#include "core/wire.h"

#include <algorithm>
#include <cstring>

#include "core/half_bits.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace boostcomm::core {
namespace {

// The hot loops have an AVX2 + F16C version, picked at run time (the default
// build needs no -march flag). They give the same bits as the scalar
// reference: vcvtps2ph/vcvtph2ps round to nearest even and treat NaN exactly
// as half_bits.h does (see there), and the bf16 rounding is the same integer
// arithmetic. Only these functions carry the target attribute; everything
// they inline is builtins, so no AVX code leaks into shared inline copies.
#if defined(__x86_64__)
bool haveAvx2F16c() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return have;
}

__attribute__((target("avx2,f16c"))) void encodeFp16Avx2(float scale, const float* src, std::size_t n,
                                                          std::uint16_t* dst, std::size_t& done) {
  const __m256 s = _mm256_set1_ps(scale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(src + i), s), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  done = i;
}

__attribute__((target("avx2,f16c"))) void decodeFp16Avx2(float unscale, const std::uint16_t* src, std::size_t n,
                                                          float* dst, std::size_t& done) {
  const __m256 s = _mm256_set1_ps(unscale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(f, s));
  }
  done = i;
}

__attribute__((target("avx2,f16c"))) void roundFp16Avx2(float scale, float unscale, float* buf, std::size_t n,
                                                         std::size_t& done) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 u = _mm256_set1_ps(unscale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(buf + i), s), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(buf + i, _mm256_mul_ps(_mm256_cvtph_ps(h), u));
  }
  done = i;
}

// roundToBFloat16High on 8 lanes: nearest even, NaN made quiet (no rounding).
__attribute__((target("avx2"))) inline __m256i bf16High(__m256i bits) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), odd);
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
  // Signed compare is right: the masked magnitude is below 2^31.
  const __m256i isNan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)),
                                           _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, quiet, isNan);
}

__attribute__((target("avx2"))) void encodeBf16Avx2(const float* src, std::size_t n, std::uint16_t* dst,
                                                    std::size_t& done) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = _mm256_srli_epi32(bf16High(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))), 16);
    const __m256i b = _mm256_srli_epi32(bf16High(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8))), 16);
    // packus works per 128-bit lane: restore element order with a 64-bit permute.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  done = i;
}

__attribute__((target("avx2"))) void roundBf16Avx2(float* buf, std::size_t n, std::size_t& done) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i r = _mm256_and_si256(bf16High(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + i))), high);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + i), r);
  }
  done = i;
}

__attribute__((target("avx2,f16c"))) void encodeRoundFp16Avx2(float scale, float unscale, float* buf, std::size_t n,
                                                               std::uint16_t* dst, std::size_t& done) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 u = _mm256_set1_ps(unscale);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(buf + i), s), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    _mm256_storeu_ps(buf + i, _mm256_mul_ps(_mm256_cvtph_ps(h), u));
  }
  done = i;
}

__attribute__((target("avx2"))) void encodeRoundBf16Avx2(float* buf, std::size_t n, std::uint16_t* dst,
                                                         std::size_t& done) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = bf16High(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + i)));
    const __m256i b = bf16High(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(buf + i + 8)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + i), _mm256_and_si256(a, high));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(buf + i + 8), _mm256_and_si256(b, high));
    const __m256i packed =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(_mm256_srli_epi32(a, 16), _mm256_srli_epi32(b, 16)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  done = i;
}

__attribute__((target("avx2"))) std::uint32_t maxMagnitudeAvx2(const float* x, std::size_t n, std::size_t& done) {
  const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), mask));
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  done = i;
  std::uint32_t out = 0;
  for (std::uint32_t v : lanes) out = std::max(out, v);
  return out;
}
#endif

// 2^e as a float32, for e in [-126, 127].
float powerOfTwo(int e) { return halfbits::bitsToFloat(static_cast<std::uint32_t>(e + 127) << 23); }

constexpr int kMinScaleExponent = -114;
constexpr int kMaxScaleExponent = 100;

}  // namespace

std::size_t wireHeaderBytes(WireFormat format) { return format == WireFormat::kFp16 ? 4 : 0; }

std::size_t wireBytes(WireFormat format, std::size_t count) {
  if (count == 0) return 0;
  return wireHeaderBytes(format) + 2 * count;
}

std::uint32_t maxMagnitudeBits(const float* x, std::size_t count) {
  std::uint32_t m = 0;
  std::size_t i = 0;
#if defined(__x86_64__)
  if (haveAvx2F16c()) m = maxMagnitudeAvx2(x, count, i);
#endif
  for (; i < count; ++i) m = std::max(m, halfbits::floatToBits(x[i]) & 0x7FFFFFFFu);
  return m;
}

int fp16ScaleExponent(std::uint32_t maxBits) {
  if (maxBits == 0 || maxBits >= 0x7F800000u) return 0;  // all zero, or inf/NaN present: no scaling
  // m rounded to float16's 11 significand bits (nearest even), so decoded
  // values give the same exponent again (see wire.h, "Idempotence").
  const std::uint32_t rounded = maxBits + 0xFFFu + ((maxBits >> 13) & 1u);
  const int exponent = static_cast<int>(rounded >> 23) - 127;
  return std::clamp(14 - exponent, kMinScaleExponent, kMaxScaleExponent);
}

void encodeRun(WireFormat format, int k, const float* src, std::size_t count, std::uint16_t* dst) {
  std::size_t i = 0;
  if (format == WireFormat::kBf16) {
#if defined(__x86_64__)
    if (haveAvx2F16c()) encodeBf16Avx2(src, count, dst, i);
#endif
    for (; i < count; ++i) dst[i] = halfbits::floatToBFloat16(src[i]);
    return;
  }
  const float scale = powerOfTwo(k);
#if defined(__x86_64__)
  if (haveAvx2F16c()) encodeFp16Avx2(scale, src, count, dst, i);
#endif
  for (; i < count; ++i) dst[i] = halfbits::floatToHalf(src[i] * scale);
}

void decodeRun(WireFormat format, int k, const std::uint16_t* src, std::size_t count, float* dst) {
  std::size_t i = 0;
  if (format == WireFormat::kBf16) {
    for (; i < count; ++i) dst[i] = halfbits::bfloat16ToFloat(src[i]);
    return;
  }
  const float unscale = powerOfTwo(-k);
#if defined(__x86_64__)
  if (haveAvx2F16c()) decodeFp16Avx2(unscale, src, count, dst, i);
#endif
  for (; i < count; ++i) dst[i] = halfbits::halfToFloat(src[i]) * unscale;
}

void writeWireHeader(WireFormat format, int k, void* wire) {
  if (format != WireFormat::kFp16) return;
  const std::int32_t v = k;
  std::memcpy(wire, &v, sizeof v);
}

int readWireHeader(WireFormat format, const void* wire) {
  if (format != WireFormat::kFp16) return 0;
  std::int32_t v = 0;
  std::memcpy(&v, wire, sizeof v);
  return v;
}

void encodeWire(WireFormat format, const float* src, std::size_t count, void* wire) {
  if (count == 0) return;
  const int k = format == WireFormat::kFp16 ? fp16ScaleExponent(maxMagnitudeBits(src, count)) : 0;
  writeWireHeader(format, k, wire);
  encodeRun(format, k, src, count,
            reinterpret_cast<std::uint16_t*>(static_cast<char*>(wire) + wireHeaderBytes(format)));
}

void decodeWire(WireFormat format, const void* wire, std::size_t count, float* dst) {
  if (count == 0) return;
  const int k = readWireHeader(format, wire);
  decodeRun(format, k, reinterpret_cast<const std::uint16_t*>(static_cast<const char*>(wire) + wireHeaderBytes(format)),
            count, dst);
}

void roundThroughWire(WireFormat format, float* buf, std::size_t count) {
  if (count == 0) return;
  const int k = format == WireFormat::kFp16 ? fp16ScaleExponent(maxMagnitudeBits(buf, count)) : 0;
  roundRun(format, k, buf, count);
}

void roundRun(WireFormat format, int k, float* buf, std::size_t count) {
  std::size_t i = 0;
  if (format == WireFormat::kBf16) {
#if defined(__x86_64__)
    if (haveAvx2F16c()) roundBf16Avx2(buf, count, i);
#endif
    for (; i < count; ++i) buf[i] = halfbits::bfloat16ToFloat(halfbits::floatToBFloat16(buf[i]));
    return;
  }
  const float scale = powerOfTwo(k);
  const float unscale = powerOfTwo(-k);
#if defined(__x86_64__)
  if (haveAvx2F16c()) roundFp16Avx2(scale, unscale, buf, count, i);
#endif
  for (; i < count; ++i) buf[i] = halfbits::halfToFloat(halfbits::floatToHalf(buf[i] * scale)) * unscale;
}

void encodeRoundRun(WireFormat format, int k, float* buf, std::size_t count, std::uint16_t* dst) {
  std::size_t i = 0;
  if (format == WireFormat::kBf16) {
#if defined(__x86_64__)
    if (haveAvx2F16c()) encodeRoundBf16Avx2(buf, count, dst, i);
#endif
    for (; i < count; ++i) {
      dst[i] = halfbits::floatToBFloat16(buf[i]);
      buf[i] = halfbits::bfloat16ToFloat(dst[i]);
    }
    return;
  }
  const float scale = powerOfTwo(k);
  const float unscale = powerOfTwo(-k);
#if defined(__x86_64__)
  if (haveAvx2F16c()) encodeRoundFp16Avx2(scale, unscale, buf, count, dst, i);
#endif
  for (; i < count; ++i) {
    dst[i] = halfbits::floatToHalf(buf[i] * scale);
    buf[i] = halfbits::halfToFloat(dst[i]) * unscale;
  }
}

}  // namespace boostcomm::core
