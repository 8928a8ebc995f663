// Inline, integer-only float16 / bfloat16 <-> float32 conversions.
//
// These are the reference conversions: half.cc exports them, and the reduction
// kernels inline them on the baseline (no F16C) path. They use integer
// arithmetic only, so the result does not depend on MXCSR (FTZ/DAZ, rounding
// mode) that a training framework may have changed.
//
// NaN handling matches the x86 F16C instructions (vcvtph2ps / vcvtps2ph) bit
// for bit, so a cluster whose nodes pick different kernel ISAs still produces
// identical bits: the sign and the leading payload bits are kept and the quiet
// bit is set (a signalling NaN becomes quiet, and a NaN whose payload lives only
// in the dropped low bits cannot turn into infinity).
#pragma once

#include <cstdint>

namespace boostcomm::core::halfbits {

inline float bitsToFloat(std::uint32_t bits) { return __builtin_bit_cast(float, bits); }
inline std::uint32_t floatToBits(float f) { return __builtin_bit_cast(std::uint32_t, f); }

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float halfToFloat(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {  // inf, or NaN made quiet (as vcvtph2ps does)
    const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return bitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return bitsToFloat(sign);
    // Subnormal half = mantissa * 2^-24; every one is a normal float32.
    const int top = 31 - __builtin_clz(mantissa);  // index of the leading 1 (0..9)
    const std::uint32_t fexp = static_cast<std::uint32_t>(top + 103);  // (top - 24) + 127
    const std::uint32_t fmant = (mantissa << (23 - top)) & 0x7FFFFFu;
    return bitsToFloat(sign | (fexp << 23) | fmant);
  }
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));  // rebias 15 -> 127
}

// Round to nearest, ties to even; overflow goes to infinity.
inline std::uint16_t floatToHalf(float f) {
  const std::uint32_t bits = floatToBits(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t x = bits & 0x7FFFFFFFu;
  if (x > 0x7F800000u) {  // NaN: keep the top 10 payload bits, set the quiet bit
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
  }
  // 0x477FF000 = 65520.0f: halfway between 65504 (largest half, odd mantissa)
  // and the next step, so ties-to-even already rounds it up to infinity.
  if (x >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (x >= 0x38800000u) {  // >= 2^-14: a normal half
    const std::uint32_t odd = (x >> 13) & 1u;
    // 0xC8000000 subtracts 112 from the exponent (bias 127 -> 15); 0xFFF + odd
    // rounds the 13 dropped bits to nearest even, carrying into the exponent.
    return static_cast<std::uint16_t>(sign | ((x + 0xC8000FFFu + odd) >> 13));
  }
  const std::uint32_t exponent = x >> 23;
  // Below 2^-25 (exponent 102) everything rounds to zero; exactly 2^-25 is a
  // tie between 0 and the smallest subnormal and goes to even (0) too.
  if (exponent < 102) return sign;
  // Subnormal half: value / 2^-24 = significand >> (126 - exponent), shift 14..24.
  const std::uint32_t significand = (x & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;
  std::uint32_t result = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1u);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (result & 1u))) ++result;  // may carry into 0x400: fine
  return static_cast<std::uint16_t>(sign | result);
}

// bfloat16 is the top half of a float32: widening is exact.
inline float bfloat16ToFloat(std::uint16_t b) { return bitsToFloat(static_cast<std::uint32_t>(b) << 16); }

// Rounds float32 bits to bfloat16 and returns them in the *upper* 16 bits (the
// lower 16 are junk): nearest even, overflow to inf, NaN made quiet. Written
// as a select, not a branch, so loops over it vectorise.
inline std::uint32_t roundToBFloat16High(std::uint32_t bits) {
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  const std::uint32_t quietNan = bits | 0x00400000u;  // no rounding: it could carry a NaN into inf
  const bool isNan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return isNan ? quietNan : rounded;
}

inline std::uint16_t floatToBFloat16(float f) {
  return static_cast<std::uint16_t>(roundToBFloat16High(floatToBits(f)) >> 16);
}

}  // namespace boostcomm::core::halfbits
