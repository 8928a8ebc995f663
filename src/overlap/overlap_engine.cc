// OverlapEngine: construction and the caller's side of a step (markReady,
// finishBackward, stats). Packing, launching and completing buckets is in
// overlap_step.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "api/access.h"
#include "core/check.h"
#include "core/tunables.h"
#include "overlap/overlap_impl.h"

namespace boostcomm {

OverlapOptions OverlapOptions::fromEnvironment() {
  OverlapOptions o;
  o.enable = core::tunableBool(core::kTunableOverlap);
  o.bucketBytes = 0;  // resolved by the bucket component: BOOSTCOMM_BUCKET_BYTES, tuning cache, default
  o.firstBucketBytes = core::tunableBytes(core::kTunableOverlapFirstBucketBytes);
  o.stages = static_cast<int>(core::tunableInt(core::kTunableOverlapStages));
  const std::string_view buffers = core::tunableEnum(core::kTunableOverlapBuffers);
  o.bufferStrategy = buffers == "single"     ? BufferStrategy::kSingle
                     : buffers == "pingpong" ? BufferStrategy::kPingPong
                                             : BufferStrategy::kSegmentList;
  o.logSteps = core::tunableBool(core::kTunableOverlapLog);
  o.timelinePath = core::tunableString(core::kTunableTimeline);
  return o;
}

fusion::BucketSetOptions OverlapEngine::Impl::bucketOptions(const OverlapOptions& options) {
  fusion::BucketSetOptions o;
  o.bucketBytes = options.bucketBytes;
  o.firstBucketBytes = options.firstBucketBytes;
  o.average = options.average;
  o.bucketView = options.bucketView;
  o.registered = options.registeredBuffers;
  const int perStage = options.bufferStrategy == BufferStrategy::kPingPong ? 2 : 1;
  o.segmentList = !options.bucketView && options.bufferStrategy == BufferStrategy::kSegmentList;
  o.stagingBuffers = options.bucketView || o.segmentList ? 0 : std::max(1, options.stages) * perStage;
  // The driver's own settings: ranks that differ would launch at different
  // times or different counts of buckets.
  o.driverSignature = (options.enable ? 1u : 0u) | (options.bucketsFromFirstStep ? 2u : 0u) |
                      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(options.stages)) << 8);
  // Local argument errors, raised on every rank together by the agreement.
  if (options.stages < 1) {
    o.driverError = "stages is " + std::to_string(options.stages) + " (must be >= 1)";
  } else if (options.bucketView && options.bucketsFromFirstStep) {
    // Re-bucketing after step 1 would move every gradient to a new slot behind
    // the back of a caller that holds tensorView()s.
    o.driverError = "bucketView and bucketsFromFirstStep cannot be combined (the tensors would move after step 1, "
                    "invalidating tensorView)";
  }
  return o;
}

namespace {

std::vector<View> viewsOf(const std::vector<GradientTensor>& tensors) {
  std::vector<View> views;
  views.reserve(tensors.size());
  for (const GradientTensor& t : tensors) views.push_back(t.data);
  return views;
}

std::vector<std::string> namesOf(const std::vector<GradientTensor>& tensors) {
  std::vector<std::string> names;
  names.reserve(tensors.size());
  for (const GradientTensor& t : tensors) names.push_back(t.name);
  return names;
}

// Gradients arrive in reverse declaration order (backward runs the layers
// last to first), so that is the initial bucket order.
std::vector<std::size_t> backwardOrder(std::size_t n) {
  std::vector<std::size_t> order(n);
  std::iota(order.rbegin(), order.rend(), std::size_t{0});
  return order;
}

}  // namespace

OverlapEngine::Impl::Impl(Communicator& comm, std::vector<GradientTensor> tensors, OverlapOptions options)
    : comm_(comm),
      options_(std::move(options)),
      rank_(comm.rank()),
      buckets_(comm, viewsOf(tensors), namesOf(tensors), bucketOptions(options_), "OverlapEngine",
               backwardOrder(tensors.size())) {
  progress_ = [this] { comm_.progress(); };
  readyFlag_.assign(buckets_.tensorCount(), 0);
  if (!options_.timelinePath.empty()) {
    telemetry::TimelineOptions to;
    to.path = telemetry::rankTimelinePath(options_.timelinePath, rank_, comm_.size());
    to.pid = rank_;
    to.maxEvents = static_cast<std::size_t>(core::tunableInt(core::kTunableTimelineMaxEvents));
    auto timeline = std::make_shared<telemetry::Timeline>(to);
    timeline->labelProcess(telemetry::currentRunInfo());
    attachTimeline(std::move(timeline));
  }
  // Buckets complete while backward computes only if someone progresses them.
  comm_.useProgressThread();
}

OverlapEngine::Impl::~Impl() {
  // Callbacks of buckets still in flight refer to this object: wait for them
  // (until their deadline; a timeout marks the communicator failed, which
  // completes them with the error).
  Lock lock(mutex_);
  try {
    waitForStep(lock, /*launchedOnly=*/true);
  } catch (...) {
    // The step's error was the caller's to see in finishBackward.
  }
  doneCv_.wait(lock, [&] { return inFlight_ == 0 && copying_ == 0 && !launching_; });
  lock.unlock();
  if (timeline_) timeline_->flush();
}

void OverlapEngine::Impl::attachTimeline(std::shared_ptr<telemetry::Timeline> timeline) {
  std::lock_guard lock(mutex_);
  timeline_ = std::move(timeline);
  if (!timeline_) return;
  timeline_->nameProcess("rank " + std::to_string(rank_));
  timeline_->nameThread(kCallerTid, "caller (backward)");
  timeline_->nameThread(kCopyTid, "overlap engine: pack/unpack");
  timeline_->nameThread(kFillTid, "bucket fill");
  for (int s = 0; s < options_.stages; ++s) timeline_->nameThread(kLaneTid0 + s, "collective lane " + std::to_string(s));
}

View OverlapEngine::Impl::tensorView(std::size_t tensor) const { return buckets_.tensorView(tensor); }

void OverlapEngine::Impl::rethrowIfFailedLocked() const {
  if (error_) std::rethrow_exception(error_);
}

std::optional<std::chrono::milliseconds> OverlapEngine::Impl::effectiveTimeout() const {
  if (options_.timeout) return options_.timeout;
  const std::int64_t ms = core::tunableInt(core::kTunableTimeoutMs);
  if (ms > 0) return std::chrono::milliseconds(ms);
  return std::nullopt;
}

void OverlapEngine::Impl::startStepLocked(double nowUs) {
  stepActive_ = true;
  times_ = {};
  times_.stepStartUs = nowUs;
  step_.assign(buckets_.bucketCount(), {});
  nextLaunch_ = 0;
  completed_ = 0;
}

void OverlapEngine::Impl::beginBackward() {
  Lock lock(mutex_);
  rethrowIfFailedLocked();
  BC_INVALID(!finishing_, rank_, "beginBackward: finishBackward of the previous step has not returned");
  if (!stepActive_) startStepLocked(telemetry::nowUs());
}

void OverlapEngine::Impl::markReady(std::size_t tensor) {
  Lock lock(mutex_);
  rethrowIfFailedLocked();
  BC_INVALID(tensor < buckets_.tensorCount(), rank_,
             "markReady: tensor " << tensor << " is out of range (" << buckets_.tensorCount() << " tensors declared)");
  BC_INVALID(!finishing_, rank_, "markReady: tensor " << tensor << " '" << buckets_.name(tensor)
                                                      << "' marked after finishBackward began");
  BC_INVALID(!readyFlag_[tensor], rank_,
             "markReady: tensor " << tensor << " '" << buckets_.name(tensor) << "' marked twice in one step");
  const double now = telemetry::nowUs();
  if (!stepActive_) startStepLocked(now);
  readyFlag_[tensor] = 1;
  ++readyCount_;
  times_.lastReadyUs = now;
  if (options_.bucketsFromFirstStep && stats_.steps == 0) arrival_.push_back(tensor);
  const planner::TensorPlace place = buckets_.plan().placeOf[tensor];
  StepBucket& b = step_[place.bucket];
  if (b.ready == 0) b.firstReadyUs = now;
  ++b.ready;
  if (buckets_.staged(place.bucket)) b.toPack.push_back(place.slot);
  const planner::Bucket& bucket = buckets_.plan().buckets[place.bucket];
  if (timeline_ && b.ready == bucket.slots.size()) {
    timeline_->complete("fill " + bucketLabel(place.bucket), "fill", kFillTid, b.firstReadyUs, now - b.firstReadyUs,
                        {{"bucket", place.bucket}, {"tensors", bucket.slots.size()}, {"bytes", bucket.bytes()}});
  }
  pump(lock);
}

void OverlapEngine::Impl::finishBackward() {
  Lock lock(mutex_);
  rethrowIfFailedLocked();
  if (readyCount_ != buckets_.tensorCount()) {
    const auto missing = std::find(readyFlag_.begin(), readyFlag_.end(), 0) - readyFlag_.begin();
    BC_INVALID(false, rank_,
               "finishBackward: " << (buckets_.tensorCount() - readyCount_)
                                  << " tensors were not marked ready, the first is " << missing << " '"
                                  << buckets_.name(static_cast<std::size_t>(missing)) << "'");
  }
  if (!stepActive_) startStepLocked(telemetry::nowUs());  // no tensors at all
  times_.waitStartUs = telemetry::nowUs();
  finishing_ = true;
  pump(lock);  // without overlap, every bucket launches now
  try {
    waitForStep(lock);
  } catch (...) {
    finishing_ = false;
    throw;
  }
  times_.waitEndUs = telemetry::nowUs();
  times_.buckets = buckets_.bucketCount();
  times_.bytes = buckets_.plan().bucketBytes;
  const OverlapStepStats stepStats = telemetry::computeStepStats(times_);
  telemetry::accumulate(stats_, stepStats);
  if (timeline_) {
    timeline_->complete("finishBackward wait", "wait", kCallerTid, times_.waitStartUs,
                        times_.waitEndUs - times_.waitStartUs, {{"step", stats_.steps}});
    timeline_->flush();
  }
  if (options_.logSteps && rank_ == 0)
    std::fprintf(stderr, "%s\n", telemetry::formatStepLine(stats_.steps, stepStats).c_str());
  std::fill(readyFlag_.begin(), readyFlag_.end(), 0);
  readyCount_ = 0;
  stepActive_ = false;
  finishing_ = false;
  if (options_.bucketsFromFirstStep && stats_.steps == 1) {
    // As DDP: rebuild the buckets in the order gradients really arrived,
    // taking rank 0's order so every rank builds the same plan. Nothing is
    // in flight between steps, so the plan may change here.
    std::vector<std::int64_t> order(arrival_.begin(), arrival_.end());
    arrival_.clear();
    lock.unlock();
    try {
      comm_.broadcast(View(order.data(), order.size(), DataType::kInt64), 0);
      buckets_.reorder(std::vector<std::size_t>(order.begin(), order.end()));
    } catch (...) {
      // The plan may be half rebuilt: no later step may run on it.
      lock.lock();
      failLocked(std::current_exception());
      throw;
    }
  }
}

OverlapStats OverlapEngine::Impl::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::size_t OverlapEngine::Impl::bucketCount() const {
  std::lock_guard lock(mutex_);
  return buckets_.bucketCount();
}

std::string OverlapEngine::Impl::describeBuckets() const {
  std::lock_guard lock(mutex_);
  return buckets_.describe();
}

// ---- public wrappers ----
OverlapEngine::OverlapEngine(Communicator& comm, std::vector<GradientTensor> tensors, OverlapOptions options)
    : impl_(std::make_unique<Impl>(comm, std::move(tensors), std::move(options))) {}
OverlapEngine::~OverlapEngine() = default;
void OverlapEngine::beginBackward() { impl_->beginBackward(); }
void OverlapEngine::markReady(std::size_t tensor) { impl_->markReady(tensor); }
void OverlapEngine::finishBackward() { impl_->finishBackward(); }
View OverlapEngine::tensorView(std::size_t tensor) const { return impl_->tensorView(tensor); }
OverlapStats OverlapEngine::getOverlapStats() const { return impl_->stats(); }
std::size_t OverlapEngine::bucketCount() const { return impl_->bucketCount(); }
std::string OverlapEngine::describeBuckets() const { return impl_->describeBuckets(); }

void overlap::attachTimeline(OverlapEngine& engine, std::shared_ptr<telemetry::Timeline> timeline) {
  detail::implOf(engine).attachTimeline(std::move(timeline));
}

}  // namespace boostcomm
