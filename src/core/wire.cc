#include "core/wire.h"

#include <algorithm>
#include <cstring>

#include "core/half_bits.h"

namespace boostcomm::core {
namespace {

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
  for (std::size_t i = 0; i < count; ++i) m = std::max(m, halfbits::floatToBits(x[i]) & 0x7FFFFFFFu);
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
  if (format == WireFormat::kBf16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = halfbits::floatToBFloat16(src[i]);
    return;
  }
  const float scale = powerOfTwo(k);
  for (std::size_t i = 0; i < count; ++i) dst[i] = halfbits::floatToHalf(src[i] * scale);
}

void decodeRun(WireFormat format, int k, const std::uint16_t* src, std::size_t count, float* dst) {
  if (format == WireFormat::kBf16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = halfbits::bfloat16ToFloat(src[i]);
    return;
  }
  const float unscale = powerOfTwo(-k);
  for (std::size_t i = 0; i < count; ++i) dst[i] = halfbits::halfToFloat(src[i]) * unscale;
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
  if (format == WireFormat::kBf16) {
    for (std::size_t i = 0; i < count; ++i) buf[i] = halfbits::bfloat16ToFloat(halfbits::floatToBFloat16(buf[i]));
    return;
  }
  const float scale = powerOfTwo(k);
  const float unscale = powerOfTwo(-k);
  for (std::size_t i = 0; i < count; ++i) buf[i] = halfbits::halfToFloat(halfbits::floatToHalf(buf[i] * scale)) * unscale;
}

}  // namespace boostcomm::core
