// One allgatherMany / reduceScatterMany case on one rank, checked against
// its reference: the shared body of the in-process (tests/unit) and MPI
// (tests/mpi) tests of segment-list allgather and reduce_scatter.
//
// Each tensor is a separate allocation with a guard byte after it.
// allgather: output tensor i, block r, must equal rank r's input bytes
// (fillBytes: any bit pattern). reduce_scatter: output tensor i must equal
// block `rank` of the float64 reference of the inputs' reduction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::testing {

struct SplitCase {
  std::vector<std::size_t> counts;  // per tensor: the per-rank part's elements
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;     // reduce_scatter only
  std::string algorithm;            // "" = the selection
  std::uint64_t seed = 1;
  bool async = false;
  // The *PerRank form: the same tensors, passed as their size x n blocks
  // (rank-major views into the whole tensors), as torch's per-rank lists are.
  bool perRank = false;
};

std::string describe(const SplitCase& c, const char* collective);

// "" or what went wrong (an exception's text included), and the bytes of
// this rank's outputs (for cross-rank comparison) in `outputBytes`.
std::string runAllgatherMany(Communicator& comm, const SplitCase& c, std::vector<unsigned char>* outputBytes = nullptr);
std::string runReduceScatterMany(Communicator& comm, const SplitCase& c);

}  // namespace boostcomm::testing
