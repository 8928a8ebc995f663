// Phases (node 0 only; barriers on node 0's communicator between them):
//   1. alone: local rank 0 copies 64 MiB into another 64 MiB (a working set
//      four times a typical last-level cache), the others sleep: copyGBps.
//   2. sweep: every local rank copies half of a working set of 256 KiB ..
//      128 MiB into the other half at once; the node's summed rate per size
//      shows the caches, and the largest size is nodeCopyGBps (streaming).
//   3. fresh pages: local rank 0 alone maps 32 MiB, writes it, unmaps it
//      (glibc's mmap threshold is at most 32 MiB, so a backend that mallocs a
//      temporary of that size per call pays exactly this each time).
// Buffers are allocated and written once before phase 1, so phases 1-2 never
// page-fault. Each figure is the median of its repetitions.
#include "topology/memory_probe.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "topology/probe.h"

namespace boostcomm::topology {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kColdBytes = 64 * kMiB;            // per copy in phase 1
constexpr std::size_t kSweepMinBytes = 256 * 1024;       // per-rank working set
constexpr std::size_t kSweepMaxBytes = 128 * kMiB;
constexpr std::size_t kBytesPerPoint = 256 * kMiB;       // copied per sweep point and rank
constexpr std::size_t kFreshBytes = 32 * kMiB;
// One buffer per rank serves the sweep and phase 1's two halves.
static_assert(kSweepMaxBytes >= 2 * kColdBytes);
constexpr int kReps = 9;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// memcpy whose result the compiler must assume is used.
void copy(void* dst, const void* src, std::size_t bytes) {
  std::memcpy(dst, src, bytes);
  asm volatile("" : : "r"(dst) : "memory");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void barrier(transport::Transport& t) {
  transport::Request req;
  t.nativeBarrier(&req);
  waitQuietly(t, req);
}

// GB/s of copying `half` bytes from src to dst, median of kReps timings of
// `inner` copies each.
double copyRate(char* dst, const char* src, std::size_t half, int inner) {
  std::vector<double> rates;
  copy(dst, src, half);  // warm-up
  for (int r = 0; r < kReps; ++r) {
    const double t0 = seconds();
    for (int i = 0; i < inner; ++i) copy(dst, src, half);
    rates.push_back(static_cast<double>(half) * inner / (seconds() - t0) / 1e9);
  }
  return median(rates);
}

double freshPageRate() {
  std::vector<double> rates;
  for (int r = 0; r < kReps; ++r) {
    const double t0 = seconds();
    void* p = mmap(nullptr, kFreshBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    // Not thrown: the other ranks wait in the broadcast; 0 reads "not measured".
    if (p == MAP_FAILED) return 0.0;
    std::memset(p, 0x5a, kFreshBytes);
    asm volatile("" : : "r"(p) : "memory");
    munmap(p, kFreshBytes);
    rates.push_back(static_cast<double>(kFreshBytes) / (seconds() - t0) / 1e9);
  }
  return median(rates);
}

}  // namespace

MemoryModel probeMemory(transport::Transport& world, const Topology& topo) {
  const std::vector<int> node0 = topo.ranksOf(0);
  const bool measuring = std::find(node0.begin(), node0.end(), world.rank()) != node0.end();
  const std::unique_ptr<transport::Transport> local = world.split(measuring ? 0 : 1, world.rank());
  std::vector<std::size_t> sizes;
  for (std::size_t ws = kSweepMinBytes; ws <= kSweepMaxBytes; ws *= 2) sizes.push_back(ws);
  // [copy alone, first touch, rate of each sweep size]
  std::vector<double> result(2 + sizes.size(), 0.0);
  if (measuring) {
    const bool leader = local->rank() == 0;
    std::unique_ptr<char[]> buffer(new char[kSweepMaxBytes]);
    std::memset(buffer.get(), 1, kSweepMaxBytes);
    barrier(*local);
    if (leader) result[0] = copyRate(buffer.get() + kColdBytes, buffer.get(), kColdBytes, 1);
    barrier(*local);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t half = sizes[i] / 2;
      const int inner = static_cast<int>(std::max<std::size_t>(1, kBytesPerPoint / kReps / half));
      barrier(*local);
      double rate = copyRate(buffer.get() + half, buffer.get(), half, inner);
      transport::Request req;
      local->nativeAllreduce(&rate, &result[2 + i], 1, DataType::kFloat64, ReduceOp::kSum, &req);
      waitQuietly(*local, req);
    }
    buffer.reset();
    barrier(*local);
    if (leader) result[1] = freshPageRate();
  }
  transport::Request req;
  world.nativeBroadcast(result.data(), result.size(), DataType::kFloat64, node0.front(), &req);
  waitQuietly(world, req);

  MemoryModel m;
  m.measured = true;
  m.copyGBps = result[0];
  m.firstTouchGBps = result[1];
  const auto perNode = static_cast<std::size_t>(node0.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) m.sweep.push_back({sizes[i] * perNode, result[2 + i]});
  m.nodeCopyGBps = m.sweep.back().copyGBps;
  return m;
}

}  // namespace boostcomm::topology
