// The blocking hot path performs no heap allocation after warm-up.
//
// Replaces global operator new for this process (the shared library's calls
// resolve to it too) and counts allocations made while repeating collectives
// whose schedules and scratch were built by a first call. Open MPI's own
// internal malloc calls are not counted: this checks boostcomm's code only.
// Run under mpirun; exits non-zero on any rank's failure.
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"

namespace {
std::atomic<long> gAllocations{0};
std::atomic<bool> gCounting{false};
}  // namespace

void* operator new(std::size_t bytes) {
  if (gCounting.load(std::memory_order_relaxed)) gAllocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

int main() {
  using namespace boostcomm;
  auto comm = Communicator::createMpiWorld();
  const int n = comm->size();
  int failures = 0;
  std::vector<float> in(1 << 18, 1.0f);
  std::vector<float> out(in.size());
  std::vector<float> gathered(in.size() * static_cast<std::size_t>(n));
  for (std::string algo : {"native", "ring", "rhd", "rd"}) {
    CallOptions options;
    options.algorithm = algo;
    auto once = [&] {
      comm->allreduce(std::span<const float>(in), std::span<float>(out), ReduceOp::kSum, options);
    };
    // Cold call: builds and caches the schedule, leases scratch. It must be
    // seen allocating, which proves the counter sees the library's calls.
    gAllocations = 0;
    gCounting = true;
    once();
    gCounting = false;
    // (A blocking native call goes straight to the backend: nothing to build.)
    if (algo != "native" && gAllocations.load() == 0) {
      std::fprintf(stderr, "rank %d: allocation counter saw nothing in the cold %s call\n", comm->rank(),
                   algo.c_str());
      ++failures;
    }
    gAllocations = 0;
    gCounting = true;
    for (int i = 0; i < 20; ++i) once();
    gCounting = false;
    const long allocations = gAllocations.load();
    if (allocations != 0 || out[12345] != static_cast<float>(n)) {
      std::fprintf(stderr, "rank %d: allreduce/%s made %ld allocations in 20 calls (result %g)\n", comm->rank(),
                   algo.c_str(), allocations, out[12345]);
      ++failures;
    }
  }
  {
    CallOptions options;
    options.algorithm = "ring";
    comm->allgather(std::span<const float>(in), std::span<float>(gathered), options);
    gAllocations = 0;
    gCounting = true;
    for (int i = 0; i < 10; ++i) comm->allgather(std::span<const float>(in), std::span<float>(gathered), options);
    gCounting = false;
    if (gAllocations.load() != 0) {
      std::fprintf(stderr, "rank %d: allgather/ring made %ld allocations\n", comm->rank(), gAllocations.load());
      ++failures;
    }
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (comm->rank() == 0) std::printf("%s: %d failure(s) across %d ranks\n", total ? "FAILED" : "PASSED", total, n);
  comm->finalize();
  return total == 0 ? 0 : 1;
}
