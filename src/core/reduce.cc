// reduce() / divideBy(): argument checks, then one indirect call into the
// kernel table chosen for this CPU (see reduce_kernels.h for the design).
#include "core/reduce.h"

#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/reduce_kernels.h"

namespace boostcomm::core {
namespace {

// The kernel tables are indexed by the enum values.
static_assert(static_cast<int>(DataType::kFloat32) == 0 && static_cast<int>(DataType::kFloat64) == 1 &&
              static_cast<int>(DataType::kFloat16) == 2 && static_cast<int>(DataType::kBFloat16) == 3 &&
              static_cast<int>(DataType::kInt32) == 4 && static_cast<int>(DataType::kInt64) == 5 &&
              static_cast<int>(DataType::kUInt8) == 6 && kNumDataTypes == 7);
static_assert(static_cast<int>(ReduceOp::kSum) == 0 && static_cast<int>(ReduceOp::kAvg) == 1 &&
              static_cast<int>(ReduceOp::kMin) == 2 && static_cast<int>(ReduceOp::kMax) == 3 &&
              static_cast<int>(ReduceOp::kProd) == 4 && kNumReduceOps == 5);

bool cpuSupports(KernelIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case KernelIsa::kBaseline: return true;
    case KernelIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case KernelIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == KernelIsa::kBaseline;
#endif
}

const KernelTable& selectKernelTable() {
  for (int level = kNumKernelIsas - 1; level >= 0; --level) {
    if (const KernelTable* table = kernelTableFor(static_cast<KernelIsa>(level))) return *table;
  }
  return kernels::baselineTable();  // unreachable: the baseline is always supported
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Ranges [x, x+bytes) and [y, y+bytes) share a byte but do not start together.
bool partiallyOverlap(const void* x, const void* y, std::size_t bytes) {
  if (x == y) return false;
  return address(x) < address(y) + bytes && address(y) < address(x) + bytes;
}

void checkDataType(DataType dtype) {
  BC_INVALID(static_cast<unsigned>(dtype) < kNumDataTypes, -1,
             "dtype: unknown value " << static_cast<int>(dtype));
}

}  // namespace

const KernelTable* kernelTableFor(KernelIsa isa) {
  if (!cpuSupports(isa)) return nullptr;
  switch (isa) {
    case KernelIsa::kBaseline: return &kernels::baselineTable();
#if defined(__x86_64__)
    case KernelIsa::kAvx2: return &kernels::avx2Table();
    case KernelIsa::kAvx512: return &kernels::avx512Table();
#endif
    default: return nullptr;
  }
}

const KernelTable& activeKernelTable() {
  // Chosen once; thread-safe static initialisation.
  static const KernelTable& table = selectKernelTable();
  return table;
}

const char* reduceKernelIsa() { return activeKernelTable().isaName; }

void reduce(void* out, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op) {
  checkDataType(dtype);
  BC_INVALID(static_cast<unsigned>(op) < kNumReduceOps, -1,
             "op: unknown value " << static_cast<int>(op));
  if (count == 0) return;
  BC_INVALID(out != nullptr && a != nullptr && b != nullptr, -1,
             "reduce: null buffer (out=" << out << ", a=" << a << ", b=" << b << ") with count " << count);
  const std::size_t bytes = count * dataTypeSize(dtype);
  BC_INVALID(!partiallyOverlap(out, a, bytes) && !partiallyOverlap(out, b, bytes), -1,
             "reduce: out overlaps a or b without being equal to it (" << count << " x " << toString(dtype)
                                                                       << ")");
  activeKernelTable().reduce[static_cast<int>(dtype)][static_cast<int>(op)](out, a, b, count);
}

void divideBy(void* buf, std::size_t count, DataType dtype, int divisor) {
  checkDataType(dtype);
  BC_INVALID(isFloatingPoint(dtype), -1,
             "divideBy: dtype " << toString(dtype) << " is not floating point (integer averages are rejected)");
  BC_INVALID(divisor > 0, -1, "divideBy: divisor must be positive, got " << divisor);
  if (count == 0 || divisor == 1) return;
  BC_INVALID(buf != nullptr, -1, "divideBy: null buffer with count " << count);
  activeKernelTable().divide[static_cast<int>(dtype)](buf, count, divisor);
}

}  // namespace boostcomm::core
