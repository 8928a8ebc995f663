// SharedMemoryEngine: collectives through memory every rank of a node maps.
//
// A transport whose ranks all share one node may offer an engine
// (Transport::sharedMemory()); the "shm" algorithms run through it. The
// engine is a progress-style state machine, like the transport's requests:
// start() queues a collective and test() advances every queued collective as
// far as it can without waiting, then reports whether this one is done. It
// never blocks, so the executor can keep other schedules moving meanwhile.
//
// Collectives run in the order they were started; every rank must start the
// same collectives in the same order (the MPI rule), which holds because all
// ranks run the same schedules.
//
// Registered buffers: allocate() returns memory inside the shared segment.
// A collective whose send (and recv) buffer lies in registered memory reads
// (and writes) it in place: peers access it directly, skipping the copy-in
// (and copy-out). allocate() and release() are collective: every rank calls
// them in the same order with the same size (the caller checks the sizes).
#pragma once

#include <cstddef>

#include "boostcomm/types.h"
#include "core/call_status.h"
#include "transport/transport.h"

namespace boostcomm::transport {

struct SharedMemoryCall {
  Collective collective = Collective::kAllreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  // allreduce / broadcast: elements of the vector; allgather: elements this
  // rank sends; reduce_scatter: elements each rank receives.
  std::size_t count = 0;
  // allgatherv: per-rank counts and displacements (elements, size() entries);
  // null for equal counts. Must stay valid until the call completes.
  const int* counts = nullptr;
  const int* displs = nullptr;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // kAvg is finished by the engine (divided once)
  int avgDivisor = 0;            // kAvg divisor; 0 means the number of ranks
  int root = 0;
  // Segment lists (core/segment_list.h), send/recv unused where set. The
  // engine copies in from the segments and out to them directly: the copies
  // it makes anyway, so a list costs no staging copy.
  //   allreduce: send and recv are both list[listOffsetBytes, + count elements) (in place);
  //   broadcast: the buffer is list[listOffsetBytes, + count elements);
  //   allgather: recv is list[listOffsetBytes, ...) (blocks at their displacements)
  //              and send is sendList[sendListOffsetBytes, + count elements).
  const core::SegmentList* list = nullptr;
  std::size_t listOffsetBytes = 0;
  const core::SegmentList* sendList = nullptr;
  std::size_t sendListOffsetBytes = 0;
};

class SharedMemoryEngine {
 public:
  virtual ~SharedMemoryEngine() = default;

  // Queues `call` and starts it if nothing is ahead of it; req becomes active.
  virtual void start(const SharedMemoryCall& call, Request& req) = 0;
  // Advances every queued call; true (and req inactive) once req's call is done.
  virtual bool test(Request& req) = 0;

  // Collective: `bytes` of shared memory for this rank, 64-byte aligned,
  // zero-filled. Callers verify that every rank asks for the same size first.
  virtual void* allocate(std::size_t bytes) = 0;
  // Collective: releases memory from allocate(); no collective may be using it.
  virtual void release(void* buffer) = 0;
  // True when [data, data + bytes) lies inside one registered allocation.
  virtual bool isRegistered(const void* data, std::size_t bytes) const = 0;
  // Rank's call status in memory every rank of the node reads (null: none):
  // the communicator that owns this engine records its calls there.
  virtual core::CallStatus* callStatus(int /*rank*/) { return nullptr; }
};

}  // namespace boostcomm::transport
