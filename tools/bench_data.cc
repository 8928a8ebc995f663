#include "bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "cli_internal.h"
#include "boostcomm/buffer.h"

namespace boostcomm::tools {
namespace {

std::uint64_t splitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Element conversions; 16-bit floats go through float32 like the kernels do.
template <typename T>
T fromInt(std::int64_t v) {
  if constexpr (std::is_same_v<T, Float16>) return Float16{core::floatToHalf(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{core::floatToBFloat16(static_cast<float>(v))};
  else return static_cast<T>(v);  // integer casts wrap modulo 2^bits, like the kernels
}

template <typename T>
double toDouble(T v) {
  if constexpr (std::is_same_v<T, Float16>) return core::halfToFloat(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return core::bfloat16ToFloat(v.bits);
  else return static_cast<double>(v);
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Unit roundoff (half an ulp of 1) of each float type.
template <typename T>
constexpr double unitRoundoff() {
  if constexpr (std::is_same_v<T, float>) return 0x1p-24;
  else if constexpr (std::is_same_v<T, double>) return 0x1p-53;
  else if constexpr (std::is_same_v<T, Float16>) return 0x1p-11;
  else return 0x1p-8;  // bfloat16
}

template <typename F>
decltype(auto) withType(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32: return f(float{});
    case DataType::kFloat64: return f(double{});
    case DataType::kFloat16: return f(Float16{});
    case DataType::kBFloat16: return f(BFloat16{});
    case DataType::kInt32: return f(std::int32_t{});
    case DataType::kInt64: return f(std::int64_t{});
    case DataType::kUInt8: return f(std::uint8_t{});
  }
  return f(float{});
}

// Reference value of one output element, reduced over `ranks` inputs at
// global input index `index` (exact: all inputs are small integers).
struct Reduced {
  std::int64_t value;    // sum / prod / min / max
  std::int64_t sumAbs;   // sum of |v|: the scale the float tolerance uses
};

Reduced reduceOverRanks(const Expectation& e, std::size_t index) {
  Reduced r{inputValue(e.op, e.dtype, 0, index), 0};
  r.sumAbs = std::abs(r.value);
  for (int k = 1; k < e.ranks; ++k) {
    const std::int64_t v = inputValue(e.op, e.dtype, k, index);
    r.sumAbs += std::abs(v);
    switch (e.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: r.value += v; break;
      case ReduceOp::kProd: r.value *= v; break;
      case ReduceOp::kMin: r.value = std::min(r.value, v); break;
      case ReduceOp::kMax: r.value = std::max(r.value, v); break;
    }
  }
  return r;
}

// Every partial sum of the inputs is an integer of magnitude <= sumAbs, so a
// sum is exact in any order while sumAbs <= 1/u (2^24 for float32, 2048 for
// float16, 256 for bfloat16): then nothing but the average's division may
// round, once in the dtype and once in float32 on the way (<= 2u relative).
// Beyond that, each of the ranks - 1 additions may round by u * sumAbs.
template <typename T>
double sumTolerance(const Reduced& r, const Expectation& e, double expected) {
  const double u = std::max(unitRoundoff<T>(), e.wireRoundoff);
  const double sumAbs = static_cast<double>(r.sumAbs);
  const double divide = e.op == ReduceOp::kAvg ? 2.0 * u * std::fabs(expected) : 0.0;
  if (sumAbs <= 1.0 / u) return divide;
  const double adds = (e.ranks + 1) * u * sumAbs;
  return divide + (e.op == ReduceOp::kAvg ? adds / e.ranks : adds);
}

template <typename T>
std::size_t verifyTyped(const T* data, std::size_t count, const Expectation& e, const char* algorithm) {
  constexpr int kMaxReported = 5;
  std::size_t mismatches = 0;
  const bool reducing = e.collective == Collective::kAllreduce || e.collective == Collective::kReduceScatter;
  for (std::size_t i = 0; i < count; ++i) {
    double expected = 0;
    double tolerance = 0;
    constexpr bool exactInt = !kIsFloat<T>;
    std::int64_t expectedInt = 0;
    if (reducing) {
      // Output element i of rank `rank` in reduce_scatter is block `rank` of the input.
      const std::size_t index = e.collective == Collective::kReduceScatter ? e.rank * e.countPerRank + i : i;
      const Reduced r = reduceOverRanks(e, index);
      expectedInt = r.value;
      expected = static_cast<double>(r.value);
      if (e.op == ReduceOp::kAvg) expected /= e.ranks;
      if constexpr (kIsFloat<T>) {
        if (e.op == ReduceOp::kSum || e.op == ReduceOp::kAvg) tolerance = sumTolerance<T>(r, e, expected);
      }
    } else {
      // allgather: element i came from rank i / countPerRank; broadcast: from root.
      const bool gather = e.collective == Collective::kAllgather;
      const int source = gather ? static_cast<int>(i / e.countPerRank) : e.root;
      const std::size_t index = gather ? i % e.countPerRank : i;
      expectedInt = inputValue(e.op, e.dtype, source, index);
      expected = static_cast<double>(expectedInt);
    }
    bool ok = false;
    if constexpr (!kIsFloat<T>) {
      // Compare in T so wrap-around (uint8 sums) matches the kernels' arithmetic.
      ok = data[i] == fromInt<T>(expectedInt);
    } else {
      const double got = toDouble(data[i]);
      ok = std::fabs(got - expected) <= tolerance;  // false for NaN (the sentinel)
    }
    if (!ok) {
      if (mismatches < kMaxReported) {
        std::fprintf(stderr, "# check failed: rank %d algorithm %s element %zu: got %.9g expected %.9g (tol %.3g)\n",
                     e.rank, algorithm, i, toDouble(data[i]),
                     exactInt ? toDouble(fromInt<T>(expectedInt)) : expected, tolerance);
      }
      ++mismatches;
    }
  }
  if (mismatches > kMaxReported) {
    std::fprintf(stderr, "# check failed: rank %d algorithm %s: %zu of %zu elements wrong\n", e.rank, algorithm,
                 mismatches, count);
  }
  return mismatches;
}

}  // namespace

std::int64_t inputValue(ReduceOp op, DataType dtype, int rank, std::size_t index) {
  // Ranks below 2^16 and indices below 2^48 give distinct keys.
  const std::uint64_t h = splitMix64((static_cast<std::uint64_t>(rank) << 48) ^ index);
  if (op == ReduceOp::kProd) return (h & 1) != 0 ? -1 : 1;
  const auto v = static_cast<std::int64_t>(h % 11);
  return dtype == DataType::kUInt8 ? v : v - 5;
}

void fillInput(void* buf, std::size_t count, DataType dtype, ReduceOp op, int rank, std::size_t firstIndex) {
  withType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(buf);
    for (std::size_t j = 0; j < count; ++j) out[j] = fromInt<T>(inputValue(op, dtype, rank, firstIndex + j));
  });
}

void fillSentinel(void* buf, std::size_t count, DataType dtype) {
  withType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T value;
    if constexpr (std::is_same_v<T, Float16>) value = Float16{0x7E00};       // quiet NaN
    else if constexpr (std::is_same_v<T, BFloat16>) value = BFloat16{0x7FC0};  // quiet NaN
    else if constexpr (std::is_floating_point_v<T>) value = std::numeric_limits<T>::quiet_NaN();
    else value = std::numeric_limits<T>::max();
    std::fill_n(static_cast<T*>(buf), count, value);
  });
}

std::size_t verifyResult(const void* buf, std::size_t count, const Expectation& expect, const char* algorithm) {
  return withType(expect.dtype, [&](auto tag) {
    using T = decltype(tag);
    return verifyTyped(static_cast<const T*>(buf), count, expect, algorithm);
  });
}

}  // namespace boostcomm::tools
