// Failure counting for MPI test programs with their own main: each rank
// counts and prints its failures, sections turn an escaped exception into a
// failure, and finish() sums over ranks, prints one verdict on rank 0,
// finalises and returns the exit code (non-zero when any rank failed).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "boostcomm/communicator.h"

namespace boostcomm::testing {

class MpiReport {
 public:
  explicit MpiReport(Communicator& comm) : comm_(comm) {}

  void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "rank %d: %s\n", comm_.rank(), what.c_str());
  }

  template <typename Fn>
  void section(const char* name, Fn&& fn) {
    try {
      fn(comm_);
    } catch (const std::exception& e) {
      fail(std::string(name) + ": threw " + e.what());
    }
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

}  // namespace boostcomm::testing
