// What a builder receives: one collective call, seen from one rank.
#pragma once

#include <cstddef>
#include <vector>

#include "boostcomm/types.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

using StepId = executor::Schedule::StepId;

struct CollectiveSpec {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  // allreduce / broadcast: elements of the whole vector;
  // allgather: elements each rank sends (ignored when `counts` is set);
  // reduce_scatter: elements each rank receives.
  std::size_t count = 0;
  // allgatherv: elements contributed by each rank (size entries); empty = equal counts.
  std::vector<std::size_t> counts;
  int root = 0;
  int rank = 0;
  int size = 1;
  // kAvg divides by this many contributions; 0 means `size`. Composed
  // algorithms set it to the world size for a phase on a sub-communicator.
  int avgDivisor = 0;
  // Node layout of the world communicator (null when unknown); hierarchical
  // algorithms need one with several nodes.
  const struct NodeLayout* layout = nullptr;
  // The transport has a shared-memory engine (all ranks on one node): the
  // "shm" algorithms can run.
  bool sharedMemory = false;
  // The intra-node communicator of hierarchical algorithms has a shared-memory engine.
  bool intraSharedMemory = false;
  // Inter-node phase of hierarchical allreduce ("ring", "rhd" or "native").
  const char* interAlgorithm = "ring";
  // Wire format of float32 payloads on the links this call compresses
  // (core/wire.h): resolved by the caller (never kAuto), kOff unless dtype
  // is float32. Hierarchical algorithms apply it to their inter-node phase;
  // flat ring and rhd to all their messages; other builders ignore it (the
  // caller only sets it for builders that take it: AlgorithmInfo::carriesWire).
  WireFormat wire = WireFormat::kOff;
  // Pipelining knobs, resolved from tunables by the caller.
  std::size_t chunkBytes = std::size_t{1} << 20;
  int maxChunks = 64;
  // Hierarchical algorithms: most pipeline pieces (BOOSTCOMM_HIER_MAX_PIECES).
  int hierMaxPieces = 4;
  // Tags the schedule may use: every step tag lies in [0, tagSpan). The
  // communicator cuts the transport's tag range into windows of this many
  // tags (at most executor::kMaxStepTag); a composed algorithm hands each
  // phase its share.
  int tagSpan = executor::kMaxStepTag;

  std::size_t elementSize() const { return dataTypeSize(dtype); }
  int divisor() const { return avgDivisor > 0 ? avgDivisor : size; }
  // Payload in bytes, nccl-tests convention (allgather / reduce_scatter: whole array).
  std::size_t payloadBytes() const;
};

// A contiguous range of elements: offset and length.
struct Range {
  std::size_t offset = 0;
  std::size_t count = 0;
};

// Splits `total` elements into `parts` contiguous ranges, sizes differing by at most one.
Range evenPart(std::size_t total, int parts, int index);

// Block layout of the gathered vector: block i holds rank i's contribution
// (allgather/allgatherv) or the part rank i receives (reduce_scatter).
std::vector<Range> blockLayout(const CollectiveSpec& spec);

// Number of pipelining chunks for segments of at most `segmentBytes`, keeping
// every tag of `tagsPerChunk` chunk-steps below spec.tagSpan.
int chunksFor(const CollectiveSpec& spec, std::size_t segmentBytes, int tagsPerChunk);

inline executor::BufRef at(executor::BufferId buf, std::size_t elementOffset, std::size_t elementSize) {
  return executor::BufRef{buf, elementOffset * elementSize};
}

bool isPowerOfTwo(int n);
int largestPowerOfTwoAtMost(int n);

}  // namespace boostcomm::algorithms
