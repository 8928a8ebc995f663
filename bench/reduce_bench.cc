// Throughput of the reduction kernels, to show that they vectorise and how
// close they come to memory bandwidth.
//
//   reduce_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Every reduce benchmark runs in place, a[i] = a[i] + b[i], as the reducing
// algorithms do (accumulate the received chunk into the local one). Traffic per
// call is 3 x bytes (read a, read b, write a) and that is what
// bytes_per_second counts; memcpy moves 2 x bytes (read, write) and is the
// yardstick: a kernel that is memory bound at large sizes should sit near it.
//
// Names: BM_Reduce<dtype>/<bytes per buffer>/<isa>, isa 0 = baseline (sse2),
// 1 = avx2, 2 = avx512, 3 = what reduce() dispatches to on this CPU.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "boostcomm/types.h"
#include "core/half.h"
#include "core/reduce.h"
#include "core/reduce_kernels.h"

namespace {

using boostcomm::DataType;
using boostcomm::ReduceOp;
namespace core = boostcomm::core;

constexpr int kDispatched = 3;
constexpr std::int64_t kMinBytes = 4 << 10;
constexpr std::int64_t kMaxBytes = 64 << 20;

// Values that keep an in-place running sum finite and normal (no subnormal
// slow paths), so every iteration does the same work.
std::vector<unsigned char> makeOperand(DataType dtype, std::size_t count, float value) {
  std::vector<unsigned char> buf(count * boostcomm::dataTypeSize(dtype));
  for (std::size_t i = 0; i < count; ++i) {
    unsigned char* p = buf.data() + i * boostcomm::dataTypeSize(dtype);
    switch (dtype) {
      case DataType::kFloat32: std::memcpy(p, &value, 4); break;
      case DataType::kFloat16: {
        const std::uint16_t h = core::floatToHalf(value);
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBFloat16: {
        const std::uint16_t h = core::floatToBFloat16(value);
        std::memcpy(p, &h, 2);
        break;
      }
      default: {
        const auto v = static_cast<std::int32_t>(i);
        std::memcpy(p, &v, 4);
      }
    }
  }
  return buf;
}

void runReduce(benchmark::State& state, DataType dtype) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const int isa = static_cast<int>(state.range(1));
  const std::size_t count = bytes / boostcomm::dataTypeSize(dtype);
  const core::KernelTable* table =
      isa == kDispatched ? &core::activeKernelTable() : core::kernelTableFor(static_cast<core::KernelIsa>(isa));
  if (table == nullptr) {
    state.SkipWithError("ISA not supported by this CPU");
    return;
  }
  state.SetLabel(table->isaName);
  std::vector<unsigned char> a = makeOperand(dtype, count, 1.0f);
  const std::vector<unsigned char> b = makeOperand(dtype, count, 0.5f);
  for (auto _ : state) {
    if (isa == kDispatched) {
      core::reduce(a.data(), a.data(), b.data(), count, dtype, ReduceOp::kSum);  // the public entry point
    } else {
      table->reduce[static_cast<int>(dtype)][static_cast<int>(ReduceOp::kSum)](a.data(), a.data(), b.data(), count);
    }
    benchmark::DoNotOptimize(a.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(3 * bytes));
}

void BM_ReduceFloat32(benchmark::State& state) { runReduce(state, DataType::kFloat32); }
void BM_ReduceFloat16(benchmark::State& state) { runReduce(state, DataType::kFloat16); }
void BM_ReduceBFloat16(benchmark::State& state) { runReduce(state, DataType::kBFloat16); }
void BM_ReduceInt32(benchmark::State& state) { runReduce(state, DataType::kInt32); }

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(2 * bytes));
}

void reduceArgs(benchmark::internal::Benchmark* b) {
  for (std::int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) {
    for (int isa = 0; isa <= kDispatched; ++isa) b->Args({bytes, isa});
  }
}

BENCHMARK(BM_ReduceFloat32)->Apply(reduceArgs);
BENCHMARK(BM_ReduceFloat16)->Apply(reduceArgs);
BENCHMARK(BM_ReduceBFloat16)->Apply(reduceArgs);
BENCHMARK(BM_ReduceInt32)->Apply(reduceArgs);
BENCHMARK(BM_Memcpy)->RangeMultiplier(4)->Range(kMinBytes, kMaxBytes);

}  // namespace

BENCHMARK_MAIN();
