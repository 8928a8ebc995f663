// GradientGroup (include/boostcomm/gradient_group.h): a driver of the bucket
// component (src/fusion/bucket_set.h) on the communicator's progress engine.
//
// One step, for buckets 0..B-1: pack k (packed mode; the collectives already
// in flight are progressed between 1 MiB pieces) -> launch bucket k's
// collective (segment-list mode, the default: an allreduce over its tensors
// in place; else allreduceAsync of its region) with a completion callback
// that unpacks k (packed mode only). The callback runs on whichever
// thread completes bucket k: the caller inside wait() or a later pack, or the
// communicator's progress thread when it is on, which then unpacks k while
// the caller still packs k+1. wait() returns when every bucket's callback
// has run. Bucket-view mode is the same loop with pack and unpack empty.
#include "boostcomm/gradient_group.h"

#include <condition_variable>
#include <mutex>

#include "api/communicator_many.h"
#include "core/check.h"
#include "fusion/bucket_set.h"
#include "fusion/error_feedback.h"

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

  View tensorView(std::size_t index) const { return buckets_.tensorView(index); }
  std::size_t tensorCount() const { return buckets_.tensorCount(); }
  GradientGroupStats stats() const { return stats_; }
  std::string describe() const;

 private:
  static fusion::BucketSetOptions bucketOptions(const GradientGroupOptions& options);
  // Completion callback of bucket k (any thread, without the communicator's lock).
  void bucketDone(std::size_t bucket, std::exception_ptr error);
  // After every launched Work completed: waits for their callbacks, ends the step.
  void finishStep();
  // Waits until every launched bucket's callback has run (they all do: a
  // failure completes every in-flight operation with the error), driving
  // progress meanwhile; after it nothing of this step touches the buckets.
  void settle();
  void checkStep(std::uint64_t step) const;

  Communicator& comm_;
  GradientGroupOptions options_;
  fusion::BucketSet buckets_;
  fusion::ErrorFeedback feedback_;  // options_.errorFeedback
  Progress progress_;
  std::vector<Work> works_;  // per bucket, the current step's (invalid: nothing launched)
  bool inFlight_ = false;
  std::uint64_t step_ = 0;
  GradientGroupStats stats_;

  std::mutex doneMutex_;
  std::condition_variable doneCv_;
  std::size_t launched_ = 0;    // [doneMutex_] this step
  std::size_t completed_ = 0;   // [doneMutex_] callbacks run this step
  std::exception_ptr error_;    // [doneMutex_] first failure of this step
};

fusion::BucketSetOptions GradientGroupImpl::bucketOptions(const GradientGroupOptions& options) {
  fusion::BucketSetOptions o;
  o.bucketBytes = options.bucketBytes;
  o.firstBucketBytes = options.firstBucketBytes;
  o.average = options.average;
  o.bucketView = options.bucketView;
  o.segmentList = !options.bucketView && !options.packBuckets;
  if (options.bucketView && options.packBuckets) o.driverError = "bucketView and packBuckets cannot be combined";
  return o;
}

GradientGroupImpl::GradientGroupImpl(Communicator& comm, std::vector<View> tensors, GradientGroupOptions options)
    : comm_(comm),
      options_(std::move(options)),
      buckets_(comm, std::move(tensors), {}, bucketOptions(options_), "GradientGroup") {
  progress_ = [this] { comm_.progress(); };
  const planner::BucketPlan& plan = buckets_.plan();
  works_.resize(plan.buckets.size());
  stats_.tensors = buckets_.tensorCount();
  stats_.buckets = plan.buckets.size();
  for (const planner::Bucket& b : plan.buckets) stats_.collectivesPerStep += b.count > 0 ? 1 : 0;
  stats_.perTensorCollectives = buckets_.tensorCount();
  stats_.payloadBytes = plan.payloadBytes;
  stats_.bucketBytes = plan.bucketBytes;
  stats_.bucketLimitBytes = buckets_.options().bucketBytes;
}

GradientGroupImpl::~GradientGroupImpl() {
  try {
    if (inFlight_) wait(step_, std::nullopt);
  } catch (...) {
    // A destructor must not throw; the communicator reports the failure on its next call.
  }
  settle();  // no callback may still be unpacking into the buckets freed next
}

void GradientGroupImpl::settle() {
  std::unique_lock lock(doneMutex_);
  while (completed_ != launched_) {
    if (doneCv_.wait_for(lock, std::chrono::milliseconds(1), [&] { return completed_ == launched_; })) break;
    lock.unlock();
    comm_.progress();
    lock.lock();
  }
}

void GradientGroupImpl::bucketDone(std::size_t bucket, std::exception_ptr error) {
  if (!error) {
    try {
      buckets_.unpack(bucket, progress_);
    } catch (...) {
      error = std::current_exception();
    }
  }
  std::lock_guard lock(doneMutex_);
  if (error && !error_) error_ = error;
  ++completed_;
  doneCv_.notify_all();
}

void GradientGroupImpl::start() {
  BC_INVALID(!inFlight_, comm_.rank(), "GradientGroup: a step is still in flight; wait for it first");
  ++step_;
  inFlight_ = true;
  {
    std::lock_guard lock(doneMutex_);
    launched_ = 0;
    completed_ = 0;
    error_ = nullptr;
  }
  const ReduceOp op = buckets_.op();
  for (std::size_t k = 0; k < buckets_.bucketCount(); ++k) {
    works_[k] = Work();
    if (buckets_.plan().buckets[k].count == 0) continue;  // only empty tensors: nothing to send
    buckets_.pack(k, progress_);
    if (options_.errorFeedback) {
      const planner::Bucket& b = buckets_.plan().buckets[k];
      feedback_.apply(buckets_, k, comm_.wireFormatOf(b.count * dataTypeSize(b.dtype), b.dtype, options_.call));
    }
    if (buckets_.segmentList()) {
      // Agreed once, at construction (BucketSet): no per-call exchange.
      works_[k] = detail::allreduceListAsync(comm_, buckets_.segments(k), buckets_.plan().buckets[k].dtype, op,
                                             options_.call);
    } else {
      const View bucket = buckets_.region(k);
      works_[k] = comm_.allreduceAsync(bucket, bucket, op, options_.call);
    }
    {
      std::lock_guard lock(doneMutex_);
      ++launched_;
    }
    works_[k].onComplete([this, k](std::exception_ptr error) { bucketDone(k, error); });
    ++stats_.collectivesLaunched;
  }
}

void GradientGroupImpl::finishStep() {
  std::unique_lock lock(doneMutex_);
  // Every Work is complete; a callback may still be unpacking on the progress thread.
  doneCv_.wait(lock, [&] { return completed_ == launched_; });
  inFlight_ = false;
  if (error_) std::rethrow_exception(error_);
  ++stats_.steps;
}

bool GradientGroupImpl::test(std::uint64_t stepId) {
  checkStep(stepId);
  if (!inFlight_ || stepId != step_) return true;
  try {
    for (Work& w : works_) {
      if (w.valid() && !w.test()) return false;
    }
  } catch (...) {
    settle();
    inFlight_ = false;
    throw;
  }
  {
    std::lock_guard lock(doneMutex_);
    if (completed_ != launched_) return false;
  }
  finishStep();
  return true;
}

void GradientGroupImpl::wait(std::uint64_t stepId, std::optional<std::chrono::milliseconds> timeout) {
  checkStep(stepId);
  if (!inFlight_ || stepId != step_) return;
  const auto deadline = timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
  try {
    for (Work& w : works_) {
      if (!w.valid()) continue;
      std::optional<std::chrono::milliseconds> left;
      if (deadline) {
        left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
        if (left->count() < 0) left = std::chrono::milliseconds(0);
      }
      w.wait(left);
    }
  } catch (...) {
    // The failed collectives' callbacks run with the error; the step is
    // over once they all have.
    settle();
    inFlight_ = false;
    throw;
  }
  finishStep();
}

void GradientGroupImpl::checkStep(std::uint64_t stepId) const {
  BC_INVALID(stepId <= step_ && stepId > 0, comm_.rank(), "GradientWork: not a step of this GradientGroup");
}

std::string GradientGroupImpl::describe() const { return buckets_.describe(); }

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
