#include "torch/process_group.h"

#include <c10/util/Exception.h>

#include <string>
#include <thread>

#include "boostcomm/error.h"

#include "torch/caller.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace {

// The list forms of allgather and reduce_scatter run on torch's tensors in
// place (allgatherManyPerRank / reduceScatterManyPerRank) from this many
// bytes per rank's block; below it, through one packed buffer and a plain
// collective. Why: each list call first agrees on the list's shape with a
// small blocking allgather, which costs more than the copy it saves at small
// sizes. Measured (store transport, 2 ranks, load 12.5, medians of 3 runs;
// docs/PERF_TORCH.md): allgather 8 B 442-478 us packed vs 831-877 us on
// lists, 1 MiB about equal (1.3-2.0 vs 1.4-1.6 ms), 16 MiB 47.5-49.5 ms packed vs 20.6-26.7 ms
// on lists. Every rank decides alike: the block size is part of the call,
// the same on every rank.
constexpr std::size_t kListMinBytes = std::size_t{1} << 20;

}  // namespace

// ---- WorkBoostcomm ----

WorkBoostcomm::WorkBoostcomm(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

// c10d::Work's own state (finish() sets it, before the future completes):
// what wait() waits for, so is_completed() is true once wait() returned.
bool WorkBoostcomm::isCompleted() { return c10d::Work::isCompleted(); }
bool WorkBoostcomm::isSuccess() const { return c10d::Work::isSuccess(); }
std::exception_ptr WorkBoostcomm::exception() const { return c10d::Work::exception(); }
std::vector<at::Tensor> WorkBoostcomm::result() { return outputs_; }
int WorkBoostcomm::sourceRank() const {
  const int source = source_.load();
  TORCH_CHECK(source >= 0, "boostcomm: source_rank() is known only for a completed recv or recvAnysource");
  return source;
}
c10::intrusive_ptr<c10::ivalue::Future> WorkBoostcomm::getFuture() { return future_; }

bool WorkBoostcomm::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "boostcomm: ", c10d::opTypeToString(opType_), " did not complete within ", timeout.count(),
                " ms (another rank may not have called it, or called it with different arguments)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void WorkBoostcomm::complete(std::exception_ptr error) {
  finish(error);  // c10d::Work's own state first: wait() callers wake up
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// ---- ProcessGroupBoostcomm ----

ProcessGroupBoostcomm::ProcessGroupBoostcomm(std::shared_ptr<Communicator> comm, int rank, int size,
                                             std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeout_(timeout) {
  TORCH_CHECK(comm != nullptr, "boostcomm: null communicator");
  TORCH_CHECK(comm->rank() == rank && comm->size() == size, "boostcomm: process group rank ", rank, " of ", size,
              " does not match the communicator (rank ", comm->rank(), " of ", comm->size(),
              ")");
  comm_ = std::move(comm);
  comm_->setProgressThread(true);
  // Collective, like this constructor: send / recv need the message channel.
  comm_->enablePointToPoint();
  // The group timeout (init_process_group(timeout=...)) bounds every wait of
  // this group's communicator: a rank that never joins an op fails it with
  // a timeout error instead of hanging.
  if (timeout.count() > 0) comm_->setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupBoostcomm::getBackendOptions() {
  return c10::make_intrusive<Options>(getBackendName(), timeout_);
}

void ProcessGroupBoostcomm::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, "boostcomm: set_timeout: timeout must be positive, got ", timeout.count(),
              " ms (rank ", rank_, ")");
  timeout_ = timeout;
  comm_->setTimeout(timeout);
}

ProcessGroupBoostcomm::~ProcessGroupBoostcomm() {
  try {
    shutdown();
  } catch (...) {
    // Destructors must not throw; errors were delivered to the ops' futures.
  }
}

void ProcessGroupBoostcomm::setAsync(bool enable) { async_.store(enable); }
bool ProcessGroupBoostcomm::async() const { return async_.load(); }

void ProcessGroupBoostcomm::abort() {
  closed_.store(true);
  comm_->abort();
}

void ProcessGroupBoostcomm::keepUntilFinalize(std::vector<at::Tensor> tensors) {
  std::lock_guard lock(keptMutex_);
  for (at::Tensor& t : tensors) kept_.push_back(std::move(t));
}

void ProcessGroupBoostcomm::shutdown() {
  closed_.store(true);
  // The progress thread completes what is in flight; the communicator is not
  // finalised here: finalize() is collective (it frees shared-memory windows
  // with MPI_Win_free), and this runs from a destructor whose timing the
  // garbage collector picks per rank. The package finalises every
  // communicator at exit, in creation order (boostcomm/_state.py).
  while (meter_.inFlight() > 0 && !comm_->finalized()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                              std::function<Work(Communicator&)> start,
                                                              std::function<void()> after, bool collective) {
  auto work = c10::make_intrusive<WorkBoostcomm>(rank_, type, std::move(outputs));
  {
    std::lock_guard lock(coalescingMutex_);
    if (coalescing_) coalesced_.push_back(work);
  }
  if (closed_.load()) {
    work->complete(std::make_exception_ptr(
        Error(ErrorCategory::kFinalized, rank_, "boostcomm process group used after shutdown")));
    return work;
  }
  if (collective) sequence_.fetch_add(1);
  Work op;
  // Collectives only: shutdown() waits for what the meter counts, and a
  // receive whose message never comes must not hold the process at exit
  // (finalising the communicator completes it with an error).
  if (collective) meter_.opStarted();
  try {
    const C10dCallerScope caller;  // the flight recorder's Python stack of the op
    op = start(*comm_);
  } catch (...) {
    if (collective) meter_.opFinished();
    work->complete(std::current_exception());
    return work;
  }
  // The closures own the op's tensors (the packed temporaries among them):
  // both stay alive until the collective completed.
  op.onComplete([this, work, op, collective, start = std::move(start), after = std::move(after)](std::exception_ptr error) {
    if (!error) work->setSourceRank(op.source());
    if (!error && after) {
      try {
        after();
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (collective) meter_.opFinished();
    work->complete(error);
  });
  if (!async_.load()) {
    // Blocks on the c10d Work's condition variable (no CPU, so the overlap
    // meter does not count the wait as compute) until the callback ran on
    // the progress thread. An error stays with the returned Work (its wait
    // and future report it), as in asynchronous mode.
    try {
      work->wait();
    } catch (...) {
    }
  }
  return work;
}

const at::Tensor& ProcessGroupBoostcomm::single(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "boostcomm: ", op, " takes one tensor per process (CPU), got ", tensors.size(),
              " (rank ", rank_, ")");
  return tensors[0];
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::broadcast(std::vector<at::Tensor>& tensors,
                                                                const c10d::BroadcastOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kBroadcast);
  const at::Tensor& t = single(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "boostcomm: broadcast rootTensor must be 0, got ", opts.rootTensor, " (rank ", rank_,
              ")");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "boostcomm: broadcast root ", opts.rootRank,
              " out of range for ", size_, " ranks (rank ", rank_, ")");
  const View v = bytesOf(t, "broadcast tensor", rank_);
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, tensors, [v, root](Communicator& c) { return c.broadcastAsync(v, root); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allreduce(std::vector<at::Tensor>& tensors,
                                                                const c10d::AllreduceOptions& opts) {
  // A sparse tensor's checks run on every rank after its layout exchange (no rejection to mark).
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == at::kSparse) {
    return allreduceSparse(tensors[0], opts);
  }
  const RejectGuard rejected(*comm_, Collective::kAllreduce);
  const at::Tensor& t = single(tensors, "allreduce");
  const View v = viewOf(t, "allreduce tensor", rank_);
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  premultiplyInPlace(t, opts.reduceOp, rank_);
  return enqueue(c10d::OpType::ALLREDUCE, tensors, [this, t, v, op](Communicator& c) {
    feedBack(t, op);
    return counted(c.allreduceAsync(v, v, op));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllreduce);
  TORCH_CHECK(!tensors.empty(), "boostcomm: allreduce_coalesced needs at least one tensor (rank ", rank_, ")");
  // One collective over the tensors where they are (a segment list): no
  // packed copy, no unpack. Mixed dtypes, overlapping tensors and lists
  // that differ between ranks are reported on every rank by allreduceMany.
  std::vector<View> views;
  views.reserve(tensors.size());
  for (const at::Tensor& t : tensors) views.push_back(viewOf(t, "allreduce_coalesced tensor", rank_));
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  if (opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM) {
    // Scaling happens before allreduceMany's own checks: a tensor listed twice
    // (or two overlapping ones) would be scaled twice before the list is refused.
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      for (std::size_t j = i + 1; j < tensors.size(); ++j) {
        TORCH_CHECK(!overlaps(tensors[i], tensors[j]), "boostcomm: allreduce_coalesced tensors ", i, " and ", j,
                    " overlap (rank ", rank_, ")");
      }
    }
  }
  for (const at::Tensor& t : tensors) premultiplyInPlace(t, opts.reduceOp, rank_);
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, tensors,
                 [this, views = std::move(views), op](Communicator& c) {
                   return counted(c.allreduceManyAsync(views, op));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllgatherOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllgather);
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "boostcomm: allgather needs one output list of ", size_, " tensors, got ", outputs.size(), " list(s)",
              outputs.size() == 1 ? " of " + std::to_string(outputs[0].size()) : std::string(), " (rank ", rank_, ")");
  const at::Tensor& in = single(inputs, "allgather");
  if (in.nbytes() < kListMinBytes) {
    // Small: one plain allgather into a gathered buffer, copied out.
    for (const at::Tensor& o : outputs[0]) {
      TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                  "boostcomm: allgather outputs must match the input's size and dtype: got ", o.numel(), " x ",
                  o.scalar_type(), ", input ", in.numel(), " x ", in.scalar_type(), " (rank ", rank_, ")");
      bytesOf(o, "allgather output", rank_);
    }
    at::Tensor gathered = at::empty({static_cast<std::int64_t>(size_) * in.numel()}, in.options());
    const View send = bytesOf(in, "allgather input", rank_);
    const View recv = bytesOf(gathered, "allgather buffer", rank_);
    std::vector<at::Tensor> outs = outputs[0];
    return enqueue(
        c10d::OpType::ALLGATHER, outs,
        [send, recv, in, gathered](Communicator& c) { return c.allgatherAsync(send, recv, exactValues()); },
        [gathered, outs] {
          const std::int64_t n = outs[0].numel();
          for (std::size_t i = 0; i < outs.size(); ++i) {
            outs[i].view({-1}).copy_(gathered.narrow(0, static_cast<std::int64_t>(i) * n, n));
          }
        });
  }
  // The per-rank outputs are torch's separate tensors: the collective writes
  // them directly (allgatherManyPerRank), no gathered buffer to copy out of.
  std::vector<std::vector<at::Tensor>> perRank;
  perRank.reserve(outputs[0].size());
  for (const at::Tensor& o : outputs[0]) perRank.push_back({o});
  return allgatherLists(c10d::OpType::ALLGATHER, "allgather", inputs, perRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allgatherLists(c10d::OpType type, const char* name,
                                                                     const std::vector<at::Tensor>& inputs,
                                                                     const std::vector<std::vector<at::Tensor>>& perRank) {
  // Raw bytes: an allgather only moves data, so a list may mix dtypes (as
  // torch's allgather_coalesced allows) and any dtype goes.
  std::vector<at::Tensor> sendTensors;
  std::vector<ConstView> send;
  for (const at::Tensor& t : inputs) {
    send.push_back(rawBytesOf(t, "allgather input", rank_));
    sendTensors.push_back(t);
  }
  std::vector<View> recv;
  std::vector<at::Tensor> outs;
  for (const auto& list : perRank) {
    TORCH_CHECK(list.size() == inputs.size(), "boostcomm: ", name, ": every output list needs ", inputs.size(),
                " tensors, got ", list.size(), " (rank ", rank_, ")");
    for (std::size_t i = 0; i < list.size(); ++i) {
      TORCH_CHECK(list[i].numel() == inputs[i].numel() && list[i].scalar_type() == inputs[i].scalar_type(),
                  "boostcomm: ", name, " output ", outs.size(), " must match input ", i, "'s size and dtype: got ",
                  list[i].numel(), " x ", list[i].scalar_type(), ", input ", inputs[i].numel(), " x ",
                  inputs[i].scalar_type(), " (rank ", rank_, ")");
      recv.push_back(rawBytesOf(list[i], "allgather output", rank_));
      outs.push_back(list[i]);
    }
  }
  // In place (an input that is also this rank's output, as
  // all_gather(list(x.chunk(n)), x.chunk(n)[rank]) passes): the collective
  // needs send and recv apart, so that input is read from a copy.
  for (std::size_t i = 0; i < sendTensors.size(); ++i) {
    for (const at::Tensor& o : outs) {
      if (!overlaps(sendTensors[i], o)) continue;
      sendTensors[i] = sendTensors[i].clone();
      send[i] = rawBytesOf(sendTensors[i], "allgather input", rank_);
      break;
    }
  }
  return enqueue(type, outs, [send = std::move(send), recv = std::move(recv), sendTensors](Communicator& c) {
    return c.allgatherManyPerRankAsync(send, recv);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::AllgatherOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllgather);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "boostcomm: all_gather_into_tensor output has dtype ",
              output.scalar_type(), ", input ", input.scalar_type(), ": they must match (rank ", rank_, ")");
  TORCH_CHECK(output.numel() == input.numel() * size_, "boostcomm: all_gather_into_tensor output has ", output.numel(),
              " elements; it must hold world_size (", size_, ") x input's ", input.numel(), " = ",
              input.numel() * size_, " (rank ", rank_, ")");
  const View send = bytesOf(input, "allgather input", rank_);
  const View recv = bytesOf(output, "allgather output", rank_);
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output},
                 [this, send, recv, input](Communicator& c) { return counted(c.allgatherAsync(send, recv)); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                                     const c10d::ReduceScatterOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kReduceScatter);
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "boostcomm: reduce_scatter needs one input list of ", size_, " tensors, got ", inputs.size(), " list(s)",
              inputs.size() == 1 ? " of " + std::to_string(inputs[0].size()) : std::string(), " (rank ", rank_, ")");
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  if (out.nbytes() < kListMinBytes) {
    // Small: the blocks packed into one buffer, one plain reduce_scatter.
    std::vector<at::Tensor> flat;
    for (std::size_t r = 0; r < inputs[0].size(); ++r) {
      const at::Tensor& t = inputs[0][r];
      TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(), "boostcomm: reduce_scatter input ",
                  r, " must match the output's size and dtype: got ", t.numel(), " x ", t.scalar_type(), ", output ",
                  out.numel(), " x ", out.scalar_type(), " (rank ", rank_, ")");
      viewOf(t, "reduce_scatter input", rank_);
      flat.push_back(t.reshape({-1}));
    }
    at::Tensor packed = premultiplied(at::cat(flat), opts.reduceOp, rank_);
    const View send = viewOf(packed, "reduce_scatter buffer", rank_);
    const View recv = viewOf(out, "reduce_scatter output", rank_);
    return enqueue(c10d::OpType::REDUCE_SCATTER, outputs,
                   [this, send, recv, op, packed](Communicator& c) {
                     return counted(c.reduceScatterAsync(send, recv, op));
                   });
  }
  // torch's per-rank input tensors are the blocks themselves: one
  // reduceScatterManyPerRank over them, no packed copy.
  std::vector<at::Tensor> ins = inputs[0];
  std::vector<ConstView> send;
  for (std::size_t r = 0; r < ins.size(); ++r) {
    TORCH_CHECK(ins[r].numel() == out.numel() && ins[r].scalar_type() == out.scalar_type(),
                "boostcomm: reduce_scatter input ", r, " must match the output's size and dtype: got ", ins[r].numel(),
                " x ", ins[r].scalar_type(), ", output ", out.numel(), " x ", out.scalar_type(), " (rank ", rank_, ")");
    // In place (the output is one of the inputs): that block is read from a copy.
    if (overlaps(ins[r], out)) ins[r] = ins[r].clone();
    ins[r] = premultiplied(ins[r], opts.reduceOp, rank_);
    send.push_back(viewOf(ins[r], "reduce_scatter input", rank_));
  }
  const View recv = viewOf(out, "reduce_scatter output", rank_);
  return enqueue(c10d::OpType::REDUCE_SCATTER, outputs, [this, send = std::move(send), recv, op, ins](Communicator& c) {
    return counted(c.reduceScatterManyPerRankAsync(send, std::span<const View>(&recv, 1), op));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                           const c10d::ReduceScatterOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kReduceScatter);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "boostcomm: reduce_scatter_tensor input has dtype ",
              input.scalar_type(), ", output ", output.scalar_type(), ": they must match (rank ", rank_, ")");
  TORCH_CHECK(input.numel() == output.numel() * size_, "boostcomm: reduce_scatter_tensor input has ", input.numel(),
              " elements; it must hold world_size (", size_, ") x output's ", output.numel(), " = ",
              output.numel() * size_, " (rank ", rank_, ")");
  viewOf(input, "reduce_scatter input", rank_);  // checks before any copy
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  at::Tensor in = premultiplied(input, opts.reduceOp, rank_);
  const View send = viewOf(in, "reduce_scatter input", rank_);
  const View recv = viewOf(output, "reduce_scatter output", rank_);
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [this, send, recv, op, in](Communicator& c) { return counted(c.reduceScatterAsync(send, recv, op)); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::barrier(const c10d::BarrierOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kBarrier);
  return enqueue(c10d::OpType::BARRIER, {}, [](Communicator& c) { return c.barrierAsync(); });
}

}  // namespace boostcomm::python
