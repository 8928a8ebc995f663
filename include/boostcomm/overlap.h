// OverlapEngine: gradient synchronisation that overlaps backward.
//
// Usage, per training step (every rank, same tensors, same calls):
//   OverlapEngine engine(comm, {{"fc.weight", View(...)}, ...});   // declaration (forward) order
//   engine.beginBackward();            // optional: marks the start of compute for the stats
//   engine.markReady(i);               // as backward produces gradient i, any order
//   engine.finishBackward();           // returns when every gradient holds the allreduced value
//
// Tensors are grouped into buckets (src/planner/bucketing.h) in reverse
// declaration order, the order backward produces them (or, with
// bucketsFromFirstStep, in the order rank 0 saw them arrive in the first
// step, as PyTorch DDP does). markReady packs each ready gradient into its
// bucket's staging buffer and launches the bucket's allreduce once the bucket
// is full, while backward still runs; the communicator's progress thread
// (Communicator::useProgressThread, started by the engine) completes it and
// runs the callback that unpacks it (docs/ARCHITECTURE.md). With
// OverlapOptions::bucketView the gradients live in the buckets (write them
// through tensorView(i)) and nothing is copied.
//
// Ordering invariant: bucket k launches only after bucket k-1 launched, so
// every rank issues the same collectives in the same order whatever order its
// gradients become ready in.
//
// Threading: the engine launches collectives from markReady and from bucket
// completion callbacks (on the communicator's progress thread) while a step
// is in progress (between the first markReady/beginBackward and the return of
// finishBackward). The application must not issue other collectives on the
// same Communicator during that window (they would interleave with the
// engine's in a rank-dependent order); between steps it may.
//
// Errors: a failure in a callback (a collective error, a timeout) never
// escapes it: it fails the step, finishBackward() rethrows it, and every
// later call rethrows it too (the communicator is unusable after a timeout,
// as for any collective). Construction is collective and agrees first: a bad
// option on one rank (stages < 1, a null tensor, ...) or different options on
// different ranks are errors on every rank, never a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"

namespace boostcomm {

enum class BufferStrategy {
  kSegmentList,  // no staging: each bucket is reduced in place on its gradients (a segment list), nothing copied
  kPingPong,  // two staging buffers per stage: bucket k+1 packs while bucket k is on the wire
  kSingle,    // one per stage: packing of a bucket waits until its buffer's previous bucket unpacked
};

struct OverlapOptions {
  bool enable = true;  // false: every bucket launches in finishBackward (fusion, no overlap)
  int stages = 2;      // bucket collectives in flight at once (>= 1)
  BufferStrategy bufferStrategy = BufferStrategy::kSegmentList;
  // Byte limit of a bucket; 0: BOOSTCOMM_BUCKET_BYTES when set, else the
  // tuning cache's measured size, else 25 MiB (as for GradientGroup).
  std::size_t bucketBytes = 0;
  std::size_t firstBucketBytes = 1u << 20;  // limit of the first bucket (0 = bucketBytes)
  bool average = false;                     // ReduceOp::kAvg instead of kSum (floating dtypes)
  bool bucketsFromFirstStep = false;        // rebuild buckets from rank 0's arrival order after step 1
  // Staging buffers from Communicator::allocateBuffer (zero-copy for the shm algorithms).
  bool registeredBuffers = true;
  // Bucket-view mode (as PyTorch DDP's gradient_as_bucket_view): the
  // gradients live inside the buckets. The engine allocates every bucket once,
  // in one registered arena (Communicator::allocateBuffer), and the caller
  // writes gradient i into tensorView(i) instead of its own buffer; the Views
  // passed at construction only give count and dtype (their contents, when
  // not null, are copied into the slots once, at construction). No pack, no
  // unpack: a full bucket is reduced in place, and after finishBackward the
  // result is in tensorView(i). registeredBuffers and bufferStrategy do not
  // apply. bucketsFromFirstStep is rejected (Error{kInvalidArgument}): moving
  // the tensors would invalidate every tensorView the caller holds.
  bool bucketView = false;
  // Deadline of every wait (finishBackward, and each bucket collective);
  // empty: BOOSTCOMM_TIMEOUT_MS (0 = none).
  std::optional<std::chrono::milliseconds> timeout;
  CallOptions call;          // algorithm / wire format override for the bucket collectives
  // Error feedback for a 16-bit wire format, as GradientGroupOptions::errorFeedback.
  bool errorFeedback = false;
  std::string timelinePath;  // Chrome-trace file (see BOOSTCOMM_TIMELINE); empty: none
  bool logSteps = false;     // one stats line per step on rank 0 (stderr)
  // Called on the launching thread just before bucket `bucket` launches (tests
  // inject failures with it; tracing tools may record). An exception from it
  // fails the step like a collective error.
  std::function<void(std::size_t bucket)> beforeLaunch;

  // The defaults above, overridden by BOOSTCOMM_OVERLAP, BOOSTCOMM_BUCKET_BYTES,
  // BOOSTCOMM_OVERLAP_FIRST_BUCKET_BYTES, BOOSTCOMM_OVERLAP_STAGES, BOOSTCOMM_OVERLAP_BUFFERS,
  // BOOSTCOMM_OVERLAP_LOG and BOOSTCOMM_TIMELINE.
  static OverlapOptions fromEnvironment();
};

// One step, in seconds (definitions in docs/OVERLAP.md):
//   compute   = first markReady (or beginBackward) -> last markReady
//   comm      = union of the intervals during which at least one bucket
//               collective was in flight (launch -> completion seen)
//   exposed   = time the caller spent inside finishBackward
//   hidden    = max(0, comm - exposed);  efficiency = hidden / comm (1 when comm is 0)
struct OverlapStepStats {
  double stepSeconds = 0;  // first markReady (or beginBackward) -> finishBackward returns
  double computeSeconds = 0;
  double commSeconds = 0;
  double exposedSeconds = 0;
  double hiddenSeconds = 0;
  double efficiency = 0;
  std::size_t buckets = 0;
  std::size_t bytes = 0;  // bucket bytes sent per step
};

struct OverlapStats {
  std::size_t steps = 0;
  OverlapStepStats last;
  OverlapStepStats mean;  // running mean over all steps (efficiency = mean hidden / mean comm)
};

struct GradientTensor {
  std::string name;
  View data;
};

class OverlapEngine {
 public:
  // Collective over comm: every rank passes the same tensor list (counts and
  // dtypes; a difference is Error{kMismatch} on every rank).
  OverlapEngine(Communicator& comm, std::vector<GradientTensor> tensors,
                OverlapOptions options = OverlapOptions::fromEnvironment());
  ~OverlapEngine();
  OverlapEngine(const OverlapEngine&) = delete;
  OverlapEngine& operator=(const OverlapEngine&) = delete;

  void beginBackward();
  // Gradient `tensor` (index in the declaration list) is final for this step.
  void markReady(std::size_t tensor);
  // Waits until every bucket is reduced and unpacked into the tensors.
  // Throws Error{kInvalidArgument} if a tensor was not marked ready,
  // Error{kTimeout} past the deadline, or the engine thread's error.
  void finishBackward();

  // Where the caller's gradient `tensor` lives: its slot in the bucket arena
  // in bucket-view mode (write the gradient there before markReady; read the
  // reduced result there after finishBackward), otherwise the View passed at
  // construction. Valid for the engine's lifetime.
  View tensorView(std::size_t tensor) const;

  OverlapStats getOverlapStats() const;
  std::size_t bucketCount() const;
  // One line per bucket (see planner::describePlan).
  std::string describeBuckets() const;

  class Impl;

 private:
  friend struct detail::Access;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boostcomm
