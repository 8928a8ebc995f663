// One collective call as the API layer sees it, and its validation.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/spec.h"
#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"
#include "core/call_status.h"
#include "core/segment_list.h"

namespace boostcomm::detail {

struct CallArgs {
  Collective collective = Collective::kAllreduce;
  ConstView send;
  View recv;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::span<const std::size_t> recvCounts;  // allgatherv only
  bool varying = false;                     // allgatherv
  // Segment-list call (communicator_many.cc): the send buffer is sendList
  // and the recv buffer recvList (one list for allreduce and broadcast, in
  // place); send/recv above only carry their total counts and dtype. Both
  // set or neither.
  const core::SegmentList* sendList = nullptr;
  const core::SegmentList* recvList = nullptr;
  bool listed() const { return recvList != nullptr; }
};

// Checks every argument of `args` on this rank and fills `spec` (minus the
// tunable knobs). Throws Error{kInvalidArgument} naming the collective, the
// argument and the rank. `spec.counts` is reused to avoid reallocation.
// Returns spec.payloadBytes(), which the checks compute on the way.
std::size_t validateAndDescribe(const CallArgs& args, int rank, int size, algorithms::CollectiveSpec& spec);

// What every rank must agree on about a validated call: its fingerprint,
// with an allgather's total count (allgatherv ranks legitimately send
// different counts).
core::Fingerprint fingerprintOf(const algorithms::CollectiveSpec& spec);

}  // namespace boostcomm::detail
