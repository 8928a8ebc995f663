#include "fusion/bucket_set.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>

#include "boostcomm/autotune.h"
#include "api/agreement.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/tunables.h"

namespace boostcomm::fusion {
namespace {

// Regions (arena buckets, staging buffers) start on their own page. Why: the
// shm algorithm splits a bucket into per-rank slices and each rank writes its
// slice while peers read theirs; page-aligned starts keep two buckets'
// slices off the same cache lines and pages (GradientGroup's measured choice;
// the overlap engine used 64 bytes, which shared lines between neighbouring
// buckets in flight at once). The waste is < 4 KiB per bucket.
constexpr std::size_t kRegionAlignBytes = 4096;

std::size_t alignUp(std::size_t bytes) { return (bytes + kRegionAlignBytes - 1) / kRegionAlignBytes * kRegionAlignBytes; }

}  // namespace

BucketSet::BucketSet(Communicator& comm, std::vector<View> tensors, std::vector<std::string> names,
                     BucketSetOptions options, const char* owner, std::vector<std::size_t> order)
    : comm_(comm), tensors_(std::move(tensors)), names_(std::move(names)), options_(std::move(options)), owner_(owner) {
  resolveBucketBytes();
  std::vector<planner::TensorInfo> infos;
  infos.reserve(tensors_.size());
  for (const View& t : tensors_) infos.push_back({t.count, t.dtype});
  std::uint64_t signature = planner::tensorListSignature(infos);
  signature = core::fnvWord(signature, options_.bucketBytes);
  signature = core::fnvWord(signature, options_.firstBucketBytes);
  signature = core::fnvWord(signature, (options_.average ? 1u : 0u) | (options_.bucketView ? 2u : 0u) |
                                                  (options_.registered ? 4u : 0u) | (options_.segmentList ? 8u : 0u));
  signature = core::fnvWord(signature, static_cast<std::uint64_t>(options_.stagingBuffers));
  signature = core::fnvWord(signature, options_.driverSignature);
  std::string error = localError();
  if (error.empty() && !order.empty() && order.size() != tensors_.size()) error = "order does not list every tensor";
  detail::agreeAcrossRanks(comm_, signature, error, owner_);

  if (order.empty()) {
    order.resize(tensors_.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
  }
  plan(order);
  if (options_.bucketView) {
    // The tensors' starting values, when the caller gave any.
    for (std::size_t t = 0; t < tensors_.size(); ++t) {
      const View& v = tensors_[t];
      if (v.data != nullptr && v.count > 0) std::memcpy(slotView(t).data, v.data, v.count * dataTypeSize(v.dtype));
    }
  }
}

BucketSet::~BucketSet() {
  try {
    release();
  } catch (...) {
    // A failed communicator may refuse; the memory goes with it at finalize.
  }
}

void BucketSet::resolveBucketBytes() {
  // Every rank asks for the tuned size, also one whose option or env decides:
  // the first question may read BOOSTCOMM_TUNING_CACHE, which is collective.
  // Ranks that end with different limits fail the agreement with kMismatch.
  const std::size_t tuned = tunedBucketBytes(comm_);
  if (options_.bucketBytes != 0) return;
  const bool envSet = core::tunableIsSet(core::kTunableBucketBytes);
  if (!envSet && tuned != 0) {
    options_.bucketBytes = tuned;
    bucketLimitSource_ = "tuning cache";
    return;
  }
  options_.bucketBytes = core::tunableBytes(core::kTunableBucketBytes);
  bucketLimitSource_ = envSet ? "BOOSTCOMM_BUCKET_BYTES" : "default";
}

std::string BucketSet::localError() const {
  if (!options_.driverError.empty()) return options_.driverError;
  std::ostringstream os;
  if (options_.bucketBytes == 0) return "bucketBytes is 0";
  if (options_.stagingBuffers < 0) return "stagingBuffers is negative";
  if (options_.segmentList && (options_.bucketView || options_.stagingBuffers > 0))
    return "segment lists cannot be combined with bucket view or staging buffers";
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const View& v = tensors_[t];
    const std::string label = names_.empty() ? std::string() : " '" + names_[t] + "'";
    if (!options_.bucketView && v.data == nullptr && v.count > 0) {
      os << "tensor " << t << label << " has " << v.count << " elements but a null data pointer";
      return os.str();
    }
    if (options_.average && !isFloatingPoint(v.dtype)) {
      os << "tensor " << t << label << " is " << toString(v.dtype)
         << ": average needs floating-point dtypes (an integer average would truncate); use average = false";
      return os.str();
    }
  }
  return {};
}

const std::string& BucketSet::name(std::size_t tensor) const {
  static const std::string kNone;
  return names_.empty() ? kNone : names_[tensor];
}

void BucketSet::plan(const std::vector<std::size_t>& order) {
  std::vector<planner::TensorInfo> infos;
  infos.reserve(order.size());
  for (std::size_t t : order) infos.push_back({tensors_[t].count, tensors_[t].dtype});
  planner::BucketOptions bo;
  bo.bucketBytes = options_.bucketBytes;
  bo.firstBucketBytes = options_.firstBucketBytes;
  plan_ = planner::planBuckets(infos, bo);
  // Slots name positions in `order`; map them back to tensor indices.
  for (planner::Bucket& b : plan_.buckets) {
    for (planner::BucketSlot& s : b.slots) s.tensor = order[s.tensor];
  }
  std::vector<planner::TensorPlace> placeOf(tensors_.size());
  for (std::size_t i = 0; i < order.size(); ++i) placeOf[order[i]] = plan_.placeOf[i];
  plan_.placeOf = std::move(placeOf);

  layout_.assign(plan_.buckets.size(), {});
  lists_.clear();
  std::size_t needed = 0;
  if (options_.segmentList) {
    // No memory: each bucket is its tensors, in slot order.
    lists_.resize(plan_.buckets.size());
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
      for (const planner::BucketSlot& s : plan_.buckets[b].slots) {
        const View& t = tensors_[s.tensor];
        lists_[b].append(t.data, t.count * dataTypeSize(t.dtype));
      }
    }
  } else if (arenaLayout()) {
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
      layout_[b].offsetBytes = needed;
      needed += alignUp(plan_.buckets[b].bytes());
    }
  } else {
    const auto buffers = static_cast<std::size_t>(options_.stagingBuffers);
    std::vector<std::size_t> stagedBuckets;
    std::size_t largest = 0;
    for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
      if (plan_.buckets[b].slots.size() <= 1) continue;  // in place: nothing to pack
      const std::size_t s = stagedBuckets.size();
      layout_[b].buffer = static_cast<int>(s % buffers);
      if (s >= buffers) layout_[b].previousUser = static_cast<std::ptrdiff_t>(stagedBuckets[s - buffers]);
      stagedBuckets.push_back(b);
      largest = std::max(largest, plan_.buckets[b].bytes());
    }
    buffersUsed_ = static_cast<int>(std::min(stagedBuckets.size(), buffers));
    bufferBytes_ = alignUp(largest);
    needed = bufferBytes_ * static_cast<std::size_t>(buffersUsed_);
  }
  if (needed != memoryBytes_) {
    // Collective when registered: every rank has the same plan (agreed).
    release();
    try {
      allocate(needed);
    } catch (...) {
      // No memory behind the plan: leave no buckets rather than a plan
      // that points nowhere.
      plan_ = {};
      layout_.clear();
      throw;
    }
  }
}

void BucketSet::reorder(const std::vector<std::size_t>& order) {
  BC_INVALID(!options_.bucketView, comm_.rank(),
             owner_ << ": buckets cannot be rebuilt in bucket-view mode (the tensors would move)");
  BC_INVALID(order.size() == tensors_.size(), comm_.rank(), owner_ << ": new order does not list every tensor");
  plan(order);
}

void BucketSet::allocate(std::size_t bytes) {
  memoryBytes_ = bytes;
  if (bytes == 0) return;
  if (options_.registered) {
    memory_ = static_cast<unsigned char*>(comm_.allocateBuffer(bytes));
    return;
  }
  heapMemory_.assign(bytes + kRegionAlignBytes, 0);
  const auto base = reinterpret_cast<std::uintptr_t>(heapMemory_.data());
  memory_ = heapMemory_.data() + (alignUp(base) - base);
}

void BucketSet::release() {
  if (options_.registered && memory_ != nullptr) comm_.freeBuffer(memory_);
  memory_ = nullptr;
  memoryBytes_ = 0;
  heapMemory_.clear();
  heapMemory_.shrink_to_fit();
}

std::size_t BucketSet::segmentCount(std::size_t bucket) const {
  return lists_[bucket].totalBytes() / dataTypeSize(plan_.buckets[bucket].dtype);
}

bool BucketSet::staged(std::size_t bucket) const {
  if (options_.bucketView || options_.segmentList) return false;
  return arenaLayout() || layout_[bucket].buffer >= 0;
}

View BucketSet::region(std::size_t bucket) const {
  const planner::Bucket& b = plan_.buckets[bucket];
  BC_INTERNAL(!options_.segmentList, owner_ << ": a segment-list bucket has no region");
  if (arenaLayout())
    return View(memory_ == nullptr ? nullptr : memory_ + layout_[bucket].offsetBytes, b.count, b.dtype);
  if (layout_[bucket].buffer < 0) return tensors_[b.slots.front().tensor];
  return View(memory_ + static_cast<std::size_t>(layout_[bucket].buffer) * bufferBytes_, b.count, b.dtype);
}

View BucketSet::slotView(std::size_t tensor) const {
  const planner::TensorPlace place = plan_.placeOf[tensor];
  const planner::BucketSlot& slot = plan_.buckets[place.bucket].slots[place.slot];
  const View bucket = region(place.bucket);
  auto* base = static_cast<unsigned char*>(bucket.data);
  return View(base == nullptr ? nullptr : base + slot.offset * dataTypeSize(bucket.dtype), slot.count, bucket.dtype);
}

View BucketSet::tensorView(std::size_t tensor) const {
  BC_INVALID(tensor < tensors_.size(), comm_.rank(),
             owner_ << ": tensor " << tensor << " is out of range (" << tensors_.size() << " tensors declared)");
  return options_.bucketView ? slotView(tensor) : tensors_[tensor];
}

void BucketSet::packSlot(std::size_t bucket, std::size_t slot, const detail::Progress& progress) const {
  if (!staged(bucket)) return;
  const planner::BucketSlot& s = plan_.buckets[bucket].slots[slot];
  if (s.count == 0) return;
  detail::copyWithProgress(slotView(s.tensor).data, tensors_[s.tensor].data, s.count * dataTypeSize(tensors_[s.tensor].dtype),
                           progress);
}

void BucketSet::pack(std::size_t bucket, const detail::Progress& progress) const {
  for (std::size_t s = 0; s < plan_.buckets[bucket].slots.size(); ++s) packSlot(bucket, s, progress);
}

void BucketSet::unpack(std::size_t bucket, const detail::Progress& progress) const {
  if (!staged(bucket)) return;
  for (const planner::BucketSlot& s : plan_.buckets[bucket].slots) {
    if (s.count == 0) continue;
    detail::copyWithProgress(tensors_[s.tensor].data, slotView(s.tensor).data,
                             s.count * dataTypeSize(tensors_[s.tensor].dtype), progress);
  }
}

std::string BucketSet::describe() const {
  std::ostringstream os;
  os << owner_ << ": " << tensors_.size() << " tensors, " << plan_.buckets.size() << " buckets, "
     << plan_.payloadBytes << " payload bytes in " << plan_.bucketBytes << " bucket bytes, bucket limit "
     << options_.bucketBytes << " bytes (" << bucketLimitSource_ << "), "
     << (options_.bucketView      ? "bucket-view"
         : options_.segmentList   ? "segment-list"
         : options_.stagingBuffers > 0 ? "staging"
                                        : "copy")
     << " mode, "
     << (options_.average ? "average" : "sum") << "\n";
  return os.str() + planner::describePlan(plan_);
}

}  // namespace boostcomm::fusion
