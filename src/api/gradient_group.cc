// GradientGroup (include/boostcomm/gradient_group.h).
//
// One step, copy mode, for buckets 0..B-1:
//   pack k (copy each tensor into its slot, poking the collectives in flight
//   every MiB) -> launch allreduceAsync(k) -> ... -> after the last launch,
//   wait k in order and unpack it, poking k+1.. while copying.
// Bucket-view mode is the same loop with pack and unpack empty. All buckets
// share one registered arena (one allocateBuffer call, one shared window):
// registering per bucket would cost a window per bucket.
#include "boostcomm/gradient_group.h"

#include <cstring>
#include <sstream>

#include "api/fusion_common.h"
#include "boostcomm/tuning.h"
#include "core/check.h"
#include "core/tunables.h"
#include "planner/bucketing.h"

namespace boostcomm {
namespace detail {

class GradientGroupImpl {
 public:
  GradientGroupImpl(Communicator& comm, std::vector<View> tensors, GradientGroupOptions options);
  ~GradientGroupImpl();

  void start();
  bool test(std::uint64_t step);
  void wait(std::uint64_t step, std::optional<std::chrono::milliseconds> timeout);
  std::uint64_t step() const { return step_; }

  View tensorView(std::size_t index) const;
  std::size_t tensorCount() const { return tensors_.size(); }
  GradientGroupStats stats() const { return stats_; }
  std::string describe() const;

 private:
  // Fills options_.bucketBytes when 0 and says where the limit came from.
  void resolveBucketBytes();
  std::string localError() const;
  View bucketView(std::size_t bucket) const;
  View slotView(std::size_t tensor) const;
  // Copies between the caller's tensors and bucket `bucket`.
  void copyBucket(std::size_t bucket, bool pack);
  void progress();
  void checkStep(std::uint64_t step) const;

  Communicator& comm_;
  std::vector<View> tensors_;
  GradientGroupOptions options_;
  const char* bucketLimitSource_ = "option";  // for describe()
  planner::BucketPlan plan_;
  char* arena_ = nullptr;
  std::vector<std::size_t> bucketOffsetBytes_;
  std::vector<Work> works_;  // per bucket, the current step's
  std::vector<bool> finished_;
  std::size_t nextToFinish_ = 0;
  std::size_t lastLaunched_ = static_cast<std::size_t>(-1);
  bool inFlight_ = false;
  std::uint64_t step_ = 0;
  GradientGroupStats stats_;
  Progress progress_;
};

namespace {
// Buckets start on their own page inside the arena: the shm algorithm splits
// a bucket into per-rank slices, and page-aligned starts keep two buckets'
// slices off the same cache lines and pages.
constexpr std::size_t kBucketAlignBytes = 4096;
}  // namespace

GradientGroupImpl::GradientGroupImpl(Communicator& comm, std::vector<View> tensors, GradientGroupOptions options)
    : comm_(comm), tensors_(std::move(tensors)), options_(std::move(options)) {
  resolveBucketBytes();
  std::vector<planner::TensorInfo> infos;
  infos.reserve(tensors_.size());
  for (const View& t : tensors_) infos.push_back({t.count, t.dtype});
  std::uint64_t signature = planner::tensorListSignature(infos);
  signature = mixSignature(signature, options_.bucketBytes);
  signature = mixSignature(signature, options_.firstBucketBytes);
  signature = mixSignature(signature, (options_.average ? 1u : 0u) | (options_.bucketView ? 2u : 0u));
  agreeAcrossRanks(comm_, signature, localError(), "GradientGroup");

  planner::BucketOptions bucketOptions;
  bucketOptions.bucketBytes = options_.bucketBytes;
  bucketOptions.firstBucketBytes = options_.firstBucketBytes;
  plan_ = planner::planBuckets(infos, bucketOptions);

  std::size_t arenaBytes = 0;
  for (const planner::Bucket& b : plan_.buckets) {
    bucketOffsetBytes_.push_back(arenaBytes);
    arenaBytes += (b.bytes() + kBucketAlignBytes - 1) / kBucketAlignBytes * kBucketAlignBytes;
  }
  if (arenaBytes > 0) arena_ = static_cast<char*>(comm_.allocateBuffer(arenaBytes));
  works_.resize(plan_.buckets.size());
  finished_.assign(plan_.buckets.size(), true);
  if (options_.bucketView) {
    for (std::size_t t = 0; t < tensors_.size(); ++t)
      if (tensors_[t].data != nullptr && tensors_[t].count > 0)
        std::memcpy(slotView(t).data, tensors_[t].data, tensors_[t].count * dataTypeSize(tensors_[t].dtype));
  }
  progress_ = [this] { progress(); };

  stats_.tensors = tensors_.size();
  stats_.buckets = plan_.buckets.size();
  for (const planner::Bucket& b : plan_.buckets) stats_.collectivesPerStep += b.count > 0 ? 1 : 0;
  stats_.perTensorCollectives = tensors_.size();
  stats_.payloadBytes = plan_.payloadBytes;
  stats_.bucketBytes = plan_.bucketBytes;
  stats_.bucketLimitBytes = options_.bucketBytes;
}

void GradientGroupImpl::resolveBucketBytes() {
  // Every rank asks for the tuned size, also one whose option or env decides:
  // the first question may read BOOSTCOMM_TUNING_CACHE, which is collective.
  // Ranks that end with different limits (a per-rank option, env or applied
  // cache) fail the signature check below with kMismatch on every rank.
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

GradientGroupImpl::~GradientGroupImpl() {
  try {
    if (inFlight_) wait(step_, std::nullopt);
    if (arena_ != nullptr) comm_.freeBuffer(arena_);
  } catch (...) {
    // A destructor must not throw; the communicator reports the failure on its next call.
  }
}

std::string GradientGroupImpl::localError() const {
  std::ostringstream os;
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const View& v = tensors_[t];
    if (!options_.bucketView && v.data == nullptr && v.count > 0) {
      os << "tensor " << t << " has " << v.count << " elements but a null data pointer";
      return os.str();
    }
    if (options_.average && !isFloatingPoint(v.dtype)) {
      os << "tensor " << t << " is " << toString(v.dtype)
         << ": average needs floating-point dtypes (an integer average would truncate); use average = false";
      return os.str();
    }
  }
  return {};
}

View GradientGroupImpl::bucketView(std::size_t bucket) const {
  const planner::Bucket& b = plan_.buckets[bucket];
  return View(arena_ + bucketOffsetBytes_[bucket], b.count, b.dtype);
}

View GradientGroupImpl::slotView(std::size_t tensor) const {
  const planner::TensorPlace place = plan_.placeOf[tensor];
  const planner::BucketSlot& slot = plan_.buckets[place.bucket].slots[place.slot];
  const View bucket = bucketView(place.bucket);
  return View(static_cast<char*>(bucket.data) + slot.offset * dataTypeSize(bucket.dtype), slot.count, bucket.dtype);
}

View GradientGroupImpl::tensorView(std::size_t index) const {
  BC_INVALID(index < tensors_.size(), comm_.rank(),
             "GradientGroup::tensorView: index " << index << " out of range (" << tensors_.size() << " tensors)");
  return options_.bucketView ? slotView(index) : tensors_[index];
}

void GradientGroupImpl::progress() {
  // Any pending Work's test() progresses every collective in flight on the
  // communicator; the last one launched is the one most likely still pending
  // (a finished Work's test() returns without progressing anything).
  if (lastLaunched_ < works_.size() && works_[lastLaunched_].valid()) works_[lastLaunched_].test();
}

void GradientGroupImpl::copyBucket(std::size_t bucket, bool pack) {
  if (options_.bucketView) return;
  for (const planner::BucketSlot& slot : plan_.buckets[bucket].slots) {
    if (slot.count == 0) continue;
    const View inBucket = slotView(slot.tensor);
    const std::size_t bytes = slot.count * dataTypeSize(inBucket.dtype);
    if (pack)
      copyWithProgress(inBucket.data, tensors_[slot.tensor].data, bytes, progress_);
    else
      copyWithProgress(tensors_[slot.tensor].data, inBucket.data, bytes, progress_);
  }
}

void GradientGroupImpl::start() {
  BC_INVALID(!inFlight_, comm_.rank(), "GradientGroup: a step is still in flight; wait for it first");
  ++step_;
  inFlight_ = true;
  nextToFinish_ = 0;
  lastLaunched_ = static_cast<std::size_t>(-1);
  const ReduceOp op = options_.average ? ReduceOp::kAvg : ReduceOp::kSum;
  for (std::size_t k = 0; k < plan_.buckets.size(); ++k) {
    works_[k] = Work();
    finished_[k] = plan_.buckets[k].count == 0;  // only empty tensors: nothing to send
    if (finished_[k]) continue;
    copyBucket(k, /*pack=*/true);
    const View bucket = bucketView(k);
    works_[k] = comm_.allreduceAsync(bucket, bucket, op, options_.call);
    lastLaunched_ = k;
    ++stats_.collectivesLaunched;
  }
}

bool GradientGroupImpl::test(std::uint64_t stepId) {
  checkStep(stepId);
  if (!inFlight_ || stepId != step_) return true;
  while (nextToFinish_ < works_.size()) {
    if (!finished_[nextToFinish_]) {
      if (!works_[nextToFinish_].test()) return false;
      finished_[nextToFinish_] = true;
      const std::size_t k = nextToFinish_++;
      copyBucket(k, /*pack=*/false);  // pokes k+1.. while it copies
      continue;
    }
    ++nextToFinish_;
  }
  inFlight_ = false;
  ++stats_.steps;
  return true;
}

void GradientGroupImpl::wait(std::uint64_t stepId, std::optional<std::chrono::milliseconds> timeout) {
  checkStep(stepId);
  if (!inFlight_ || stepId != step_) return;
  const auto deadline = timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
  while (nextToFinish_ < works_.size()) {
    if (!finished_[nextToFinish_]) {
      std::optional<std::chrono::milliseconds> left;
      if (deadline) {
        left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
        if (left->count() < 0) left = std::chrono::milliseconds(0);
      }
      works_[nextToFinish_].wait(left);
    }
    test(stepId);
  }
  test(stepId);
}

void GradientGroupImpl::checkStep(std::uint64_t stepId) const {
  BC_INVALID(stepId <= step_ && stepId > 0, comm_.rank(), "GradientWork: not a step of this GradientGroup");
}

std::string GradientGroupImpl::describe() const {
  std::ostringstream os;
  os << "GradientGroup: " << stats_.tensors << " tensors, " << stats_.buckets << " buckets ("
     << stats_.collectivesPerStep << " collectives per step instead of " << stats_.perTensorCollectives << "), "
     << stats_.payloadBytes << " payload bytes in " << stats_.bucketBytes << " bucket bytes, bucket limit "
     << options_.bucketBytes << " bytes (" << bucketLimitSource_ << "), "
     << (options_.bucketView ? "bucket-view" : "copy") << " mode, " << (options_.average ? "average" : "sum") << "\n";
  return os.str() + planner::describePlan(plan_);
}

}  // namespace detail

bool GradientWork::test() {
  BC_INVALID(group_ != nullptr, -1, "GradientWork::test: empty handle");
  return group_->test(step_);
}

void GradientWork::wait(std::optional<std::chrono::milliseconds> timeout) {
  BC_INVALID(group_ != nullptr, -1, "GradientWork::wait: empty handle");
  group_->wait(step_, timeout);
}

GradientGroup::GradientGroup(Communicator& comm, std::vector<View> tensors, GradientGroupOptions options)
    : impl_(std::make_unique<detail::GradientGroupImpl>(comm, std::move(tensors), std::move(options))) {}

GradientGroup::~GradientGroup() = default;

void GradientGroup::allreduce() { allreduceAsync().wait(); }

GradientWork GradientGroup::allreduceAsync() {
  impl_->start();
  return GradientWork(impl_.get(), impl_->step());
}

View GradientGroup::tensorView(std::size_t index) const { return impl_->tensorView(index); }
std::size_t GradientGroup::tensorCount() const { return impl_->tensorCount(); }
GradientGroupStats GradientGroup::stats() const { return impl_->stats(); }
std::string GradientGroup::describe() const { return impl_->describe(); }

}  // namespace boostcomm
