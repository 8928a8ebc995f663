// Failure counting for MPI test programs with their own main: each rank
// counts and prints its failures, sections turn an escaped exception into a
// failure, and finish() sums over ranks, prints one verdict on rank 0,
// finalises and returns the exit code (non-zero when any rank failed).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"

namespace boostcomm::testing {

class MpiReport {
 public:
  explicit MpiReport(Communicator& comm) : comm_(comm) {}

  void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "rank %d: %s\n", comm_.rank(), what.c_str());
  }

  // Runs one section; rank 0 prints its wall time (where a slow suite spends it).
  template <typename Fn>
  void section(const char* name, Fn&& fn) {
    const double start = MPI_Wtime();
    try {
      fn(comm_);
    } catch (const std::exception& e) {
      fail(std::string(name) + ": threw " + e.what());
    }
    if (comm_.rank() == 0) std::printf("section %s: %.1f s\n", name, MPI_Wtime() - start);
  }

  int finish() {
    int total = 0;
    MPI_Allreduce(&failures_, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (comm_.rank() == 0)
      std::printf("%s: %d failure(s) across %d ranks\n", total ? "FAILED" : "PASSED", total, comm_.size());
    comm_.finalize();
    return total == 0 ? 0 : 1;
  }

 private:
  Communicator& comm_;
  int failures_ = 0;
};

// Runs `call`, a collective that ranks make differently: it must raise
// Error{kMismatch} whose words contain every one of `words`; anything else
// is a failure named `name`. Then finalizes `comm` (a mismatch leaves it
// unusable; its finalize may report the failure again).
inline void expectMismatch(MpiReport& report, Communicator& comm, const std::string& name,
                           const std::function<void()>& call, const std::vector<std::string>& words) {
  try {
    call();
    report.fail(name + " mismatch: no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    const bool named = std::all_of(words.begin(), words.end(),
                                   [&](const std::string& w) { return what.find(w) != std::string::npos; });
    if (e.category() != ErrorCategory::kMismatch || !named) report.fail(name + " mismatch: unexpected error: " + what);
  }
  try {
    comm.finalize();
  } catch (const Error&) {
    // finalize of a failed communicator may report the failure again
  }
}

// The main of a test of the shared-memory engine's paths: MPI initialised
// here (finalizing a communicator does not end it), `sections` run on a
// world communicator with a report, or SKIPPED where the engine is off
// (BOOSTCOMM_SHM=0). Returns the exit code.
inline int runShmTest(int argc, char** argv, const std::function<void(MpiReport&, Communicator&)>& sections) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  {
    auto comm = Communicator::createMpiWorld();
    const std::vector<std::string> algos = comm->algorithms(Collective::kAllreduce);
    if (std::find(algos.begin(), algos.end(), "shm") == algos.end()) {
      if (comm->rank() == 0) std::printf("SKIPPED: no shared-memory engine (BOOSTCOMM_SHM=0?)\n");
      comm->finalize();
    } else {
      MpiReport report(*comm);
      sections(report, *comm);
      rc = report.finish();
    }
  }
  MPI_Finalize();
  return rc;
}

}  // namespace boostcomm::testing
