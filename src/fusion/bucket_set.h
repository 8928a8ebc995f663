// BucketSet: the one bucket component under GradientGroup and OverlapEngine.
//
// It owns what both drivers need and nothing they do differently: the bucket
// plan (src/planner/bucketing.h), the memory every bucket is reduced on, the
// slot views, pack/unpack, and the cross-rank agreement that precedes them.
// The drivers only decide *when* to pack, launch and unpack
// (GradientGroup::allreduce: all at once; OverlapEngine: as gradients arrive).
//
// Terms: tensor, bucket, slot as in bucketing.h. A bucket's *region* is the
// memory its collective runs on:
// - arena layout (GradientGroup, and every bucket-view set): one registered
//   allocation holds a region per bucket; in copy mode tensors are packed in
//   and unpacked out, in bucket-view mode they live there (tensorView);
// - staging layout (OverlapEngine copy mode, stagingBuffers = N > 0): a
//   bucket of one tensor is reduced in place, in the caller's memory; the
//   others share N staging buffers round-robin, so staged bucket s may pack
//   only after previousUser(s) unpacked (N = stages: single buffering, 2 x
//   stages: ping-pong).
// - segment-list layout (segmentList, the default of both drivers): no
//   memory at all; a bucket's collective runs in place on its tensors as a
//   segment list (Communicator::allreduceMany underneath; the bucket only
//   sets the pipelining granularity). Nothing is packed or unpacked.
// Regions start on kRegionAlignBytes boundaries (see the .cc for why).
//
// Agreement: the constructor is collective. Every rank exchanges a signature
// (tensor counts and dtypes in order, bucket limits, average, mode, staging,
// and the driver's own options) and its local argument error; any error or
// difference is raised on every rank together, before any memory is
// registered or data moves, so a rank with bad input never leaves the others
// waiting in a collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"
#include "core/segment_list.h"
#include "fusion/copy_pieces.h"
#include "planner/bucketing.h"

namespace boostcomm::fusion {

struct BucketSetOptions {
  // Byte limit of a bucket; 0 resolves it: BOOSTCOMM_BUCKET_BYTES when set,
  // else the tuning cache's measured size (tunedBucketBytes), else the
  // tunable's default.
  std::size_t bucketBytes = 0;
  std::size_t firstBucketBytes = 0;  // 0 = bucketBytes
  bool average = false;              // kAvg (floating dtypes only) instead of kSum
  bool bucketView = false;           // tensors live in the arena
  int stagingBuffers = 0;            // 0: arena layout; N > 0: staging layout (copy mode only)
  bool segmentList = false;          // segment-list layout (not with bucketView or stagingBuffers)
  bool registered = true;            // regions from Communicator::allocateBuffer
  // The driver's options that every rank must share, folded into the signature.
  std::uint64_t driverSignature = 0;
  // The driver's local argument error ("" when none), raised in the agreement.
  std::string driverError;
};

class BucketSet {
 public:
  // Collective (see the agreement above). `names` may be empty or one per
  // tensor (used in messages). `order`: the tensors in the order their data
  // becomes ready (empty: declaration order); buckets follow it.
  BucketSet(Communicator& comm, std::vector<View> tensors, std::vector<std::string> names, BucketSetOptions options,
            const char* owner, std::vector<std::size_t> order = {});
  ~BucketSet();  // frees registered memory (collective, like allocateBuffer)
  BucketSet(const BucketSet&) = delete;
  BucketSet& operator=(const BucketSet&) = delete;

  // Rebuilds the plan for a new order (same on every rank; collective when
  // the staging memory must grow). Not in bucket-view mode.
  void reorder(const std::vector<std::size_t>& order);

  const planner::BucketPlan& plan() const { return plan_; }
  std::size_t bucketCount() const { return plan_.buckets.size(); }
  std::size_t tensorCount() const { return tensors_.size(); }
  const std::string& name(std::size_t tensor) const;
  const BucketSetOptions& options() const { return options_; }
  const char* bucketLimitSource() const { return bucketLimitSource_; }
  ReduceOp op() const { return options_.average ? ReduceOp::kAvg : ReduceOp::kSum; }

  // The memory bucket `bucket` is reduced on (not in the segment-list layout).
  View region(std::size_t bucket) const;
  // Segment-list layout: the bucket's tensors in slot order, and their total
  // count (elements of the bucket's dtype).
  bool segmentList() const { return options_.segmentList; }
  const core::SegmentList& segments(std::size_t bucket) const { return lists_[bucket]; }
  std::size_t segmentCount(std::size_t bucket) const;
  // Whether the bucket is packed and unpacked (copy mode, not in place).
  bool staged(std::size_t bucket) const;
  // Staging layout: the bucket that used this bucket's buffer before it in
  // the step (-1: none); it must unpack before this one packs.
  std::ptrdiff_t previousUser(std::size_t bucket) const { return layout_[bucket].previousUser; }
  // Where tensor `tensor` lives: its slot in bucket-view mode, else the caller's View.
  View tensorView(std::size_t tensor) const;

  // Copies slot `slot` of `bucket` in (pack) or every slot out (unpack),
  // calling `progress` between pieces of large copies. No-ops when !staged.
  void packSlot(std::size_t bucket, std::size_t slot, const detail::Progress& progress) const;
  void pack(std::size_t bucket, const detail::Progress& progress) const;
  void unpack(std::size_t bucket, const detail::Progress& progress) const;

  // One line per bucket (planner::describePlan) after a summary.
  std::string describe() const;

 private:
  struct Layout {
    int buffer = -1;                   // staging layout: buffer index; -1 in place
    std::ptrdiff_t previousUser = -1;  // staging layout
    std::size_t offsetBytes = 0;       // arena layout: region start in the arena
  };
  // A region per bucket in one arena (else: staging buffers, single tensors in place).
  bool arenaLayout() const { return options_.bucketView || (options_.stagingBuffers == 0 && !options_.segmentList); }
  void resolveBucketBytes();
  std::string localError() const;
  void plan(const std::vector<std::size_t>& order);
  void allocate(std::size_t bytes);
  void release();
  View slotView(std::size_t tensor) const;

  Communicator& comm_;
  std::vector<View> tensors_;
  std::vector<std::string> names_;
  BucketSetOptions options_;
  const char* owner_;
  const char* bucketLimitSource_ = "option";
  planner::BucketPlan plan_;
  std::vector<Layout> layout_;
  std::vector<core::SegmentList> lists_;  // segment-list layout, per bucket
  std::size_t bufferBytes_ = 0;  // staging layout: bytes per buffer
  int buffersUsed_ = 0;          // staging layout
  unsigned char* memory_ = nullptr;
  std::size_t memoryBytes_ = 0;
  std::vector<unsigned char> heapMemory_;  // !registered
};

}  // namespace boostcomm::fusion
