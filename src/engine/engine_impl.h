// OverlapEngine::Impl: state shared by the caller's thread (markReady,
// finishBackward; overlap_engine.cc) and the engine thread (packing,
// launching, completing buckets; engine_thread.cc).
//
// Terms: a bucket is *staged* when it holds several tensors and runs on a
// staging buffer (pack = copy-in, unpack = copy-out), *in place* when it is a
// single tensor reduced where it lies. Staged bucket s (in bucket order) uses
// staging buffer s % buffers, where buffers = stages (single) or 2 * stages
// (pingpong); it may pack once the previous user of that buffer unpacked.
// In bucket-view mode every bucket is *in place* on its own range of one
// registered arena (bucketOffsetBytes_), and the tensors live there.
//
// Invariants:
// - buckets launch strictly in order (nextLaunch_), at most `stages` in flight;
// - buckets complete (unpack) in launch order;
// - the plan changes only between steps (bucketsFromFirstStep), when the
//   engine thread is idle; the thread re-reads it at the start of each step;
// - every field marked [mutex_] is only touched under mutex_; the engine
//   thread's own bookkeeping (EngineBucket) is only touched by that thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "boostcomm/overlap.h"
#include "planner/bucketing.h"
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
  telemetry::Timeline* timeline() const { return timeline_.get(); }

 private:
  // Timeline threads (tid): the caller, the engine thread, bucket fill
  // intervals, and one lane per stage for collectives (they overlap packs).
  static constexpr int kCallerTid = 0;
  static constexpr int kEngineTid = 1;
  static constexpr int kFillTid = 2;
  static constexpr int kLaneTid0 = 10;

  struct BucketLayout {
    int buffer = -1;                     // staging buffer; -1 = in place
    std::ptrdiff_t previousUser = -1;    // bucket that used this buffer before, this step
  };
  struct EngineBucket {
    std::size_t ready = 0;
    std::size_t packed = 0;
    std::vector<std::size_t> toPack;  // slots ready but not yet copied in
    bool launched = false;
    bool done = false;
    Work work;
    double firstReadyUs = 0;
    double launchUs = 0;
    double deadlineUs = 0;
  };

  // Plan (changes only between steps).
  void adoptOrder(const std::vector<std::size_t>& order);
  void allocateStaging(std::size_t bytesPerBuffer);
  void releaseStaging();
  void* bufferData(int buffer) const;
  void allocateBucketArena();
  View bucketView(std::size_t bucket) const;  // the memory bucket `bucket` is reduced on

  // Engine thread (engine_thread.cc).
  void threadMain();
  void startStepLocal();
  void takeReady(const std::vector<std::size_t>& tensors);
  bool packAvailable();
  bool launchReady(bool finishing);
  bool completeOldest();
  void progressOnce();
  void launch(std::size_t bucket);
  void unpack(std::size_t bucket);
  bool bucketComplete(std::size_t bucket) const;
  std::string bucketLabel(std::size_t bucket) const;
  void fail(std::exception_ptr error);
  void abandonInFlight();

  void rethrowIfFailedLocked() const;
  std::optional<std::chrono::milliseconds> effectiveTimeout() const;

  Communicator& comm_;
  std::vector<GradientTensor> tensors_;
  OverlapOptions options_;
  int rank_ = 0;
  ReduceOp op_ = ReduceOp::kSum;

  planner::BucketPlan plan_;
  std::vector<BucketLayout> layout_;
  int bufferCount_ = 0;
  std::size_t bufferBytes_ = 0;
  void* staging_ = nullptr;        // bufferCount_ * bufferBytes_
  bool stagingRegistered_ = false;
  std::vector<unsigned char> heapStaging_;
  // Bucket-view mode: one registered arena holding every bucket (one
  // allocateBuffer, not one per bucket: each registration costs a shared
  // window and a collective), bucket b at bucketOffsetBytes_[b].
  unsigned char* arena_ = nullptr;
  std::vector<std::size_t> bucketOffsetBytes_;

  mutable std::mutex mutex_;
  std::condition_variable workCv_;  // wakes the engine thread
  std::condition_variable doneCv_;  // wakes finishBackward
  std::vector<char> readyFlag_;           // [mutex_] per tensor, this step
  std::vector<std::size_t> readyQueue_;   // [mutex_] marked, not yet taken by the engine thread
  std::vector<std::size_t> arrival_;      // [mutex_] markReady order of step 1 (bucketsFromFirstStep)
  std::size_t readyCount_ = 0;            // [mutex_]
  bool stepActive_ = false;               // [mutex_]
  bool finishing_ = false;                // [mutex_]
  bool stepComplete_ = false;             // [mutex_]
  bool stop_ = false;                     // [mutex_]
  std::exception_ptr error_;              // [mutex_]
  telemetry::StepTimes times_;            // [mutex_]
  OverlapStats stats_;                    // [mutex_]

  // Engine thread only.
  std::vector<EngineBucket> buckets_;
  std::deque<std::size_t> inFlight_;
  std::size_t nextLaunch_ = 0;
  std::size_t completed_ = 0;
  bool localStepActive_ = false;

  std::shared_ptr<telemetry::Timeline> timeline_;
  std::thread thread_;
};

namespace engine {
// For tools that add their own events (the replay's emulated compute) to the
// engine's timeline, or share one timeline between engines.
void attachTimeline(OverlapEngine& engine, std::shared_ptr<telemetry::Timeline> timeline);
}  // namespace engine

}  // namespace boostcomm
