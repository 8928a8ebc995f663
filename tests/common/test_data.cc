#include "common/test_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace boostcomm::testing {
namespace {

constexpr int kMaxReported = 5;  // mismatches described per check; the total is always counted

double roundToDtype(double value, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat64: return value;
    case DataType::kFloat32: return static_cast<float>(value);
    case DataType::kFloat16: return fromHalfBits(toHalfBits(static_cast<float>(value)));
    case DataType::kBFloat16: return fromBFloat16Bits(toBFloat16Bits(static_cast<float>(value)));
    default: return value;
  }
}

// Two's-complement truncation of a 64-bit accumulator to the dtype's width.
std::int64_t truncateToDtype(std::uint64_t value, DataType dtype) {
  switch (dtype) {
    case DataType::kInt32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
    case DataType::kUInt8: return static_cast<std::int64_t>(value & 0xffu);
    default: return static_cast<std::int64_t>(value);
  }
}

// Smallest subnormal spacing that matters for the absolute part of the bound
// (float16 inputs in [-1, 1] can be subnormal; other dtypes' subnormals are
// far below any tolerance we compute).
double subnormalSlack(DataType dtype) { return dtype == DataType::kFloat16 ? std::ldexp(1.0, -25) : 0.0; }

}  // namespace

double unitRoundoff(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat64: return std::ldexp(1.0, -53);
    case DataType::kFloat32: return std::ldexp(1.0, -24);
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBFloat16: return std::ldexp(1.0, -8);
    default: return 0.0;
  }
}

std::uint16_t toHalfBits(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t absBits = x & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u | ((absBits >> 13) & 0x3ffu) : 0u));
  }
  if (absBits >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (absBits < 0x38800000u) {  // below 2^-14: a half subnormal (or the smallest normal after rounding)
    float magnitude;
    std::memcpy(&magnitude, &absBits, sizeof magnitude);
    // Scaling by 2^24 is exact; nearbyint rounds to nearest even in the default mode.
    const auto units = static_cast<std::uint32_t>(std::nearbyint(magnitude * 16777216.0f));
    return static_cast<std::uint16_t>(sign | units);
  }
  const std::uint32_t mantissa = absBits & 0x7fffffu;
  const std::uint32_t exponent = (absBits >> 23) - 127 + 15;
  std::uint32_t half = (exponent << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry into the exponent is correct
  return static_cast<std::uint16_t>(sign | half);
}

float fromHalfBits(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return negative ? -v : v;
  }
  std::uint32_t out = (negative ? 0x80000000u : 0u) | (mantissa << 13);
  out |= exponent == 31 ? 0x7f800000u : (exponent - 15 + 127) << 23;
  float f;
  std::memcpy(&f, &out, sizeof f);
  return f;
}

std::uint16_t toBFloat16Bits(float value) {
  std::uint32_t x;
  std::memcpy(&x, &value, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float fromBFloat16Bits(std::uint16_t bits) {
  const std::uint32_t x = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

void storeDouble(void* base, std::size_t index, DataType dtype, double value) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dtype) {
    case DataType::kFloat64: std::memcpy(p + index * 8, &value, 8); return;
    case DataType::kFloat32: {
      const auto f = static_cast<float>(value);
      std::memcpy(p + index * 4, &f, 4);
      return;
    }
    case DataType::kFloat16: {
      const std::uint16_t h = toHalfBits(static_cast<float>(value));
      std::memcpy(p + index * 2, &h, 2);
      return;
    }
    case DataType::kBFloat16: {
      const std::uint16_t b = toBFloat16Bits(static_cast<float>(value));
      std::memcpy(p + index * 2, &b, 2);
      return;
    }
    default: storeInt(base, index, dtype, static_cast<std::int64_t>(value)); return;
  }
}

double loadDouble(const void* base, std::size_t index, DataType dtype) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dtype) {
    case DataType::kFloat64: {
      double d;
      std::memcpy(&d, p + index * 8, 8);
      return d;
    }
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, p + index * 4, 4);
      return f;
    }
    case DataType::kFloat16: {
      std::uint16_t h;
      std::memcpy(&h, p + index * 2, 2);
      return fromHalfBits(h);
    }
    case DataType::kBFloat16: {
      std::uint16_t b;
      std::memcpy(&b, p + index * 2, 2);
      return fromBFloat16Bits(b);
    }
    default: return static_cast<double>(loadInt(base, index, dtype));
  }
}

void storeInt(void* base, std::size_t index, DataType dtype, std::int64_t value) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dtype) {
    case DataType::kInt32: {
      const auto v = static_cast<std::int32_t>(static_cast<std::uint32_t>(value));
      std::memcpy(p + index * 4, &v, 4);
      return;
    }
    case DataType::kInt64: std::memcpy(p + index * 8, &value, 8); return;
    case DataType::kUInt8: p[index] = static_cast<unsigned char>(value & 0xff); return;
    default: storeDouble(base, index, dtype, static_cast<double>(value)); return;
  }
}

std::int64_t loadInt(const void* base, std::size_t index, DataType dtype) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dtype) {
    case DataType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, p + index * 4, 4);
      return v;
    }
    case DataType::kInt64: {
      std::int64_t v;
      std::memcpy(&v, p + index * 8, 8);
      return v;
    }
    case DataType::kUInt8: return p[index];
    default: return static_cast<std::int64_t>(loadDouble(base, index, dtype));
  }
}

std::uint64_t mix(std::uint64_t seed, std::uint64_t rank, std::uint64_t index) {
  std::uint64_t z = seed ^ (rank * 0x9E3779B97F4A7C15ull) ^ (index * 0xC2B2AE3D27D4EB4Full);
  for (int round = 0; round < 2; ++round) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
  }
  return z;
}

double inputFloat(DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed, int rank, std::size_t index) {
  const std::uint64_t h = mix(seed + static_cast<std::uint64_t>(op), static_cast<std::uint64_t>(rank), index);
  if (pattern == Pattern::kRandom && op != ReduceOp::kProd) {
    const double unit = static_cast<double>(h >> 11) * std::ldexp(1.0, -53);  // [0, 1)
    return roundToDtype(2.0 * unit - 1.0, dtype);
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      // |partial sum| <= 16 ranks * 4 = 64: exact in bfloat16 for integers
      // (8 significant bits) and in float16 for quarters (9 bits needed, 11 held).
      if (dtype == DataType::kBFloat16) return static_cast<double>(h % 9) - 4.0;
      return (static_cast<double>(h % 33) - 16.0) / 4.0;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      if (dtype == DataType::kBFloat16) return static_cast<double>(h % 257) - 128.0;
      if (dtype == DataType::kFloat16) return (static_cast<double>(h % 2001) - 1000.0) / 8.0;
      return (static_cast<double>(h % 2000001) - 1000000.0) / 64.0;
    case ReduceOp::kProd: {
      // A rank contributes 2 or 0.5 on a fixed residue of (rank + index) mod 8,
      // so any product over <= 16 ranks stays within [2^-2, 2^2]: exact everywhere.
      const std::size_t slot = (static_cast<std::size_t>(rank) + index) % 8;
      const double sign = (h & 1) ? -1.0 : 1.0;
      if (slot == 0) return 2.0 * sign;
      if (slot == 4) return 0.5 * sign;
      return sign;
    }
  }
  return 0.0;
}

std::int64_t inputInt(DataType dtype, ReduceOp op, std::uint64_t seed, int rank, std::size_t index) {
  const std::uint64_t h = mix(seed + static_cast<std::uint64_t>(op), static_cast<std::uint64_t>(rank), index);
  const std::int64_t fullRange = truncateToDtype(h, dtype);
  if (dtype == DataType::kUInt8) return fullRange;  // every uint8 sum / prod wraps quickly anyway
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      // Every third element is full range, so sums wrap around.
      return index % 3 == 0 ? fullRange : static_cast<std::int64_t>(h % 201) - 100;
    case ReduceOp::kMin:
    case ReduceOp::kMax: return fullRange;
    case ReduceOp::kProd: {
      if (index % 5 == 0) return fullRange;  // products wrap around
      static constexpr std::int64_t kSmall[] = {-3, -2, -1, 1, 2, 3};
      return kSmall[h % 6];
    }
  }
  return 0;
}

void fillReduceInput(void* dst, DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed, int rank,
                     std::size_t first, std::size_t count) {
  if (isFloatingPoint(dtype)) {
    for (std::size_t e = 0; e < count; ++e) storeDouble(dst, e, dtype, inputFloat(dtype, op, pattern, seed, rank, first + e));
  } else {
    for (std::size_t e = 0; e < count; ++e) storeInt(dst, e, dtype, inputInt(dtype, op, seed, rank, first + e));
  }
}

void fillBytes(void* dst, std::size_t bytes, std::uint64_t seed, int rank) {
  auto* p = static_cast<unsigned char*>(dst);
  for (std::size_t word = 0; word * 8 < bytes; ++word) {
    const std::uint64_t h = mix(seed, static_cast<std::uint64_t>(rank), word);
    std::memcpy(p + word * 8, &h, std::min<std::size_t>(8, bytes - word * 8));
  }
}

std::string checkReduction(const void* got, DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed,
                           int worldSize, std::size_t first, std::size_t count) {
  std::ostringstream report;
  std::size_t mismatches = 0;
  const bool floating = isFloatingPoint(dtype);
  const double u = unitRoundoff(dtype);
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t index = first + e;
    bool ok;
    std::string detail;  // formatted only for reported mismatches: formatting costs far more than checking
    if (floating) {
      double ref = 0.0, sumAbs = 0.0;
      for (int r = 0; r < worldSize; ++r) {
        const double x = inputFloat(dtype, op, pattern, seed, r, index);
        if (r == 0) {
          ref = x;
        } else if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
          ref += x;
        } else if (op == ReduceOp::kMin) {
          ref = std::min(ref, x);
        } else if (op == ReduceOp::kMax) {
          ref = std::max(ref, x);
        } else {
          ref *= x;
        }
        sumAbs += std::fabs(x);
      }
      double tol = 0.0;
      const bool summing = op == ReduceOp::kSum || op == ReduceOp::kAvg;
      if (pattern == Pattern::kRandom && summing) {
        // One rounding per reduction step (worldSize - 1 steps), each at most
        // u * |partial| <= u * sumAbs; +2 steps of slack for a final copy/round.
        tol = (worldSize + 1) * u * sumAbs + worldSize * subnormalSlack(dtype);
      }
      if (op == ReduceOp::kAvg) {
        ref /= worldSize;
        // The sum's bound shrinks with the division, which rounds once more
        // (twice when done in float32 before narrowing to 16 bits).
        tol = tol / worldSize + 2.0 * u * std::fabs(ref) + subnormalSlack(dtype);
      }
      const double value = loadDouble(got, e, dtype);
      ok = std::fabs(value - ref) <= tol;  // false for NaN
      if (!ok && mismatches < kMaxReported) {
        std::ostringstream os;
        os << "got " << value << " expected " << ref << " (tolerance " << tol << ")";
        detail = os.str();
      }
    } else {
      std::uint64_t acc = 0;
      std::int64_t extreme = 0;
      for (int r = 0; r < worldSize; ++r) {
        const std::int64_t x = inputInt(dtype, op, seed, r, index);
        if (r == 0) {
          acc = static_cast<std::uint64_t>(x);
          extreme = x;
        } else if (op == ReduceOp::kSum) {
          acc += static_cast<std::uint64_t>(x);
        } else if (op == ReduceOp::kProd) {
          acc *= static_cast<std::uint64_t>(x);
        } else if (op == ReduceOp::kMin) {
          extreme = std::min(extreme, x);
        } else {
          extreme = std::max(extreme, x);
        }
      }
      const bool extremal = op == ReduceOp::kMin || op == ReduceOp::kMax;
      const std::int64_t ref = extremal ? extreme : truncateToDtype(acc, dtype);
      const std::int64_t value = loadInt(got, e, dtype);
      ok = value == ref;
      if (!ok && mismatches < kMaxReported) {
        detail = "got " + std::to_string(value) + " expected " + std::to_string(ref) + " (exact, wraparound)";
      }
    }
    if (!ok) {
      if (mismatches < kMaxReported) report << "\n    element " << e << " (input index " << index << "): " << detail;
      ++mismatches;
    }
  }
  if (mismatches == 0) return {};
  std::ostringstream out;
  out << mismatches << " of " << count << " elements differ from the reference:" << report.str();
  return out.str();
}

std::string compareBytes(const void* got, const void* expected, std::size_t bytes, std::size_t elemBytes) {
  if (bytes == 0 || std::memcmp(got, expected, bytes) == 0) return {};
  const auto* a = static_cast<const unsigned char*>(got);
  const auto* b = static_cast<const unsigned char*>(expected);
  std::size_t firstDiff = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < bytes; ++i) {
    if (a[i] != b[i]) {
      if (differing == 0) firstDiff = i;
      ++differing;
    }
  }
  std::ostringstream out;
  out << differing << " of " << bytes << " bytes differ; first at byte " << firstDiff << " (element "
      << firstDiff / elemBytes << "): got 0x" << std::hex << static_cast<int>(a[firstDiff]) << " expected 0x"
      << static_cast<int>(b[firstDiff]);
  return out.str();
}

std::uint64_t hashBytes(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<std::size_t> listShape(std::size_t segments, std::size_t scale) {
  static const std::size_t kLengths[] = {1, 0, 7, 13, 2, 31, 1, 97, 0, 3, 257, 5, 1021, 11};
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < segments; ++i)
    out.push_back(kLengths[i % std::size(kLengths)] * (i % 3 == 2 ? scale : 1));
  return out;
}

}  // namespace boostcomm::testing
