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
#include <cstdint>
#include <functional>
#include <memory>

#include "boostcomm/types.h"
#include "core/call_status.h"
#include "core/doorbell.h"
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

// A collective small enough for SharedMemoryEngine::smallCollective: the
// caller's blocking call, run while no other collective is in flight here.
// What each rank puts in its slot (at most smallAllreduceBytes()):
//   allreduce: send (count elements); allgather: send (count elements, this
//   rank's block, equal counts); reduce_scatter: send (size() x count
//   elements); broadcast: the root's recv (count elements), the others none.
struct SmallCall {
  Collective collective = Collective::kAllreduce;
  const void* send = nullptr;  // may equal recv (in place); unused by broadcast
  void* recv = nullptr;        // allgather: size() x count elements
  std::size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // not kAvg
  int root = 0;                  // broadcast
  // The owning communicator's call number, equal on every rank, and the
  // call's fingerprint: written beside the data and compared by every rank
  // that reads the slot.
  std::uint64_t sequence = 0;
  core::Fingerprint fingerprint;
  bool compare = true;  // false: the fingerprint is not compared (BOOSTCOMM_FINGERPRINTS=0)
  // Elements this rank writes into its slot (0 for a broadcast receiver).
  std::size_t slotCount(int rank, int size) const {
    if (collective == Collective::kReduceScatter) return count * static_cast<std::size_t>(size);
    if (collective == Collective::kBroadcast && rank != root) return 0;
    return count;
  }
};

class SharedMemoryEngine {
 public:
  // Largest slot payload smallCollective takes (SmallCall::slotCount bytes).
  virtual std::size_t smallAllreduceBytes() const = 0;
  // Largest payload it takes by default (BOOSTCOMM_SHM_SMALL_BYTES=-1): where
  // it beats the engine's chunked path and the backend (shm/engine.h).
  virtual std::size_t smallAllreduceAutoBytes() const = 0;
  // Runs `call` to completion: the ranks that have input write it and the
  // fingerprint into their slot; every rank reads the slots it needs (all,
  // or a broadcast's root) and combines them in rank order (every rank ends
  // with the same bits). Returns -1, or the first rank whose fingerprint
  // differs from this rank's (its fingerprint in `theirs`; the result is
  // then not written). `poll` runs every few thousand polls while waiting
  // and ends the wait by throwing (deadline, abort, a peer gone). A
  // broadcast root reads nobody's slot: its caller checks its receivers'
  // fingerprints later (CommunicatorImpl's pending root check).
  virtual int smallCollective(const SmallCall& call, core::Fingerprint& theirs, const std::function<void()>& poll) = 0;

  virtual ~SharedMemoryEngine() = default;

  // Queues `call` and starts it if nothing is ahead of it; req becomes active.
  virtual void start(const SharedMemoryCall& call, Request& req) = 0;
  // Advances every queued call; true (and req inactive) once req's call is done.
  virtual bool test(Request& req) = 0;
  // Grows whenever a test moved any queued call along (a chunk copied or
  // reduced): a wait that saw it grow is not idle, even before req is done.
  virtual std::uint64_t advances() const { return 0; }

  // Collective: `bytes` of shared memory for this rank, 64-byte aligned,
  // zero-filled. Callers verify that every rank asks for the same size first.
  virtual void* allocate(std::size_t bytes) = 0;
  // Collective, like allocate(): registered memory owned by what it returns
  // (and its copies), not by the engine. It stays mapped while either holds
  // it, so it outlives the engine when its holder does; once the holder lets
  // go, this rank's pages are given back at once and the mapping goes with
  // the engine. release() refuses it.
  virtual std::shared_ptr<void> allocateOwned(std::size_t bytes) = 0;
  // Collective: releases memory from allocate(); no collective may be using it.
  virtual void release(void* buffer) = 0;
  // True when [data, data + bytes) lies inside one registered allocation.
  virtual bool isRegistered(const void* data, std::size_t bytes) const = 0;
  // Rank's call status in memory every rank of the node reads (null: none):
  // the communicator that owns this engine records its calls there.
  virtual core::CallStatus* callStatus(int /*rank*/) { return nullptr; }
  // This rank's doorbell (core/doorbell.h), or null: every peer rings it
  // after its test() moved a collective along, so a thread waiting on them
  // may sleep on it instead of polling test().
  virtual core::Doorbell* doorbell() { return nullptr; }
};

}  // namespace boostcomm::transport
