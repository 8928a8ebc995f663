// core_latency: the one-way time of a cache line between two CPUs, in
// windows over time. On the project's VMs it flips between two modes
// (~27 ns and ~160 ns, in episodes of seconds): the host moves the two vCPUs
// between cores that share a last-level cache and cores that do not. Every
// cross-core path (the shared-memory engine, MPI's vader, flag handshakes)
// slows with it, so a benchmark's rows are comparable only within one mode;
// run this beside a measurement to see which mode it met
// (docs/PERFORMANCE.md, "Method").
//
//   core_latency [SECONDS [CPU_A CPU_B]]     default: 10 s, CPUs 0 and 1
//
// Prints one figure per 0.5 s window (ns, one way), then the median, the
// fastest window, and the share of windows slower than twice the fastest.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

alignas(64) std::atomic<long> line{0};  // odd: the ping is the peer's to answer; -1: stop

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

void answer(int cpu) {
  if (!pin(cpu)) std::fprintf(stderr, "core_latency: cannot pin to CPU %d; running unpinned\n", cpu);
  for (;;) {
    long v = line.load(std::memory_order_acquire);
    if (v < 0) return;
    if (v & 1) line.store(v + 1, std::memory_order_release);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const int cpuA = argc > 3 ? std::atoi(argv[2]) : 0;
  const int cpuB = argc > 3 ? std::atoi(argv[3]) : 1;
  if (argc == 3 || argc > 4 || !(seconds >= 0.5) || cpuA < 0 || cpuB < 0 || cpuA == cpuB) {
    std::fprintf(stderr, "usage: core_latency [SECONDS [CPU_A CPU_B]] (two different CPUs, SECONDS >= 0.5)\n");
    return 2;
  }
  std::thread peer(answer, cpuB);
  if (!pin(cpuA)) std::fprintf(stderr, "core_latency: cannot pin to CPU %d; running unpinned\n", cpuA);
  std::vector<double> windows;
  long v = 0;
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    const auto start = Clock::now();
    const auto stop = start + std::chrono::milliseconds(500);
    long trips = 0;
    while (Clock::now() < stop) {
      for (int i = 0; i < 1000; ++i) {
        line.store(++v, std::memory_order_release);  // odd: the peer answers with v + 1
        while (line.load(std::memory_order_acquire) == v) {
        }
        ++v;
      }
      trips += 1000;
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / (2.0 * trips);
    windows.push_back(ns);
    std::printf("%.0f ", ns);
    std::fflush(stdout);
  }
  line.store(-1, std::memory_order_release);
  peer.join();
  std::vector<double> sorted = windows;
  std::sort(sorted.begin(), sorted.end());
  const double fastest = sorted.front();
  const auto slow = std::count_if(windows.begin(), windows.end(), [&](double w) { return w > 2 * fastest; });
  std::printf("\ncore_latency: CPUs %d-%d, %zu windows: median %.0f ns one way, fastest %.0f ns, "
              "%ld of %zu windows slower than twice the fastest\n",
              cpuA, cpuB, windows.size(), sorted[sorted.size() / 2], fastest, static_cast<long>(slow), windows.size());
  return 0;
}
