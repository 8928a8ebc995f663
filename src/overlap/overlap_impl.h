// OverlapEngine::Impl: the overlap driver of the bucket component
// (src/fusion/bucket_set.h) on the communicator's progress engine. It has no
// thread of its own: markReady (the caller, during backward) packs ready
// gradients and launches full buckets; each bucket's completion callback (on
// the progress thread, or on the caller inside finishBackward) unpacks it,
// packs the gradients that were waiting for its staging buffer and launches
// what that unblocked.
//
// Invariants:
// - buckets launch strictly in bucket order (nextLaunch_), at most `stages`
//   in flight, by one thread at a time (launching_), so every rank issues the
//   same collectives in the same order whatever thread gets there first;
// - a staged bucket packs only after the previous user of its staging
//   buffer unpacked (BucketSet::previousUser);
// - decisions are taken under mutex_, copies and Communicator calls are made
//   without it (a Communicator call may run completion callbacks, which take
//   mutex_, on the calling thread);
// - the plan changes only between steps (bucketsFromFirstStep), when nothing
//   is in flight.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "boostcomm/overlap.h"
#include "fusion/bucket_set.h"
#include "fusion/error_feedback.h"
#include "telemetry/stats.h"
#include "telemetry/timeline.h"

namespace boostcomm {

class OverlapEngine::Impl {
 public:
  Impl(Communicator& comm, std::vector<GradientTensor> tensors, OverlapOptions options);
  ~Impl();

  void beginBackward();
  void markReady(std::size_t tensor);
  void finishBackward();
  OverlapStats stats() const;
  std::size_t bucketCount() const;
  std::string describeBuckets() const;
  View tensorView(std::size_t tensor) const;
  void attachTimeline(std::shared_ptr<telemetry::Timeline> timeline);

 private:
  // Timeline threads (tid): the caller, pack/unpack, bucket fill intervals,
  // and one lane per stage for collectives (they overlap packs).
  static constexpr int kCallerTid = 0;
  static constexpr int kCopyTid = 1;
  static constexpr int kFillTid = 2;
  static constexpr int kLaneTid0 = 10;

  struct StepBucket {
    std::size_t ready = 0;
    std::size_t packed = 0;
    std::vector<std::size_t> toPack;  // slots ready, not yet taken for packing
    bool launched = false;
    bool done = false;
    Work work;
    double firstReadyUs = 0;
    double launchUs = 0;
  };
  using Lock = std::unique_lock<std::mutex>;

  static fusion::BucketSetOptions bucketOptions(const OverlapOptions& options);
  void startStepLocked(double nowUs);
  // Packs and launches whatever is possible now; copies and launches run
  // with `lock` released. Returns with it held.
  void pump(Lock& lock);
  bool launchable(std::size_t bucket) const;
  void launch(std::size_t bucket);
  // Completion callback of bucket `bucket` (any thread, no Communicator lock).
  void bucketDone(std::size_t bucket, std::exception_ptr error);
  void failLocked(std::exception_ptr error);
  // Waits, driving progress, until the step completed or failed (or the
  // deadline passed); launchedOnly: until no bucket is in flight (shutdown).
  void waitForStep(Lock& lock, bool launchedOnly = false);
  void rethrowIfFailedLocked() const;
  std::optional<std::chrono::milliseconds> effectiveTimeout() const;
  std::string bucketLabel(std::size_t bucket) const { return "bucket " + std::to_string(bucket); }

  Communicator& comm_;
  OverlapOptions options_;
  int rank_ = 0;
  fusion::BucketSet buckets_;
  fusion::ErrorFeedback feedback_;  // options_.errorFeedback (launch runs on one thread at a time)
  detail::Progress progress_;

  mutable std::mutex mutex_;
  std::condition_variable doneCv_;  // a bucket completed, or the step failed
  std::vector<char> readyFlag_;     // [mutex_] per tensor, this step
  std::vector<std::size_t> arrival_;  // [mutex_] markReady order of step 1 (bucketsFromFirstStep)
  std::size_t readyCount_ = 0;        // [mutex_]
  std::vector<StepBucket> step_;      // [mutex_] per bucket, this step
  std::size_t nextLaunch_ = 0;        // [mutex_]
  std::size_t inFlight_ = 0;          // [mutex_] launched, callback not finished
  std::size_t completed_ = 0;         // [mutex_]
  std::size_t copying_ = 0;           // [mutex_] packs running outside the lock
  bool launching_ = false;            // [mutex_] a thread is launching (the launch-order token)
  bool stepActive_ = false;           // [mutex_]
  bool finishing_ = false;            // [mutex_]
  std::exception_ptr error_;          // [mutex_]
  telemetry::StepTimes times_;        // [mutex_]
  OverlapStats stats_;                // [mutex_]

  std::shared_ptr<telemetry::Timeline> timeline_;
};

namespace overlap {
// For tools that add their own events (the replay's emulated compute) to the
// engine's timeline, or share one timeline between engines.
void attachTimeline(OverlapEngine& engine, std::shared_ptr<telemetry::Timeline> timeline);
}  // namespace overlap

}  // namespace boostcomm
