// The overlap engine's step machinery: packing ready gradients, launching
// full buckets in order, and completing them (definitions in overlap_impl.h).
//
// Every decision is taken under mutex_; every copy and Communicator call is
// made with it released, because a Communicator call may run completion
// callbacks on the calling thread, and bucketDone takes mutex_.
//
// Failure rule: an error (a collective's, a timeout, a beforeLaunch hook's)
// becomes the engine's error; finishBackward and every later call rethrow it.
#include <algorithm>

#include "api/communicator_many.h"
#include "core/check.h"
#include "overlap/overlap_impl.h"

namespace boostcomm {

bool OverlapEngine::Impl::launchable(std::size_t b) const {
  const StepBucket& sb = step_[b];
  const std::size_t slots = buckets_.plan().buckets[b].slots.size();
  return buckets_.staged(b) ? sb.packed == slots : sb.ready == slots;
}

void OverlapEngine::Impl::pump(Lock& lock) {
  struct Pack {
    std::size_t bucket;
    std::vector<std::size_t> slots;
  };
  std::vector<Pack> packs;
  while (!error_) {
    // Slots whose staging buffer is free (its previous user unpacked).
    packs.clear();
    for (std::size_t b = 0; b < step_.size(); ++b) {
      StepBucket& sb = step_[b];
      if (sb.toPack.empty()) continue;
      const std::ptrdiff_t previous = buckets_.previousUser(b);
      if (previous >= 0 && !step_[static_cast<std::size_t>(previous)].done) continue;
      packs.push_back({b, std::move(sb.toPack)});
      sb.toPack.clear();
    }
    // The next buckets in order, if this thread may launch (one at a time).
    std::vector<std::size_t> launches;
    if (!launching_ && (options_.enable || finishing_)) {
      std::size_t next = nextLaunch_;
      while (next < step_.size() && inFlight_ + launches.size() < static_cast<std::size_t>(options_.stages) &&
             launchable(next)) {
        launches.push_back(next++);
      }
      if (!launches.empty()) {
        nextLaunch_ = next;
        launching_ = true;
      }
    }
    if (packs.empty() && launches.empty()) return;
    copying_ += packs.size();
    lock.unlock();
    std::exception_ptr error;
    std::size_t launchedHere = 0;
    try {
      for (const Pack& p : packs) {
        for (std::size_t slot : p.slots) {
          const double startUs = telemetry::nowUs();
          buckets_.packSlot(p.bucket, slot, progress_);
          if (timeline_) {
            const std::size_t tensor = buckets_.plan().buckets[p.bucket].slots[slot].tensor;
            timeline_->complete("pack " + buckets_.name(tensor), "pack", kCopyTid, startUs,
                                telemetry::nowUs() - startUs, {{"bucket", p.bucket}, {"tensor", tensor}});
          }
        }
      }
      for (std::size_t b : launches) {
        launch(b);
        ++launchedHere;
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    copying_ -= packs.size();
    for (const Pack& p : packs) step_[p.bucket].packed += p.slots.size();
    if (!launches.empty()) {
      launching_ = false;
      // Buckets taken but not launched (an error stopped us) never will be.
      nextLaunch_ -= launches.size() - launchedHere;
    }
    if (error) failLocked(error);
    doneCv_.notify_all();
  }
}

void OverlapEngine::Impl::launch(std::size_t b) {
  if (options_.beforeLaunch) options_.beforeLaunch(b);
  if (options_.errorFeedback) {
    const planner::Bucket& bucket = buckets_.plan().buckets[b];
    feedback_.apply(buckets_, b, comm_.wireFormatOf(bucket.count * dataTypeSize(bucket.dtype), bucket.dtype, options_.call));
  }
  Work work;
  // An empty bucket (only empty tensors) has nothing to reduce: every rank
  // skips it alike. Segment lists were agreed at construction (BucketSet).
  if (buckets_.segmentList()) {
    if (buckets_.segmentCount(b) > 0)
      work = detail::allreduceListAsync(comm_, buckets_.segments(b), buckets_.plan().buckets[b].dtype, buckets_.op(),
                                        options_.call);
  } else {
    const View view = buckets_.region(b);
    if (view.count > 0) work = comm_.allreduceAsync(view, view, buckets_.op(), options_.call);
  }
  {
    Lock lock(mutex_);
    StepBucket& sb = step_[b];
    sb.launched = true;
    sb.launchUs = telemetry::nowUs();
    sb.work = work;
    ++inFlight_;
  }
  if (work.valid()) {
    work.onComplete([this, b](std::exception_ptr error) { bucketDone(b, error); });
  } else {
    bucketDone(b, nullptr);
  }
}

void OverlapEngine::Impl::bucketDone(std::size_t b, std::exception_ptr error) {
  const double endUs = telemetry::nowUs();
  if (!error) {
    try {
      const double startUs = telemetry::nowUs();
      buckets_.unpack(b, progress_);
      if (timeline_ && buckets_.staged(b)) {
        timeline_->complete("unpack " + bucketLabel(b), "unpack", kCopyTid, startUs, telemetry::nowUs() - startUs,
                            {{"bucket", b}, {"bytes", buckets_.plan().buckets[b].bytes()}});
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  Lock lock(mutex_);
  StepBucket& sb = step_[b];
  if (timeline_) {
    const planner::Bucket& bucket = buckets_.plan().buckets[b];
    const int lane = kLaneTid0 + static_cast<int>(b % static_cast<std::size_t>(options_.stages));
    timeline_->complete("allreduce " + bucketLabel(b), "collective", lane, sb.launchUs, endUs - sb.launchUs,
                        {{"bucket", b},
                         {"bytes", bucket.bytes()},
                         {"tensors", bucket.slots.size()},
                         {"first", buckets_.name(bucket.slots.front().tensor)},
                         {"last", buckets_.name(bucket.slots.back().tensor)},
                         {"algorithm", sb.work.valid() ? sb.work.algorithm() : "none"},
                         {"in_place", !buckets_.staged(b)}});
  }
  times_.comm.push_back({sb.launchUs, endUs});
  sb.done = true;
  sb.work = Work();
  --inFlight_;
  ++completed_;
  if (error) {
    if (error_ == nullptr) {
      try {
        std::rethrow_exception(error);
      } catch (const Error& e) {
        error = std::make_exception_ptr(Error(e.category(), rank_,
                                              "OverlapEngine: " + bucketLabel(b) + " (" +
                                                  std::to_string(buckets_.plan().buckets[b].bytes()) +
                                                  " bytes) failed: " + e.detail()));
      } catch (...) {
      }
    }
    failLocked(error);
  } else {
    pump(lock);  // its buffer is free, a stage is free
  }
  doneCv_.notify_all();
}

void OverlapEngine::Impl::failLocked(std::exception_ptr error) {
  if (!error_) error_ = std::move(error);
}

void OverlapEngine::Impl::waitForStep(Lock& lock, bool launchedOnly) {
  using Clock = std::chrono::steady_clock;
  const auto timeout = effectiveTimeout();
  const auto deadline = timeout ? std::optional(Clock::now() + *timeout) : std::nullopt;
  auto finished = [&] {
    if (launchedOnly) return inFlight_ == 0;
    return error_ || !stepActive_ || completed_ == step_.size();
  };
  while (!finished()) {
    if (deadline && Clock::now() >= *deadline && !error_) {
      error_ = std::make_exception_ptr(Error(
          ErrorCategory::kTimeout, rank_,
          "finishBackward: buckets not reduced after " + std::to_string(timeout->count()) + " ms (" +
              std::to_string(completed_) + " of " + std::to_string(step_.size()) + " done); the communicator is unusable"));
      if (!launchedOnly) break;
    }
    // Drive the oldest bucket in flight ourselves: the caller has nothing
    // else to do, and without a progress thread nobody else would.
    Work oldest;
    for (const StepBucket& sb : step_) {
      if (sb.launched && !sb.done && sb.work.valid()) {
        oldest = sb.work;
        break;
      }
    }
    if (!oldest.valid()) {
      // A callback is unpacking or a pack is copying on another thread.
      doneCv_.wait_for(lock, std::chrono::milliseconds(1));
      continue;
    }
    lock.unlock();
    std::exception_ptr error;
    try {
      std::optional<std::chrono::milliseconds> left;
      if (deadline)
        left = std::max(std::chrono::milliseconds(1),
                        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()));
      oldest.wait(left);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      // The collective's callback reports it too (with its bucket's name);
      // a timeout here fails the communicator, whose callbacks then run.
      doneCv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return error_ != nullptr; });
      failLocked(error);
    } else if (!finished()) {
      // That bucket is complete but its callback may still be unpacking on
      // the progress thread: sleep until a callback reports, not spin.
      doneCv_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
  rethrowIfFailedLocked();
}

}  // namespace boostcomm
