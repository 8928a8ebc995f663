// The progress thread needs MPI_THREAD_MULTIPLE. An application that
// initialised MPI with less (here MPI_THREAD_SERIALIZED) gets a clear error
// from an explicit setProgressThread(true), and clients that merely want
// background progress (useProgressThread: the OverlapEngine, the c10d
// backend's fallback) stay caller-driven and still give correct results.
// Own main; exits non-zero on failure.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/overlap.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  };
  {
    using namespace boostcomm;
    auto comm = Communicator::createMpiWorld();
    if (provided >= MPI_THREAD_MULTIPLE) {
      std::printf("MPI gave MPI_THREAD_MULTIPLE although less was asked: nothing to check\n");
    } else {
      try {
        comm->setProgressThread(true);
        fail("setProgressThread(true) under MPI_THREAD_SERIALIZED did not throw");
      } catch (const Error& e) {
        if (e.category() != ErrorCategory::kInvalidArgument ||
            std::string(e.what()).find("MPI_THREAD_MULTIPLE") == std::string::npos)
          fail(std::string("unexpected error: ") + e.what());
      }
      comm->useProgressThread();
      if (comm->progressThread()) fail("useProgressThread started a thread under MPI_THREAD_SERIALIZED");
    }
    // An overlap step, caller-driven, is still exact.
    std::vector<float> a(1000, static_cast<float>(comm->rank() + 1)), b(7, 1.0f);
    OverlapOptions options;
    options.average = false;
    OverlapEngine engine(*comm, {{"a", View(std::span<float>(a))}, {"b", View(std::span<float>(b))}}, options);
    engine.markReady(1);
    engine.markReady(0);
    engine.finishBackward();
    const int n = comm->size();
    if (a.front() != static_cast<float>(n * (n + 1) / 2) || b.back() != static_cast<float>(n))
      fail("overlap step result wrong");
    comm->finalize();
  }
  MPI_Finalize();
  if (failures == 0) std::printf("thread level checks passed\n");
  return failures == 0 ? 0 : 1;
}
