// The raw-MPI baseline of `boostcomm bench`: the plain MPI collective on
// MPI_COMM_WORLD, what a program without boostcomm would call.
//
// float16/bfloat16 have no MPI datatype in MPI 3.1, so they travel as 16-bit
// integers and reduce through an MPI_Op_create'd user op running the same
// float32-widening arithmetic as boostcomm (core::reduce). avg has no MPI op:
// the baseline is MPI_SUM followed by a local divide, included in the time.
#pragma once

#include <cstddef>
#include <memory>

#include "boostcomm/types.h"

namespace boostcomm::tools {

class MpiBaseline {
 public:
  MpiBaseline(DataType dtype, ReduceOp op);
  ~MpiBaseline();
  MpiBaseline(const MpiBaseline&) = delete;
  MpiBaseline& operator=(const MpiBaseline&) = delete;

  // Same buffer conventions as Communicator (count is per rank for allgather
  // and reduce_scatter). Counts must fit in int (checked by the caller).
  void allreduce(const void* send, void* recv, std::size_t count);
  void allgather(const void* send, void* recv, std::size_t countPerRank);
  void broadcast(void* buffer, std::size_t count, int root);
  void reduceScatter(const void* send, void* recv, std::size_t countPerRank);

 private:
  void finishAvg(void* recv, std::size_t count);

  struct Handles;  // MPI_Datatype + MPI_Op, kept out of this header
  DataType dtype_;
  ReduceOp op_;
  int ranks_ = 1;
  std::unique_ptr<Handles> handles_;
  bool ownsOp_ = false;
};

}  // namespace boostcomm::tools
