// The engine thread: takes ready gradients, packs them into their bucket's
// staging buffer, launches bucket collectives in bucket order, completes them
// in the same order and unpacks (bucket-view mode: every bucket is in place
// on the arena, so there is nothing to pack or unpack). Nothing here blocks
// on the network: the thread polls its in-flight collectives (Work::test progresses every
// collective of the communicator) between packs, and sleeps on a condition
// variable when there is nothing to poll.
//
// Failure rule: no exception leaves threadMain. The first one becomes the
// engine's error; finishBackward and every later call rethrow it.
#include <algorithm>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "engine/engine_impl.h"

namespace boostcomm {

void OverlapEngine::Impl::threadMain() {
  std::vector<std::size_t> incoming;
  bool finishingSeen = false;
  try {
    while (true) {
      {
        std::unique_lock lock(mutex_);
        // Only in-flight collectives need polling; everything else that can
        // unblock us (a gradient, finishBackward, shutdown) notifies.
        if (inFlight_.empty()) {
          workCv_.wait(lock, [&] { return stop_ || !readyQueue_.empty() || finishing_ != finishingSeen; });
        }
        if (stop_) break;
        incoming.assign(readyQueue_.begin(), readyQueue_.end());
        readyQueue_.clear();
        finishingSeen = finishing_;
      }
      if (!localStepActive_) {
        if (incoming.empty() && !finishingSeen) continue;
        startStepLocal();
      }
      takeReady(incoming);
      // Drain every consequence (a pack frees a launch, a completion frees a
      // buffer for the next pack ...) before sleeping again.
      while (packAvailable() | launchReady(finishingSeen) | completeOldest()) {
      }
      if (completed_ == buckets_.size() && finishingSeen) {
        localStepActive_ = false;
        {
          std::lock_guard lock(mutex_);
          stepComplete_ = true;
        }
        doneCv_.notify_all();
        continue;
      }
      if (!inFlight_.empty()) std::this_thread::yield();
    }
  } catch (...) {
    fail(std::current_exception());
    return;
  }
  abandonInFlight();
}

void OverlapEngine::Impl::abandonInFlight() {
  // Shut down mid-step (the caller gave up, e.g. after finishBackward timed
  // out): collectives cannot be cancelled, so wait for them until their
  // deadline; a timeout there marks the communicator failed, so its
  // finalize does not wait for peers that will never come.
  for (std::size_t b : inFlight_) {
    EngineBucket& eb = buckets_[b];
    if (!eb.work.valid()) continue;
    try {
      if (eb.deadlineUs > 0) {
        const double leftMs = std::max(1.0, (eb.deadlineUs - telemetry::nowUs()) / 1e3);
        eb.work.wait(std::chrono::milliseconds(static_cast<long long>(leftMs)));
      } else {
        eb.work.wait();
      }
    } catch (...) {
      return;  // the communicator has failed its remaining work too
    }
  }
}

void OverlapEngine::Impl::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(error);
  }
  doneCv_.notify_all();
}

void OverlapEngine::Impl::startStepLocal() {
  buckets_.assign(plan_.buckets.size(), {});
  inFlight_.clear();
  nextLaunch_ = 0;
  completed_ = 0;
  localStepActive_ = true;
}

void OverlapEngine::Impl::takeReady(const std::vector<std::size_t>& tensors) {
  for (std::size_t t : tensors) {
    const planner::TensorPlace place = plan_.placeOf[t];
    EngineBucket& b = buckets_[place.bucket];
    const double now = telemetry::nowUs();
    if (b.ready == 0) b.firstReadyUs = now;
    ++b.ready;
    if (layout_[place.bucket].buffer >= 0) b.toPack.push_back(place.slot);
    const planner::Bucket& bucket = plan_.buckets[place.bucket];
    if (timeline_ && b.ready == bucket.slots.size()) {
      timeline_->complete("fill " + bucketLabel(place.bucket), "fill", kFillTid, b.firstReadyUs, now - b.firstReadyUs,
                          {{"bucket", place.bucket}, {"tensors", bucket.slots.size()}, {"bytes", bucket.bytes()}});
    }
  }
}

bool OverlapEngine::Impl::packAvailable() {
  bool packed = false;
  for (std::size_t b = completed_; b < buckets_.size(); ++b) {
    EngineBucket& eb = buckets_[b];
    if (eb.toPack.empty()) continue;
    const std::ptrdiff_t previous = layout_[b].previousUser;
    if (previous >= 0 && !buckets_[static_cast<std::size_t>(previous)].done) continue;  // buffer still busy
    const planner::Bucket& bucket = plan_.buckets[b];
    const std::size_t elementBytes = dataTypeSize(bucket.dtype);
    auto* base = static_cast<unsigned char*>(bufferData(layout_[b].buffer));
    for (std::size_t slotIndex : eb.toPack) {
      const planner::BucketSlot& slot = bucket.slots[slotIndex];
      const GradientTensor& tensor = tensors_[slot.tensor];
      const double startUs = telemetry::nowUs();
      if (slot.count > 0) std::memcpy(base + slot.offset * elementBytes, tensor.data.data, slot.count * elementBytes);
      ++eb.packed;
      if (timeline_) {
        timeline_->complete("pack " + tensor.name, "pack", kEngineTid, startUs, telemetry::nowUs() - startUs,
                            {{"bucket", b}, {"tensor", slot.tensor}, {"bytes", slot.count * elementBytes}});
      }
      progressOnce();  // keep the wire busy between copies
    }
    eb.toPack.clear();
    packed = true;
  }
  return packed;
}

bool OverlapEngine::Impl::bucketComplete(std::size_t b) const {
  const EngineBucket& eb = buckets_[b];
  const std::size_t slots = plan_.buckets[b].slots.size();
  return layout_[b].buffer >= 0 ? eb.packed == slots : eb.ready == slots;
}

bool OverlapEngine::Impl::launchReady(bool finishing) {
  if (!options_.enable && !finishing) return false;
  bool launched = false;
  while (nextLaunch_ < buckets_.size() && inFlight_.size() < static_cast<std::size_t>(options_.stages) &&
         bucketComplete(nextLaunch_)) {
    launch(nextLaunch_++);
    launched = true;
  }
  return launched;
}

void OverlapEngine::Impl::launch(std::size_t b) {
  if (options_.beforeLaunch) options_.beforeLaunch(b);
  const planner::Bucket& bucket = plan_.buckets[b];
  EngineBucket& eb = buckets_[b];
  View view = options_.bucketView         ? bucketView(b)
              : layout_[b].buffer >= 0 ? View(bufferData(layout_[b].buffer), bucket.count, bucket.dtype)
                                       : tensors_[bucket.slots.front().tensor].data;
  eb.launchUs = telemetry::nowUs();
  const auto timeout = effectiveTimeout();
  eb.deadlineUs = timeout ? eb.launchUs + 1e3 * static_cast<double>(timeout->count()) : 0;
  // An empty bucket (only empty tensors) has nothing to reduce: every rank
  // skips it alike.
  if (view.count > 0) eb.work = comm_.allreduceAsync(view, view, op_, options_.call);
  eb.launched = true;
  inFlight_.push_back(b);
}

void OverlapEngine::Impl::progressOnce() {
  if (!inFlight_.empty()) {
    Work& work = buckets_[inFlight_.front()].work;
    if (work.valid()) work.test();
  }
}

bool OverlapEngine::Impl::completeOldest() {
  if (inFlight_.empty()) return false;
  const std::size_t b = inFlight_.front();
  EngineBucket& eb = buckets_[b];
  if (eb.work.valid() && !eb.work.test()) {
    if (eb.deadlineUs == 0 || telemetry::nowUs() < eb.deadlineUs) return false;
    // Past the deadline: let the communicator time the collective out
    // itself, so it marks itself unusable and fails its in-flight work
    // (otherwise its finalize would wait forever for a peer that is gone).
    try {
      eb.work.wait(std::chrono::milliseconds(1));
    } catch (const Error& e) {
      core::raise(ErrorCategory::kTimeout, rank_,
                  "OverlapEngine: " + bucketLabel(b) + " (" + std::to_string(plan_.buckets[b].bytes()) +
                      " bytes) not reduced before the deadline: " + e.detail());
    }
  }
  const double endUs = telemetry::nowUs();
  if (timeline_) {
    const planner::Bucket& bucket = plan_.buckets[b];
    const int lane = kLaneTid0 + static_cast<int>(b % static_cast<std::size_t>(options_.stages));
    timeline_->complete("allreduce " + bucketLabel(b), "collective", lane, eb.launchUs, endUs - eb.launchUs,
                        {{"bucket", b},
                         {"bytes", bucket.bytes()},
                         {"tensors", bucket.slots.size()},
                         {"first", tensors_[bucket.slots.front().tensor].name},
                         {"last", tensors_[bucket.slots.back().tensor].name},
                         {"algorithm", eb.work.valid() ? eb.work.algorithm() : "none"},
                         {"in_place", layout_[b].buffer < 0}});
  }
  if (layout_[b].buffer >= 0) unpack(b);
  eb.done = true;
  eb.work = Work();
  ++completed_;
  inFlight_.pop_front();
  std::lock_guard lock(mutex_);
  times_.comm.push_back({eb.launchUs, endUs});
  return true;
}

void OverlapEngine::Impl::unpack(std::size_t b) {
  const double startUs = telemetry::nowUs();
  const planner::Bucket& bucket = plan_.buckets[b];
  const std::size_t elementBytes = dataTypeSize(bucket.dtype);
  const auto* base = static_cast<const unsigned char*>(bufferData(layout_[b].buffer));
  for (const planner::BucketSlot& slot : bucket.slots) {
    if (slot.count > 0) std::memcpy(tensors_[slot.tensor].data.data, base + slot.offset * elementBytes, slot.count * elementBytes);
  }
  if (timeline_) {
    timeline_->complete("unpack " + bucketLabel(b), "unpack", kEngineTid, startUs, telemetry::nowUs() - startUs,
                        {{"bucket", b}, {"bytes", bucket.bytes()}});
  }
}

std::string OverlapEngine::Impl::bucketLabel(std::size_t b) const { return "bucket " + std::to_string(b); }

}  // namespace boostcomm
