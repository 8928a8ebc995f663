// GradientGroup: many gradient tensors synchronised by few collectives.
//
// The tensors are assigned once, at construction, to fusion buckets (one
// dtype per bucket, slots aligned to 64 bytes, a byte limit per bucket; the
// rules are in src/planner/bucketing.h). Every allreduce() then runs one
// allreduce per bucket, pipelined: bucket k is launched right after it is
// packed, bucket k+1 is packed while k is in flight, and k is unpacked while
// k+1 runs. Bucket memory is registered (Communicator::allocateBuffer), so on
// one node the shared-memory algorithm reads and writes it in place.
//
// Three modes:
// - segment lists (default): the caller's tensors stay where they are and
//   each bucket is one collective over its tensors in place
//   (Communicator::allreduceMany): no pack, no unpack, no bucket memory. The
//   bucket limit only sets how many collectives a step pipelines.
// - bucket view (like DDP's gradient_as_bucket_view): the tensors live *in*
//   registered buckets. tensorView(i) is the memory to write gradient i into;
//   the result is left there; on one node the shared-memory algorithm reads
//   and writes it in place. The views passed at construction give only count
//   and dtype (and initial contents, copied once, when their data is non-null).
// - packed buckets (packBuckets): the former copy mode, kept for comparison:
//   each step packs the tensors into registered buckets and unpacks them.
//
// Deterministic: the layout depends only on the tensor list and the options,
// and every bucket is reduced by the same algorithm in the same order, so all
// ranks get bitwise-identical results in every run.
//
// Construction is collective: every rank passes the same tensor list (counts
// and dtypes, in order) and options; otherwise every rank throws
// Error{kMismatch} naming the ranks that differ, before any data moves.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"

namespace boostcomm {

struct GradientGroupOptions {
  // Byte limit of one bucket. 0: BOOSTCOMM_BUCKET_BYTES when it is
  // set, else the size `boostcomm tune` stored in the communicator's tuning
  // cache (tunedBucketBytes), else 25 MiB (docs/FUSION.md).
  std::size_t bucketBytes = 0;
  // Limit of the first bucket (0 = bucketBytes): a small first bucket starts
  // the wire early when gradients arrive over time.
  std::size_t firstBucketBytes = 0;
  // true: results are averaged (ReduceOp::kAvg); floating-point dtypes only.
  bool average = false;
  // true: tensors live in the buckets (see tensorView).
  bool bucketView = false;
  // true: pack into registered buckets and unpack every step (the former
  // default; slower wherever the copies cost as much as the collective).
  bool packBuckets = false;
  // Algorithm / timeout / wire format of the bucket collectives
  // (call.wire: this group's 16-bit wire, on or off; empty: the communicator's).
  CallOptions call;
  // Error feedback for a 16-bit wire format (src/fusion/error_feedback.h):
  // each rank rounds its float32 bucket through the format the bucket's
  // allreduce will use and carries the rounding residual into the next step.
  // No effect where the bucket travels as float32.
  bool errorFeedback = false;
};

struct GradientGroupStats {
  std::size_t tensors = 0;
  std::size_t buckets = 0;
  std::size_t collectivesPerStep = 0;  // buckets that hold data
  std::size_t perTensorCollectives = 0;  // what one collective per tensor would launch
  std::size_t payloadBytes = 0;          // sum of tensor bytes
  std::size_t bucketBytes = 0;           // sum of bucket bytes (payload + alignment gaps)
  std::uint64_t steps = 0;               // completed allreduce steps
  std::uint64_t collectivesLaunched = 0;  // over all steps
  std::size_t bucketLimitBytes = 0;       // the byte limit in force (options.bucketBytes resolved)
};

namespace detail {
class GradientGroupImpl;
}

// Handle of one asynchronous GradientGroup step. Progresses (and unpacks
// finished buckets) whenever test() or wait() is called.
class GradientWork {
 public:
  GradientWork() = default;
  bool test();
  // Throws Error{kTimeout} when the timeout passes.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  bool valid() const { return group_ != nullptr; }

 private:
  friend class GradientGroup;
  GradientWork(detail::GradientGroupImpl* group, std::uint64_t step) : group_(group), step_(step) {}
  detail::GradientGroupImpl* group_ = nullptr;
  std::uint64_t step_ = 0;
};

class GradientGroup {
 public:
  GradientGroup(Communicator& comm, std::vector<View> tensors, GradientGroupOptions options = {});
  ~GradientGroup();  // releases the registered buckets (collective, like allocateBuffer)
  GradientGroup(const GradientGroup&) = delete;
  GradientGroup& operator=(const GradientGroup&) = delete;

  // One step: every tensor = sum (or average) over the ranks.
  void allreduce();
  // Packs and launches every bucket and returns; one step at a time.
  GradientWork allreduceAsync();

  // Where tensor i lives: the bucket slot in bucket-view mode, else the
  // caller's view.
  View tensorView(std::size_t index) const;
  std::size_t tensorCount() const;
  GradientGroupStats stats() const;
  // The bucket plan, one line per bucket, with a summary line first.
  std::string describe() const;

 private:
  std::unique_ptr<detail::GradientGroupImpl> impl_;
};

}  // namespace boostcomm
