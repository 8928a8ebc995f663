// A rank's program for the simulator: the steps of its Schedules, flattened.
//
// The simulator runs exactly the Schedules the library runs (built by the same
// registry builders, for every rank), so it can only differ from a real run in
// timing, never in which messages move. This file turns one rank's Schedules
// into Ops the event loop can run without the Schedule machinery:
//   - peers become world ranks (intra/inter communicators resolved through the
//     cluster's consecutive layout: rank = node * ranksPerNode + localRank);
//   - dependencies become successor lists with a count of unfinished
//     predecessors, so starting an op never scans the schedule (O(1) per op);
//   - messages get a matching *channel* (job, communicator, native expansion,
//     tag): sends and receives on one (source, destination, channel) match in
//     post order, MPI's non-overtaking rule;
//   - kNative / kShm steps (the backend's own collective) are replaced by the
//     schedule of the algorithm that backend is modelled as (nativeModelOf):
//     MPI libraries run the same textbook algorithms, and expanding them lets
//     their messages share links with everything else in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "algorithms/native_model.h"
#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::simulate {

// kJoin: no work; done when its predecessors are (see RankProgram::joinOf).
// kTouch: first writes to `bytes` of freshly allocated memory (the backend's
// per-call temporary; see nativeTemporaryBytes).
enum class OpKind : std::uint8_t { kSend, kRecv, kReduce, kCopy, kDivide, kJoin, kTouch };

struct Op {
  OpKind kind = OpKind::kCopy;
  executor::BufferId dstBuf = executor::BufferId::kRecv;
  executor::BufferId srcBuf = executor::BufferId::kSend;
  executor::BufferId src2Buf = executor::BufferId::kSend;
  std::uint32_t job = 0;
  int peer = -1;              // world rank (send / recv)
  int divisor = 1;
  std::uint32_t matched = 0;  // recv, at run time: the send op (on rank `peer`) it matched
  std::uint64_t channel = 0;
  std::size_t bytes = 0;  // send / recv / copy; reduce / divide: elements x element size
  std::size_t dstOff = 0, srcOff = 0, src2Off = 0;
  std::uint32_t succBegin = 0, succCount = 0;
};

// Where a rank sits in the cluster.
struct RankPlace {
  int rank = 0;
  int node = 0;
  int localRank = 0;
  int nodes = 1;
  int perNode = 1;
  int worldPeer(std::uint8_t comm, int peer) const;
  int commRank(std::uint8_t comm) const;
  int commSize(std::uint8_t comm) const;
};

// The algorithm a backend collective is modelled as: algorithms::nativeModelOf
// (algorithms/native_model.h), Open MPI 4.1's fixed decision rules simplified.
// Bytes of fresh memory the backend's own collective writes per call: the
// allreduce temporary from core::kFreshAllocationBytes (core/backend_facts.h).
std::size_t nativeTemporaryBytes(Collective collective, std::size_t bytes);
using algorithms::nativeModelOf;

class RankProgram {
 public:
  std::vector<Op> ops;
  std::vector<std::uint32_t> succ;             // successor lists (CSR, see Op::succBegin)
  // Per op: unfinished predecessors, counted down at run time. Kept apart
  // from the ops: the event loop's hottest access (4 bytes, not a whole Op,
  // per dependency edge; at 1024 ranks the ops do not fit in any cache).
  std::vector<std::uint32_t> pending;
  std::vector<std::size_t> scratchBytesOfJob;    // per job
  std::vector<std::size_t> temporaryBytesOfJob;  // per job: the backend's fresh temporaries (kTouch ops)
  std::vector<std::uint32_t> opsOfJob;         // per job

  // Appends one job's schedule (already built for this rank). `spec` is the
  // request it was built from (native expansion builds sub-requests from it).
  void appendJob(const executor::Schedule& schedule, const algorithms::CollectiveSpec& spec, const RankPlace& place);
  // Builds the successor lists; call once after the last appendJob.
  void finish();

 private:
  struct Placement;
  // The ops of `schedule` placed by `p`; returns its sinks (what its dependants wait for).
  std::vector<std::uint32_t> append(const executor::Schedule& schedule, const Placement& p);
  // A native or shm step expanded into the modelled algorithm's schedule (plus
  // the backend's temporary, faulted in); returns the expansion's sinks.
  std::vector<std::uint32_t> appendNative(const executor::Step& s, std::size_t es, const Placement& p,
                                          std::uint8_t comm, const std::vector<std::uint32_t>& preds);
  // The op of any other step.
  Op opOf(const executor::Step& s, std::size_t es, const Placement& p, std::uint8_t comm) const;
  // Replaces a large predecessor set by one join op that waits for it.
  void joinLarge(std::vector<std::uint32_t>& preds, std::uint32_t job);
  std::uint32_t addOp(const Op& op, const std::vector<std::uint32_t>& preds);

  std::map<std::vector<std::uint32_t>, std::uint32_t> joins_;  // predecessor set -> its join op

  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges_;  // (pred, succ) until finish()
};

}  // namespace boostcomm::simulate
