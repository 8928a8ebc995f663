// Reduction kernels and 16-bit float conversions.
//
// Every ISA table this CPU supports (baseline, AVX2, AVX-512) is checked
// against a plain scalar reference written here, bit for bit: one a op b is
// exactly rounded, so vector code has no excuse to differ. The only allowance
// is the payload of a NaN produced by sum/prod (IEEE leaves it open).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "boostcomm/error.h"
#include "boostcomm/types.h"
#include "core/half.h"
#include "core/reduce.h"
#include "core/reduce_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace boostcomm::core {
namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                  DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};
constexpr std::size_t kCounts[] = {1, 7, 15, 16, 17, 31, 63, 64, 65, 127, 129, 1000, 1023, 1025, 4097};

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float fromBits(std::uint32_t b) { return std::bit_cast<float>(b); }
bool isHalfNan(std::uint16_t h) { return (h & 0x7FFF) > 0x7C00; }
bool isBf16Nan(std::uint16_t h) { return (h & 0x7FFF) > 0x7F80; }

// ---- 16-bit conversions -----------------------------------------------------

TEST(Half, KnownPatterns) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);  // just below the rounding boundary
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);    // tie to even -> overflow -> inf
  EXPECT_EQ(floatToHalf(1e10f), 0x7C00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);         // largest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);            // tie -> even (0)
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);            // tie 1|2 -> 2
  EXPECT_EQ(floatToHalf(std::ldexp(2047.0f, -25)), 0x0400);         // rounds up into the normals
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);     // tie -> even (down)
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3C02);     // tie -> even (up)
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -30)), 0x0000);            // underflow
  EXPECT_TRUE(isHalfNan(floatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(isHalfNan(floatToHalf(fromBits(0x7F800001))));        // payload only in dropped bits
  EXPECT_EQ(floatToHalf(fromBits(0xFFC00000)) & 0x8000, 0x8000);    // NaN keeps its sign

  EXPECT_EQ(halfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(bits(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(halfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));  // signalling NaN stays NaN
}

TEST(BFloat16, KnownPatterns) {
  EXPECT_EQ(floatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBFloat16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F808000)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F818000)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBFloat16(fromBits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(floatToBFloat16(fromBits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBFloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(floatToBFloat16(fromBits(0x00018000)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(floatToBFloat16(1.0f / 3.0f), 0x3EAB);
  // A NaN whose payload sits only in the low 16 bits must not become inf.
  EXPECT_TRUE(isBf16Nan(floatToBFloat16(fromBits(0x7F800001))));
  EXPECT_TRUE(isBf16Nan(floatToBFloat16(fromBits(0xFF800001))));
  EXPECT_TRUE(isBf16Nan(floatToBFloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bits(bfloat16ToFloat(0x3F80)), 0x3F800000u);
  EXPECT_EQ(bits(bfloat16ToFloat(0xFF80)), 0xFF800000u);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(0x7FC1)));
}

// Exhaustive, independent of the implementation: for every pair of adjacent
// positive finite 16-bit values, values just inside each side of their
// midpoint round to the nearer one, and the midpoint itself to the even one.
template <class ToFloat, class FromFloat>
void checkAllMidpoints(std::uint16_t largestFinite, ToFloat toFloat, FromFloat fromFloat) {
  for (std::uint32_t h = 0; h < largestFinite; ++h) {
    const float lo = toFloat(static_cast<std::uint16_t>(h));
    const float hi = toFloat(static_cast<std::uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: float32 has bits to spare
    ASSERT_EQ(fromFloat(lo), h);
    ASSERT_EQ(fromFloat(std::nextafter(mid, 0.0f)), h) << "h=" << h;
    ASSERT_EQ(fromFloat(std::nextafter(mid, hi)), h + 1) << "h=" << h;
    ASSERT_EQ(fromFloat(mid), (h & 1) ? h + 1 : h) << "tie at h=" << h;
    ASSERT_EQ(fromFloat(-lo), h | 0x8000u);
  }
}

TEST(Half, RoundsEveryMidpointToNearestEven) { checkAllMidpoints(0x7BFF, halfToFloat, floatToHalf); }
TEST(BFloat16, RoundsEveryMidpointToNearestEven) { checkAllMidpoints(0x7F7F, bfloat16ToFloat, floatToBFloat16); }

TEST(Half, RoundTripsEveryValue) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto v = static_cast<std::uint16_t>(h);
    if (isHalfNan(v)) {
      EXPECT_TRUE(std::isnan(halfToFloat(v)));
      EXPECT_TRUE(isHalfNan(floatToHalf(halfToFloat(v))));
    } else {
      ASSERT_EQ(floatToHalf(halfToFloat(v)), v) << std::hex << h;
    }
    if (!isBf16Nan(v)) {
      ASSERT_EQ(floatToBFloat16(bfloat16ToFloat(v)), v) << std::hex << h;
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) float hwHalfToFloat(std::uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) std::uint16_t hwFloatToHalf(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

// The scalar path must give the F16C bits exactly (NaN payloads included), so
// nodes with and without F16C agree.
TEST(Half, MatchesF16cBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    ASSERT_EQ(bits(halfToFloat(static_cast<std::uint16_t>(h))), bits(hwHalfToFloat(static_cast<std::uint16_t>(h))))
        << std::hex << h;
  }
  auto check = [](std::uint32_t x) {
    ASSERT_EQ(floatToHalf(fromBits(x)), hwFloatToHalf(fromBits(x))) << std::hex << x;
  };
  for (std::uint64_t x = 0; x <= 0xFFFFFFFFu; x += 4099) check(static_cast<std::uint32_t>(x));
  for (std::uint32_t x = 0x33000000; x < 0x33800000; x += 7) check(x);  // subnormal range
  for (std::uint32_t x = 0x477FE000; x < 0x47800100; ++x) check(x);     // overflow boundary
  for (std::uint32_t x = 0x7F800000; x < 0x7F810000; ++x) check(x);     // inf and NaNs
  for (std::uint32_t x = 0xFFC00000; x < 0xFFC10000; ++x) check(x);
}
#endif

// ---- scalar reference -------------------------------------------------------

template <class F>
F refFloat(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return a + b;
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMax:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return std::signbit(a) ? b : a;  // +0 wins
      return a > b ? a : b;
    case ReduceOp::kMin:
      if (std::isnan(a)) return a;
      if (std::isnan(b)) return b;
      if (a == b) return std::signbit(a) ? a : b;  // -0 wins
      return a < b ? a : b;
  }
  return a;
}

template <class I>
I refInt(ReduceOp op, I a, I b) {
  const auto ua = static_cast<std::uint64_t>(a);
  const auto ub = static_cast<std::uint64_t>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return static_cast<I>(ua + ub);  // modular: the low bits are the wrapped result
    case ReduceOp::kProd: return static_cast<I>(ua * ub);
    case ReduceOp::kMax: return a > b ? a : b;
    case ReduceOp::kMin: return a < b ? a : b;
  }
  return a;
}

template <class T, class Combine>
void refLoop(void* out, const void* a, const void* b, std::size_t n, Combine combine) {
  std::vector<T> x(n), y(n);
  std::memcpy(x.data(), a, n * sizeof(T));
  std::memcpy(y.data(), b, n * sizeof(T));
  for (std::size_t i = 0; i < n; ++i) {
    const T r = combine(x[i], y[i]);
    std::memcpy(static_cast<char*>(out) + i * sizeof(T), &r, sizeof(T));
  }
}

void refReduce(void* out, const void* a, const void* b, std::size_t n, DataType dtype, ReduceOp op) {
  using U16 = std::uint16_t;
  switch (dtype) {
    case DataType::kFloat32: return refLoop<float>(out, a, b, n, [op](float x, float y) { return refFloat(op, x, y); });
    case DataType::kFloat64:
      return refLoop<double>(out, a, b, n, [op](double x, double y) { return refFloat(op, x, y); });
    case DataType::kFloat16:
      return refLoop<U16>(out, a, b, n, [op](U16 x, U16 y) {
        return floatToHalf(refFloat(op, halfToFloat(x), halfToFloat(y)));
      });
    case DataType::kBFloat16:
      return refLoop<U16>(out, a, b, n, [op](U16 x, U16 y) {
        return floatToBFloat16(refFloat(op, bfloat16ToFloat(x), bfloat16ToFloat(y)));
      });
    case DataType::kInt32:
      return refLoop<std::int32_t>(out, a, b, n, [op](std::int32_t x, std::int32_t y) { return refInt(op, x, y); });
    case DataType::kInt64:
      return refLoop<std::int64_t>(out, a, b, n, [op](std::int64_t x, std::int64_t y) { return refInt(op, x, y); });
    case DataType::kUInt8:
      return refLoop<std::uint8_t>(out, a, b, n, [op](std::uint8_t x, std::uint8_t y) { return refInt(op, x, y); });
  }
}

bool elementIsNan(DataType dtype, const unsigned char* p) {
  switch (dtype) {
    case DataType::kFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case DataType::kFloat64: { double d; std::memcpy(&d, p, 8); return std::isnan(d); }
    case DataType::kFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return isHalfNan(h); }
    case DataType::kBFloat16: { std::uint16_t h; std::memcpy(&h, p, 2); return isBf16Nan(h); }
    default: return false;
  }
}

// Bitwise equality, except that a NaN from sum/prod/divide may carry any payload.
::testing::AssertionResult sameElements(DataType dtype, bool anyNanPayload, const void* got, const void* want,
                                        std::size_t n) {
  const std::size_t size = dataTypeSize(dtype);
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(g + i * size, w + i * size, size) == 0) continue;
    if (anyNanPayload && elementIsNan(dtype, w + i * size) && elementIsNan(dtype, g + i * size)) continue;
    return ::testing::AssertionFailure() << "element " << i << " of " << n << " differs";
  }
  return ::testing::AssertionSuccess();
}

// ---- random operands ----------------------------------------------------------

// Mostly ordinary values, plus specials (NaN, inf, +-0, subnormals, extremes),
// raw random bits, and b[i] == +-a[i] to hit the equal-operand and +0/-0 rules.
template <class F>
F randomFloat(std::mt19937_64& rng) {
  using Bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  using L = std::numeric_limits<F>;
  const F specials[] = {L::quiet_NaN(), -L::quiet_NaN(), L::infinity(), -L::infinity(), F(0), -F(0),
                        L::denorm_min(), -L::denorm_min(), L::max(), L::lowest(), L::min()};
  const unsigned pick = rng() % 10;
  if (pick == 0) return specials[rng() % std::size(specials)];
  if (pick <= 2) return std::bit_cast<F>(static_cast<Bits>(rng()));
  return static_cast<F>(std::uniform_real_distribution<double>(-100.0, 100.0)(rng));
}

void fillRandom(std::vector<unsigned char>& a, std::vector<unsigned char>& b, DataType dtype, std::size_t n,
                std::mt19937_64& rng) {
  for (auto& byte : a) byte = static_cast<unsigned char>(rng());
  for (auto& byte : b) byte = static_cast<unsigned char>(rng());
  const std::size_t size = dataTypeSize(dtype);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char* pa = a.data() + i * size;
    unsigned char* pb = b.data() + i * size;
    if (dtype == DataType::kFloat32) {
      const float x = randomFloat<float>(rng), y = randomFloat<float>(rng);
      std::memcpy(pa, &x, 4);
      std::memcpy(pb, &y, 4);
    } else if (dtype == DataType::kFloat64) {
      const double x = randomFloat<double>(rng), y = randomFloat<double>(rng);
      std::memcpy(pa, &x, 8);
      std::memcpy(pb, &y, 8);
    }
    // 16-bit floats and integers keep raw random bits: every pattern is valid.
    const unsigned pick = rng() % 8;
    if (pick == 0) std::memcpy(pb, pa, size);
    if (pick == 1 && isFloatingPoint(dtype)) {  // b = -a: sign bit is the top bit
      std::memcpy(pb, pa, size);
      pb[size - 1] ^= 0x80;
    }
  }
}

// ---- kernels vs reference, every supported ISA ---------------------------------

enum class Aliasing { kNone, kOutIsA, kOutIsB, kAllSame };

std::vector<KernelIsa> supportedIsas() {
  std::vector<KernelIsa> isas;
  for (int i = 0; i < kNumKernelIsas; ++i) {
    if (kernelTableFor(static_cast<KernelIsa>(i)) != nullptr) isas.push_back(static_cast<KernelIsa>(i));
  }
  return isas;
}

class ReduceIsaTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    table_ = kernelTableFor(GetParam());
    if (table_ == nullptr) GTEST_SKIP() << "ISA not supported by this CPU";
  }
  const KernelTable* table_ = nullptr;
};

TEST_P(ReduceIsaTest, MatchesScalarReferenceForEveryTypeOpCountAndAliasing) {
  std::mt19937_64 rng(12345);
  for (DataType dtype : kAllTypes) {
    const std::size_t size = dataTypeSize(dtype);
    for (ReduceOp op : kAllOps) {
      const bool anyNanPayload = op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProd;
      for (std::size_t n : kCounts) {
        for (Aliasing aliasing : {Aliasing::kNone, Aliasing::kOutIsA, Aliasing::kOutIsB, Aliasing::kAllSame}) {
          SCOPED_TRACE(std::string(toString(dtype)) + " " + std::string(toString(op)) + " n=" + std::to_string(n) +
                       " aliasing=" + std::to_string(static_cast<int>(aliasing)));
          // A random offset of 0..32 elements: the kernels step to a 64-byte
          // boundary of out first, so every head length gets exercised.
          const std::size_t offset = rng() % 33;
          std::vector<unsigned char> a((n + offset) * size), b((n + offset) * size), out((n + offset) * size, 0xCD);
          fillRandom(a, b, dtype, n + offset, rng);
          unsigned char* pa = a.data() + offset * size;
          unsigned char* pb = b.data() + (rng() % 2 ? offset : 0) * size;  // b's alignment may differ from out's
          if (aliasing == Aliasing::kAllSame) pb = pa;
          std::vector<unsigned char> want(n * size);
          refReduce(want.data(), pa, pb, n, dtype, op);
          unsigned char* po = aliasing == Aliasing::kNone ? out.data() + offset * size
                              : aliasing == Aliasing::kOutIsB ? pb : pa;
          table_->reduce[static_cast<int>(dtype)][static_cast<int>(op)](po, pa, pb, n);
          ASSERT_TRUE(sameElements(dtype, anyNanPayload, po, want.data(), n));
          if (aliasing == Aliasing::kNone && offset > 0) {
            ASSERT_EQ(out[offset * size - 1], 0xCD) << "wrote before out";
          }
        }
      }
    }
  }
}

TEST_P(ReduceIsaTest, DivideMatchesScalarReference) {
  std::mt19937_64 rng(777);
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (int divisor : {2, 3, 7, 64}) {
      for (std::size_t n : kCounts) {
        SCOPED_TRACE(std::string(toString(dtype)) + " /" + std::to_string(divisor) + " n=" + std::to_string(n));
        const std::size_t size = dataTypeSize(dtype);
        std::vector<unsigned char> a(n * size), unused(n * size);
        fillRandom(a, unused, dtype, n, rng);
        std::vector<unsigned char> want(a);
        for (std::size_t i = 0; i < n; ++i) {
          unsigned char* p = want.data() + i * size;
          if (dtype == DataType::kFloat32) {
            float f; std::memcpy(&f, p, 4); f /= static_cast<float>(divisor); std::memcpy(p, &f, 4);
          } else if (dtype == DataType::kFloat64) {
            double d; std::memcpy(&d, p, 8); d /= divisor; std::memcpy(p, &d, 8);
          } else {
            std::uint16_t h; std::memcpy(&h, p, 2);
            const bool half = dtype == DataType::kFloat16;
            const float f = (half ? halfToFloat(h) : bfloat16ToFloat(h)) / static_cast<float>(divisor);
            h = half ? floatToHalf(f) : floatToBFloat16(f);
            std::memcpy(p, &h, 2);
          }
        }
        table_->divide[static_cast<int>(dtype)](a.data(), n, divisor);
        ASSERT_TRUE(sameElements(dtype, true, a.data(), want.data(), n));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, ReduceIsaTest,
                         ::testing::Values(KernelIsa::kBaseline, KernelIsa::kAvx2, KernelIsa::kAvx512),
                         [](const ::testing::TestParamInfo<KernelIsa>& info) {
                           switch (info.param) {
                             case KernelIsa::kBaseline: return std::string("baseline");
                             case KernelIsa::kAvx2: return std::string("avx2");
                             case KernelIsa::kAvx512: return std::string("avx512");
                           }
                           return std::string("unknown");
                         });

// ---- public entry points: semantics worth spelling out ----------------------------

template <class T>
std::vector<T> reduced(std::vector<T> a, const std::vector<T>& b, DataType dtype, ReduceOp op) {
  reduce(a.data(), a.data(), b.data(), a.size(), dtype, op);
  return a;
}

TEST(Reduce, DispatchPicksTheBestSupportedIsa) {
  const std::vector<KernelIsa> isas = supportedIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_STREQ(reduceKernelIsa(), kernelTableFor(isas.back())->isaName);
  EXPECT_EQ(&activeKernelTable(), kernelTableFor(isas.back()));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    EXPECT_STREQ(reduceKernelIsa(), "avx512");
  }
#endif
}

TEST(Reduce, FloatNanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {nan, 1.0f, inf, inf, -0.0f, 0.0f, nan, 2.0f};
  const std::vector<float> b = {1.0f, nan, -inf, 1.0f, 0.0f, -0.0f, -inf, -inf};
  const auto sum = reduced(a, b, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_TRUE(std::isnan(sum[0]) && std::isnan(sum[1]) && std::isnan(sum[2]));
  EXPECT_EQ(sum[3], inf);
  const auto mx = reduced(a, b, DataType::kFloat32, ReduceOp::kMax);
  const auto mn = reduced(a, b, DataType::kFloat32, ReduceOp::kMin);
  for (std::size_t i : {0, 1, 6}) EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;  // NaN propagates
  EXPECT_EQ(mx[2], inf);
  EXPECT_EQ(mn[2], -inf);
  EXPECT_EQ(bits(mx[4]), 0x00000000u);  // max(-0, +0) = +0, in either order
  EXPECT_EQ(bits(mx[5]), 0x00000000u);
  EXPECT_EQ(bits(mn[4]), 0x80000000u);  // min(-0, +0) = -0, in either order
  EXPECT_EQ(bits(mn[5]), 0x80000000u);
  EXPECT_EQ(mn[7], -inf);
  const auto prod = reduced<double>({0.0, 2.0}, {std::numeric_limits<double>::infinity(), -3.0}, DataType::kFloat64,
                                    ReduceOp::kProd);
  EXPECT_TRUE(std::isnan(prod[0]));
  EXPECT_EQ(prod[1], -6.0);
}

TEST(Reduce, IntegersWrapAround) {
  using L32 = std::numeric_limits<std::int32_t>;
  using L64 = std::numeric_limits<std::int64_t>;
  EXPECT_EQ(reduced<std::int32_t>({L32::max(), L32::min()}, {1, -1}, DataType::kInt32, ReduceOp::kSum),
            (std::vector<std::int32_t>{L32::min(), L32::max()}));
  EXPECT_EQ(reduced<std::int32_t>({65536, L32::min(), -7}, {65536, -1, 3}, DataType::kInt32, ReduceOp::kProd),
            (std::vector<std::int32_t>{0, L32::min(), -21}));
  EXPECT_EQ(reduced<std::int64_t>({L64::max(), 1LL << 32}, {1, 1LL << 32}, DataType::kInt64, ReduceOp::kSum)[0],
            L64::min());
  EXPECT_EQ(reduced<std::int64_t>({L64::max(), 1LL << 32}, {1, 1LL << 32}, DataType::kInt64, ReduceOp::kProd)[1], 0);
  EXPECT_EQ(reduced<std::uint8_t>({200, 16, 255}, {100, 16, 255}, DataType::kUInt8, ReduceOp::kSum),
            (std::vector<std::uint8_t>{44, 32, 254}));
  EXPECT_EQ(reduced<std::uint8_t>({200, 16, 255}, {100, 16, 255}, DataType::kUInt8, ReduceOp::kProd),
            (std::vector<std::uint8_t>{32, 0, 1}));
  EXPECT_EQ(reduced<std::int32_t>({-5, 7}, {3, -9}, DataType::kInt32, ReduceOp::kMin), (std::vector<std::int32_t>{-5, -9}));
  EXPECT_EQ(reduced<std::uint8_t>({0, 255}, {255, 1}, DataType::kUInt8, ReduceOp::kMax), (std::vector<std::uint8_t>{255, 255}));
  EXPECT_EQ(reduced<std::int32_t>({5}, {6}, DataType::kInt32, ReduceOp::kAvg), (std::vector<std::int32_t>{11}));
}

TEST(Reduce, SixteenBitFloatsRoundOnceToNearestEven) {
  // fp16: 65504 + 65504 overflows to inf; 1 + 2^-11 is a tie -> 1 (even); 1+2^-10 + 2^-11 -> 1+2^-9.
  EXPECT_EQ(reduced<std::uint16_t>({0x7BFF, 0x3C00, 0x3C01, 0x0001}, {0x7BFF, 0x1000, 0x1000, 0x0001},
                                   DataType::kFloat16, ReduceOp::kSum),
            (std::vector<std::uint16_t>{0x7C00, 0x3C00, 0x3C02, 0x0002}));
  EXPECT_EQ(reduced<std::uint16_t>({0x3C00}, {0x3555}, DataType::kFloat16, ReduceOp::kProd)[0], 0x3555);
  // bf16: 1 + 2^-8 is a tie -> 1; 1+2^-7 + 2^-8 -> 1+2^-6.
  EXPECT_EQ(reduced<std::uint16_t>({0x3F80, 0x3F81}, {0x3B80, 0x3B80}, DataType::kBFloat16, ReduceOp::kSum),
            (std::vector<std::uint16_t>{0x3F80, 0x3F82}));
  const auto nan = reduced<std::uint16_t>({0x7FC1, 0x3F80}, {0x3F80, 0x7F81}, DataType::kBFloat16, ReduceOp::kMax);
  EXPECT_TRUE(isBf16Nan(nan[0]) && isBf16Nan(nan[1]));
}

TEST(DivideBy, FinishesAnAverage) {
  std::vector<float> f = {3.0f, 6.0f, -9.0f, 1.0f};
  divideBy(f.data(), f.size(), DataType::kFloat32, 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, 2.0f, -3.0f, 1.0f / 3.0f}));
  std::vector<std::uint16_t> h = {0x3C00, 0x3C00};
  divideBy(h.data(), 1, DataType::kFloat16, 3);
  EXPECT_EQ(h, (std::vector<std::uint16_t>{0x3555, 0x3C00}));  // count respected
  std::vector<std::uint16_t> bf = {0x3F80};
  divideBy(bf.data(), 1, DataType::kBFloat16, 3);
  EXPECT_EQ(bf[0], 0x3EAB);
}

TEST(Reduce, RejectsBadArguments) {
  std::vector<float> buf(16, 1.0f);
  auto expectInvalid = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    }
  };
  expectInvalid([&] { reduce(nullptr, buf.data(), buf.data(), 4, DataType::kFloat32, ReduceOp::kSum); });
  expectInvalid([&] { reduce(buf.data() + 1, buf.data(), buf.data() + 8, 4, DataType::kFloat32, ReduceOp::kSum); });
  expectInvalid([&] { reduce(buf.data(), buf.data(), buf.data(), 4, static_cast<DataType>(42), ReduceOp::kSum); });
  expectInvalid([&] { reduce(buf.data(), buf.data(), buf.data(), 4, DataType::kFloat32, static_cast<ReduceOp>(9)); });
  expectInvalid([&] { divideBy(buf.data(), 4, DataType::kInt32, 2); });
  expectInvalid([&] { divideBy(buf.data(), 4, DataType::kFloat32, 0); });
  expectInvalid([&] { divideBy(nullptr, 4, DataType::kFloat32, 2); });
  // count 0 touches nothing, null pointers included; adjacent ranges are fine.
  EXPECT_NO_THROW(reduce(nullptr, nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_NO_THROW(divideBy(nullptr, 0, DataType::kFloat16, 2));
  EXPECT_NO_THROW(reduce(buf.data(), buf.data() + 4, buf.data() + 8, 4, DataType::kFloat32, ReduceOp::kSum));
  EXPECT_EQ(buf[0], 2.0f);
}

}  // namespace
}  // namespace boostcomm::core
