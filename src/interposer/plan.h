// One intercepted collective as a boostcomm call: the views it runs on, the
// staging it needs, and what is left to do once it completed (unpacking into
// a derived datatype, placing allgatherv blocks at their displacements).
// Shared by the blocking calls (one reused Plan per thread) and the
// nonblocking ones (one Plan per request, alive until it completes).
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstddef>
#include <vector>

#include "boostcomm/communicator.h"
#include "interposer/stats.h"

namespace boostcomm::interposer {

struct CommEntry;
struct Plan;
// The size rules once a plan is made (`planned` == kRouted): below
// BOOSTCOMM_MPI_MIN_BYTES it is kSmall; where boostcomm's selection sends the
// call to MPI's own algorithm, kNative.
Reason sizeRules(Reason planned, const CommEntry& entry, const Plan& plan);

struct Plan {
  Collective collective = Collective::kBarrier;
  ConstView send;
  View recv;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  bool varying = false;              // allgatherv
  std::vector<std::size_t> counts;   // allgatherv: bytes per rank
  std::vector<unsigned char> stage;  // packed or staged bytes
  std::vector<unsigned char> input;  // reduce_scatter in place: a copy of the input

  // After completion: unpack `stage` into out (kUnpack), or copy / unpack each
  // rank's block of `stage` to out + displs[i] * extent (kBlocks).
  enum class Finish : unsigned char { kNone, kUnpack, kBlocks } finish = Finish::kNone;
  void* out = nullptr;
  int outCount = 0;
  MPI_Datatype outType = MPI_DATATYPE_NULL;
  bool outDirect = false;
  std::ptrdiff_t outExtent = 0;
  std::vector<int> outCounts, outDispls;
  MPI_Comm comm = MPI_COMM_NULL;

  // Reason::kRouted when the call can run; else why it goes to PMPI.
  Reason allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op);
  Reason bcast(void* buf, int count, MPI_Datatype type, int root, const CommEntry& entry);
  Reason allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, const CommEntry& entry);
  Reason allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                    const int* displs, MPI_Datatype recvtype, const CommEntry& entry);
  Reason reduceScatterBlock(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                            const CommEntry& entry);
  Reason reduceScatter(const void* sendbuf, void* recvbuf, const int* recvcounts, MPI_Datatype type, MPI_Op op,
                       const CommEntry& entry);
  Reason barrier();
  // A data-movement call of zero bytes: nothing staged or packed (sizeRules sends it to MPI).
  Reason empty();

  // The payload the BOOSTCOMM_MPI_MIN_BYTES threshold compares (the same on every rank).
  std::size_t payloadBytes() const;
  void run(Communicator& comm) const;
  Work submit(Communicator& comm) const;
  void complete();  // the Finish step, after run() / when the Work completed
};

}  // namespace boostcomm::interposer
