// OverlapEngine: construction, the plan, and the caller's side of a step
// (markReady, finishBackward, stats). The engine thread is in engine_thread.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "api/access.h"
#include "core/check.h"
#include "core/tunables.h"
#include "engine/engine_impl.h"

namespace boostcomm {

OverlapOptions OverlapOptions::fromEnvironment() {
  OverlapOptions o;
  o.enable = core::tunableInt(core::kTunableOverlap) != 0;
  o.bucketBytes = static_cast<std::size_t>(std::max<std::int64_t>(1, core::tunableInt(core::kTunableOverlapBucketBytes)));
  o.firstBucketBytes = static_cast<std::size_t>(std::max<std::int64_t>(0, core::tunableInt(core::kTunableOverlapFirstBucketBytes)));
  o.stages = static_cast<int>(core::tunableInt(core::kTunableOverlapStages));
  const std::string buffers = core::tunableValue(core::kTunableOverlapBuffers);
  BC_INVALID(buffers == "pingpong" || buffers == "single", -1,
             "BOOSTCOMM_OVERLAP_BUFFERS: '" << buffers << "' is unknown (valid: pingpong, single)");
  o.bufferStrategy = buffers == "single" ? BufferStrategy::kSingle : BufferStrategy::kPingPong;
  o.logSteps = core::tunableInt(core::kTunableOverlapLog) != 0;
  o.timelinePath = core::tunableValue(core::kTunableTimeline);
  return o;
}

OverlapEngine::Impl::Impl(Communicator& comm, std::vector<GradientTensor> tensors, OverlapOptions options)
    : comm_(comm), tensors_(std::move(tensors)), options_(std::move(options)), rank_(comm.rank()) {
  BC_INVALID(options_.stages >= 1, rank_, "OverlapEngine: stages is " << options_.stages << " (must be >= 1)");
  BC_INVALID(options_.bucketBytes > 0, rank_, "OverlapEngine: bucketBytes is 0");
  // Re-bucketing after step 1 would move every gradient to a new slot behind
  // the back of a caller that holds tensorView()s (DDP re-points its
  // parameters' .grad; a C++ View cannot be re-pointed).
  BC_INVALID(!(options_.bucketView && options_.bucketsFromFirstStep), rank_,
             "OverlapEngine: bucketView and bucketsFromFirstStep cannot be combined (the tensors would move after "
             "step 1, invalidating tensorView)");
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const GradientTensor& t = tensors_[i];
    BC_INVALID(options_.bucketView || t.data.data != nullptr || t.data.count == 0, rank_,
               "OverlapEngine: tensor " << i << " '" << t.name << "' has a null data pointer");
    BC_INVALID(!options_.average || isFloatingPoint(t.data.dtype), rank_,
               "OverlapEngine: average needs floating-point gradients; tensor " << i << " '" << t.name << "' is "
                                                                                << toString(t.data.dtype));
  }
  op_ = options_.average ? ReduceOp::kAvg : ReduceOp::kSum;

  // Every rank must declare the same tensors: compare fingerprints before any
  // data moves (a mismatch would otherwise hang or mix unrelated buffers).
  std::vector<planner::TensorInfo> infos;
  for (const GradientTensor& t : tensors_) infos.push_back({t.data.count, t.data.dtype});
  // The mode is part of the fingerprint: a copy-mode rank would launch
  // different collectives on different memory (registered or not).
  const auto mine = static_cast<std::int64_t>(planner::tensorListSignature(infos) ^
                                              (options_.bucketView ? 0x9e3779b97f4a7c15ull : 0ull));
  std::vector<std::int64_t> all(static_cast<std::size_t>(comm_.size()));
  comm_.allgather(ConstView(&mine, 1, DataType::kInt64), View(all.data(), all.size(), DataType::kInt64));
  for (int r = 0; r < comm_.size(); ++r) {
    BC_CHECK(all[static_cast<std::size_t>(r)] == mine, ErrorCategory::kMismatch, rank_,
             "OverlapEngine: rank " << r << " declared different tensors (counts or dtypes) than rank " << rank_
                                    << " (" << tensors_.size() << " tensors here)");
  }

  // Gradients arrive in reverse declaration order (backward runs the layers
  // last to first), so that is the initial bucket order.
  std::vector<std::size_t> order(tensors_.size());
  std::iota(order.rbegin(), order.rend(), std::size_t{0});
  adoptOrder(order);
  if (options_.bucketView) allocateBucketArena();
  readyFlag_.assign(tensors_.size(), 0);

  if (!options_.timelinePath.empty()) {
    telemetry::TimelineOptions to;
    to.path = telemetry::rankTimelinePath(options_.timelinePath, rank_, comm_.size());
    to.pid = rank_;
    to.maxEvents = static_cast<std::size_t>(std::max<std::int64_t>(2, core::tunableInt(core::kTunableTimelineMaxEvents)));
    attachTimeline(std::make_shared<telemetry::Timeline>(to));
  }
  thread_ = std::thread([this] { threadMain(); });
}

OverlapEngine::Impl::~Impl() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  workCv_.notify_all();
  if (thread_.joinable()) thread_.join();
  inFlight_.clear();
  buckets_.clear();  // drop Work handles before the buffers they use
  try {
    releaseStaging();
    // Collective like the allocation: every rank destroys its engine at the
    // same point of the program.
    if (arena_ != nullptr) comm_.freeBuffer(arena_);
    arena_ = nullptr;
  } catch (...) {
    // A failed communicator may refuse; the memory goes with it at finalize.
  }
  if (timeline_) timeline_->flush();
}

void OverlapEngine::Impl::attachTimeline(std::shared_ptr<telemetry::Timeline> timeline) {
  std::lock_guard lock(mutex_);
  timeline_ = std::move(timeline);
  if (!timeline_) return;
  timeline_->nameProcess("rank " + std::to_string(rank_));
  timeline_->nameThread(kCallerTid, "caller (backward)");
  timeline_->nameThread(kEngineTid, "overlap engine: pack/unpack");
  timeline_->nameThread(kFillTid, "bucket fill");
  for (int s = 0; s < options_.stages; ++s) timeline_->nameThread(kLaneTid0 + s, "collective lane " + std::to_string(s));
}

void OverlapEngine::Impl::adoptOrder(const std::vector<std::size_t>& order) {
  std::vector<planner::TensorInfo> infos;
  for (std::size_t t : order) infos.push_back({tensors_[t].data.count, tensors_[t].data.dtype});
  planner::BucketOptions bo;
  bo.bucketBytes = options_.bucketBytes;
  bo.firstBucketBytes = options_.firstBucketBytes;
  plan_ = planner::planBuckets(infos, bo);
  // Slots name positions in `order`; map them back to declaration indices.
  for (planner::Bucket& b : plan_.buckets) {
    for (planner::BucketSlot& s : b.slots) s.tensor = order[s.tensor];
  }
  std::vector<planner::TensorPlace> placeOf(tensors_.size());
  for (std::size_t i = 0; i < order.size(); ++i) placeOf[order[i]] = plan_.placeOf[i];
  plan_.placeOf = std::move(placeOf);

  layout_.assign(plan_.buckets.size(), {});
  if (options_.bucketView) return;  // every bucket in place on the arena: no staging
  const int maxBuffers = options_.stages * (options_.bufferStrategy == BufferStrategy::kPingPong ? 2 : 1);
  std::vector<std::size_t> stagedBuckets;
  std::size_t largest = 0;
  for (std::size_t b = 0; b < plan_.buckets.size(); ++b) {
    const planner::Bucket& bucket = plan_.buckets[b];
    if (bucket.slots.size() <= 1) continue;  // in place: nothing to pack
    const std::size_t s = stagedBuckets.size();
    const auto buffers = static_cast<std::size_t>(maxBuffers);
    layout_[b].buffer = static_cast<int>(s % buffers);
    if (s >= buffers) layout_[b].previousUser = static_cast<std::ptrdiff_t>(stagedBuckets[s - buffers]);
    stagedBuckets.push_back(b);
    largest = std::max(largest, bucket.bytes());
  }
  // Never more buffers than staged buckets. Buffers start on 64-byte
  // boundaries (cache lines; the reduction kernels' vector loads).
  const int used = static_cast<int>(std::min<std::size_t>(stagedBuckets.size(), static_cast<std::size_t>(maxBuffers)));
  const std::size_t perBuffer = (largest + 63) / 64 * 64;
  if (used != bufferCount_ || perBuffer != bufferBytes_) {
    releaseStaging();
    bufferCount_ = used;
    if (used > 0) allocateStaging(perBuffer);
  }
}

void OverlapEngine::Impl::allocateStaging(std::size_t bytesPerBuffer) {
  bufferBytes_ = bytesPerBuffer;
  const std::size_t total = bytesPerBuffer * static_cast<std::size_t>(bufferCount_);
  if (options_.registeredBuffers) {
    // Collective: every rank reaches this point with the same plan.
    staging_ = comm_.allocateBuffer(total);
    stagingRegistered_ = true;
    return;
  }
  heapStaging_.assign(total, 0);
  staging_ = heapStaging_.data();
}

void OverlapEngine::Impl::releaseStaging() {
  if (stagingRegistered_ && staging_ != nullptr) comm_.freeBuffer(staging_);
  stagingRegistered_ = false;
  heapStaging_.clear();
  heapStaging_.shrink_to_fit();
  staging_ = nullptr;
  bufferBytes_ = 0;
}

void OverlapEngine::Impl::allocateBucketArena() {
  // Buckets start on 64-byte boundaries (cache lines; the reduction
  // kernels' vector loads), as the staging buffers do.
  std::size_t total = 0;
  bucketOffsetBytes_.clear();
  for (const planner::Bucket& b : plan_.buckets) {
    bucketOffsetBytes_.push_back(total);
    total += (b.bytes() + 63) / 64 * 64;
  }
  // Collective: every rank has the same plan (fingerprints checked above).
  if (total > 0) arena_ = static_cast<unsigned char*>(comm_.allocateBuffer(total));
  // The gradients' starting values, when the caller gave any (as DDP copies
  // .grad into the bucket when it first makes it a view).
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const View& v = tensors_[t].data;
    if (v.data != nullptr && v.count > 0) std::memcpy(tensorView(t).data, v.data, v.count * dataTypeSize(v.dtype));
  }
}

View OverlapEngine::Impl::bucketView(std::size_t bucket) const {
  const planner::Bucket& b = plan_.buckets[bucket];
  return View(arena_ == nullptr ? nullptr : arena_ + bucketOffsetBytes_[bucket], b.count, b.dtype);
}

View OverlapEngine::Impl::tensorView(std::size_t tensor) const {
  BC_INVALID(tensor < tensors_.size(), rank_,
             "tensorView: tensor " << tensor << " is out of range (" << tensors_.size() << " tensors declared)");
  if (!options_.bucketView) return tensors_[tensor].data;
  const planner::TensorPlace place = plan_.placeOf[tensor];
  const planner::BucketSlot& slot = plan_.buckets[place.bucket].slots[place.slot];
  const View bucket = bucketView(place.bucket);
  auto* base = static_cast<unsigned char*>(bucket.data);
  return View(base == nullptr ? nullptr : base + slot.offset * dataTypeSize(bucket.dtype), slot.count, bucket.dtype);
}

void* OverlapEngine::Impl::bufferData(int buffer) const {
  return static_cast<unsigned char*>(staging_) + static_cast<std::size_t>(buffer) * bufferBytes_;
}

void OverlapEngine::Impl::rethrowIfFailedLocked() const {
  if (error_) std::rethrow_exception(error_);
}

std::optional<std::chrono::milliseconds> OverlapEngine::Impl::effectiveTimeout() const {
  if (options_.timeout) return options_.timeout;
  const std::int64_t ms = core::tunableInt(core::kTunableTimeoutMs);
  if (ms > 0) return std::chrono::milliseconds(ms);
  return std::nullopt;
}

void OverlapEngine::Impl::beginBackward() {
  std::lock_guard lock(mutex_);
  rethrowIfFailedLocked();
  BC_INVALID(!finishing_, rank_, "beginBackward: finishBackward of the previous step has not returned");
  if (stepActive_) return;
  stepActive_ = true;
  times_ = {};
  times_.stepStartUs = telemetry::nowUs();
}

void OverlapEngine::Impl::markReady(std::size_t tensor) {
  {
    std::lock_guard lock(mutex_);
    rethrowIfFailedLocked();
    BC_INVALID(tensor < tensors_.size(), rank_,
               "markReady: tensor " << tensor << " is out of range (" << tensors_.size() << " tensors declared)");
    BC_INVALID(!finishing_, rank_, "markReady: tensor " << tensor << " '" << tensors_[tensor].name
                                                        << "' marked after finishBackward began");
    BC_INVALID(!readyFlag_[tensor], rank_,
               "markReady: tensor " << tensor << " '" << tensors_[tensor].name << "' marked twice in one step");
    const double now = telemetry::nowUs();
    if (!stepActive_) {
      stepActive_ = true;
      times_ = {};
      times_.stepStartUs = now;
    }
    readyFlag_[tensor] = 1;
    ++readyCount_;
    times_.lastReadyUs = now;
    readyQueue_.push_back(tensor);
    if (options_.bucketsFromFirstStep && stats_.steps == 0) arrival_.push_back(tensor);
  }
  workCv_.notify_one();
}

void OverlapEngine::Impl::finishBackward() {
  std::unique_lock lock(mutex_);
  rethrowIfFailedLocked();
  if (readyCount_ != tensors_.size()) {
    const auto missing = std::find(readyFlag_.begin(), readyFlag_.end(), 0) - readyFlag_.begin();
    BC_INVALID(false, rank_,
               "finishBackward: " << (tensors_.size() - readyCount_) << " tensors were not marked ready, the first is "
                                  << missing << " '" << tensors_[static_cast<std::size_t>(missing)].name << "'");
  }
  if (!stepActive_) times_.stepStartUs = telemetry::nowUs();  // no tensors at all
  times_.waitStartUs = telemetry::nowUs();
  finishing_ = true;
  workCv_.notify_one();
  auto done = [&] { return stepComplete_ || error_ || plan_.buckets.empty(); };
  if (const auto timeout = effectiveTimeout()) {
    if (!doneCv_.wait_for(lock, *timeout, done)) {
      // The engine thread keeps its own deadline per collective; record the
      // timeout here too so every later call reports it.
      error_ = std::make_exception_ptr(Error(
          ErrorCategory::kTimeout, rank_,
          "finishBackward: buckets not reduced after " + std::to_string(timeout->count()) + " ms (" +
              std::to_string(times_.comm.size()) + " of " + std::to_string(plan_.buckets.size()) +
              " done); the communicator is unusable"));
    }
  } else {
    doneCv_.wait(lock, done);
  }
  rethrowIfFailedLocked();
  times_.waitEndUs = telemetry::nowUs();
  times_.buckets = plan_.buckets.size();
  times_.bytes = plan_.bucketBytes;
  const OverlapStepStats step = telemetry::computeStepStats(times_);
  telemetry::accumulate(stats_, step);
  if (timeline_) {
    timeline_->complete("finishBackward wait", "wait", kCallerTid, times_.waitStartUs,
                        times_.waitEndUs - times_.waitStartUs, {{"step", stats_.steps}});
    timeline_->flush();
  }
  if (options_.logSteps && rank_ == 0) std::fprintf(stderr, "%s\n", telemetry::formatStepLine(stats_.steps, step).c_str());
  std::fill(readyFlag_.begin(), readyFlag_.end(), 0);
  readyCount_ = 0;
  stepActive_ = false;
  finishing_ = false;
  stepComplete_ = false;
  if (options_.bucketsFromFirstStep && stats_.steps == 1) {
    // As DDP: rebuild the buckets in the order gradients really arrived,
    // taking rank 0's order so every rank builds the same plan. The engine
    // thread is idle between steps, so the plan may change here.
    std::vector<std::int64_t> order(arrival_.begin(), arrival_.end());
    lock.unlock();
    comm_.broadcast(View(order.data(), order.size(), DataType::kInt64), 0);
    lock.lock();
    std::vector<std::size_t> adopted(order.begin(), order.end());
    adoptOrder(adopted);
    arrival_.clear();
  }
}

OverlapStats OverlapEngine::Impl::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::size_t OverlapEngine::Impl::bucketCount() const {
  std::lock_guard lock(mutex_);
  return plan_.buckets.size();
}

std::string OverlapEngine::Impl::describeBuckets() const {
  std::lock_guard lock(mutex_);
  return planner::describePlan(plan_);
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

void engine::attachTimeline(OverlapEngine& engine, std::shared_ptr<telemetry::Timeline> timeline) {
  detail::implOf(engine).attachTimeline(std::move(timeline));
}

}  // namespace boostcomm
