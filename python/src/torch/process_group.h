// ProcessGroupBoostcomm: the c10d backend "boostcomm" (CPU tensors).
//
// Thin glue over the communicator's progress engine: every collective is
// launched at once on the calling thread (c10d issues collectives in program
// order, the same on every rank: boostcomm's matching rule) and returns a
// WorkBoostcomm; the boostcomm Work's completion callback (on the
// communicator's progress thread, which this backend always runs: c10d
// futures must complete by themselves) copies results out and completes the
// c10::ivalue::Future that DDP chains its bucket callbacks on.
//
// torch 2.x: a c10d::Backend (what torch's ProcessGroup dispatches a device's
// ops to), registered for the CPU device by boostcomm/torch.py.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "boostcomm/communicator.h"
#include "core/clock.h"
#include "telemetry/busy_meter.h"

namespace boostcomm::python {

class WorkBoostcomm : public c10d::Work {
 public:
  WorkBoostcomm(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Worker thread: the collective finished (error null) or failed.
  void complete(std::exception_ptr error);
  // recv / recvAnysource: the sender (torch's Work.source_rank()).
  int sourceRank() const override;
  void setSourceRank(int rank) { source_.store(rank); }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> source_{-1};
};

// Put at the top of an op: when the op's own argument checks (TORCH_CHECK)
// throw before the collective reaches the communicator, the rejection is
// marked in this rank's call status, so node peers that entered the
// collective report it instead of waiting out the deadline
// (Communicator::reportRejectedCall). Only for ops whose checks precede any
// communicator call (enqueue reports its own errors through the Work).
class RejectGuard {
 public:
  RejectGuard(Communicator& comm, Collective collective)
      : comm_(comm), collective_(collective), exceptions_(std::uncaught_exceptions()) {}
  RejectGuard(const RejectGuard&) = delete;
  RejectGuard& operator=(const RejectGuard&) = delete;
  ~RejectGuard() {
    if (std::uncaught_exceptions() <= exceptions_) return;
    try {
      comm_.reportRejectedCall(collective_);
    } catch (...) {  // a finalized communicator: nothing to tell
    }
  }

 private:
  Communicator& comm_;
  Collective collective_;
  int exceptions_;
};

class ProcessGroupBoostcomm : public ::c10d::Backend {
 public:
  // comm must be a communicator of exactly these rank and size (the world).
  ProcessGroupBoostcomm(std::shared_ptr<Communicator> comm, int rank, int size, std::chrono::milliseconds timeout);
  ~ProcessGroupBoostcomm() override;

  const std::string getBackendName() const override { return "boostcomm"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // The group timeout (torch's _set_default_timeout, set_timeout): bounds every later wait.
  void setTimeout(std::chrono::milliseconds timeout) override;

  // dist.split_group / new_group(use_local_synchronization): a subgroup of
  // this group's ranks `ranks` (ranks of this group), rendezvousing through
  // `store` (the prefix store torch made for the new group) on the store
  // transport. Called by the members only.
  bool supportsSplitting() const override { return true; }

  // DDP's gradient buckets (torch's Reducer asks the default backend when
  // DDP_DISABLE_COMM_MEM=0, which boostcomm/torch.py makes the default):
  // CPU tensors in memory the node's ranks share (allocateOwnedBuffer), so
  // the shared-memory allreduce reads and writes them in place instead of
  // copying them in and out. True only where this group has a shared
  // segment (every rank on one node); allocateTensor gives ordinary memory
  // elsewhere, and for other devices or empty tensors.
  bool supportsTensorAlloc(c10::DeviceIndex deviceIdx) override;
  at::Tensor allocateTensor(long size, at::TensorOptions options = {}) override;
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;

  // _coalescing_manager: the ops between start and end are launched as they
  // come (each its own collective, in the same order on every rank); end
  // returns one Work that completes when all of them did.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  // process_group_alltoall.cc
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& outputSplitSizes,
                                               std::vector<std::int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  // process_group_coalesced.cc: one collective over many (output, input) pairs.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  // process_group_rooted.cc
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;

  // process_group_p2p.cc
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  // Rank 0 waits up to the timeout for every rank and names those that did
  // not arrive (the first one, or all with waitAllRanks), as gloo's does.
  void monitoredBarrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions(), bool waitAllRanks = false) override;
  // Collectives issued on this group since it was created (or reset): every
  // rank issues the same ones, so the numbers agree (torch compares them to
  // detect desynchronised ranks). Point-to-point ops do not count.
  void setSequenceNumberForGroup() override;
  std::uint64_t getSequenceNumberForGroup() override;

  std::chrono::milliseconds timeout() const { return timeout_; }
  // enable = false: every op completes before its call returns (the "no
  // overlap" baseline of configure_overlap(enable=False)).
  void setAsync(bool enable);
  bool async() const;
  // Overlap statistics (telemetry/busy_meter.h for the definition).
  telemetry::BusyTotals overlapTotals(bool reset) { return meter_.totals(reset); }
  // The flight recorder of this group's communicator as JSON (docs/RELIABILITY.md).
  std::string flightRecord() const { return comm_->flightRecord(); }
  // Waits for the ops in flight, then refuses new ones (local, no
  // communication). The communicator stays alive for its owner to finalise.
  void shutdown() override;
  // Abandons this rank's ops in flight (Communicator::abort: they complete
  // with an error at once) and refuses new ones. Local, any thread.
  void abort() override;

  // Wire format of this group's float32 allreduces, reduce-scatters and
  // all_gather_into_tensor (boostcomm.torch.set_wire; process_group_wire.cc).
  // Collective: every rank passes the same wire (ranks that differ all throw
  // kMismatch); errorFeedback adds each tensor's rounding residual to its
  // next allreduce (SUM/AVG of float32 only).
  void setWire(WireFormat wire, bool errorFeedback);
  WireFormat wire() const;
  bool errorFeedback() const;
  // Calls that may carry the wire (allreduces, reduce-scatters,
  // all_gather_into_tensor) launched per wire format they travelled (index:
  // WireFormat kOff, kBf16, kFp16), since creation or the last reset.
  std::array<std::int64_t, 3> wireCounts(bool reset);

 private:
  // Error feedback state of one tensor (process_group_wire.cc).
  struct Residual {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
    std::int64_t offset = 0;
    std::vector<float> values;
  };
  // Before an allreduce of `tensor`: applies its residual when feedback is on
  // and the call compresses.
  void feedBack(const at::Tensor& tensor, ReduceOp op);
  void countWire(WireFormat travelled);
  // countWire(w.wireFormat()), then w: for the ops that may carry the wire.
  Work counted(Work w) {
    countWire(w.wireFormat());
    return w;
  }

  // allreduce of a sparse COO tensor (SUM; process_group_sparse.cc).
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts);
  // Launches `start` now (and `after`, run on success before the future completes).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<Work(Communicator&)> start,
                                         std::function<void()> after = nullptr, bool collective = true);
  // Tensors a message may still be written into after its op gave up
  // (a monitoredBarrier that timed out): kept until the group goes away.
  void keepUntilFinalize(std::vector<at::Tensor> tensors);
  // monitoredBarrier's two sides: a rank that reports to rank 0 and waits
  // for its verdict, and rank 0, which waits for each rank and sends the verdict.
  void monitoredBarrierPeer(std::chrono::milliseconds timeout, core::Clock::time_point deadline);
  void monitoredBarrierRoot(std::chrono::milliseconds timeout, core::Clock::time_point deadline, bool waitAllRanks);
  const at::Tensor& single(std::vector<at::Tensor>& tensors, const char* op);
  // allgather and allgather_coalesced: perRank[r][i] receives inputs[i] of rank r.
  c10::intrusive_ptr<c10d::Work> allgatherLists(c10d::OpType type, const char* name,
                                                const std::vector<at::Tensor>& inputs,
                                                const std::vector<std::vector<at::Tensor>>& perRank);

  std::shared_ptr<Communicator> comm_;
  std::chrono::milliseconds timeout_;
  telemetry::BusyMeter meter_;
  std::atomic<bool> async_{true};
  std::atomic<bool> closed_{false};
  std::atomic<std::uint64_t> sequence_{0};
  // Between startCoalescing and endCoalescing: the Works launched so far.
  std::mutex coalescingMutex_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  std::mutex keptMutex_;
  std::vector<at::Tensor> kept_;
  mutable std::mutex feedbackMutex_;
  bool errorFeedback_ = false;
  std::unordered_map<const c10::StorageImpl*, Residual> residuals_;
  std::array<std::atomic<std::int64_t>, 3> wireCounts_{};
  // allocateTensor could not make a shared segment (on every rank alike): no more tries.
  std::atomic<bool> sharedBucketsFailed_{false};
};

}  // namespace boostcomm::python
