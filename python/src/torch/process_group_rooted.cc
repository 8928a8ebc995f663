// The rooted and list c10d ops of ProcessGroupBoostcomm, built on the
// communicator's collectives (so each gets boostcomm's selection for that
// collective, and runs asynchronously like the others):
//   reduce              allreduce (non-root ranks reduce a copy: their tensor is left as it was)
//   gather              allgather into one buffer; the root copies it out
//   scatter             broadcast of the root's packed list; each rank keeps its block
//   allgather_coalesced one allgather over the tensor lists in place (allgatherManyPerRank; process_group.cc)
// gather and scatter move size x the data a rooted algorithm would (every
// rank receives every block): correct, not yet economical -- a rooted
// schedule (binomial gather/scatter) is future work (issue 14 note).
#include <c10/util/Exception.h>

#include "torch/process_group.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace {

void checkRoot(std::int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "boostcomm: ", op, " root ", root, " out of range for ", size, " ranks");
}

void checkLike(const at::Tensor& t, const at::Tensor& like, const char* op, const char* what, int rank) {
  TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "boostcomm: ", op, " ", what,
              " must match the input's size and dtype: got ", t.numel(), " x ", t.scalar_type(), ", input ",
              like.numel(), " x ", like.scalar_type(), " (rank ", rank, ")");
  bytesOf(t, what, rank);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::reduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::ReduceOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllreduce);
  const at::Tensor& t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "boostcomm: reduce rootTensor must be 0");
  checkRoot(opts.rootRank, size_, "reduce");
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  const bool root = opts.rootRank == rank_;
  viewOf(t, "reduce tensor", rank_);  // checks before the tensor is scaled
  at::Tensor target = root ? t : t.clone();
  premultiplyInPlace(target, opts.reduceOp, rank_);
  const View v = viewOf(target, "reduce tensor", rank_);
  return enqueue(c10d::OpType::REDUCE, tensors,
                 [v, op, target](Communicator& c) { return c.allreduceAsync(v, v, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::GatherOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllgather);
  const at::Tensor& in = single(inputs, "gather");
  checkRoot(opts.rootRank, size_, "gather");
  const bool root = opts.rootRank == rank_;
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "boostcomm: gather on the root needs one output list of ", size_, " tensors");
    for (const at::Tensor& o : outputs[0]) checkLike(o, in, "gather", "output", rank_);
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "boostcomm: gather outputs must be empty on non-root ranks");
  }
  at::Tensor gathered = at::empty({static_cast<std::int64_t>(size_) * in.numel()}, in.options());
  const View send = bytesOf(in, "gather input", rank_);
  const View recv = bytesOf(gathered, "gather buffer", rank_);
  return enqueue(
      c10d::OpType::GATHER, outs,
      [send, recv, in, gathered](Communicator& c) { return c.allgatherAsync(send, recv, exactValues()); },
      [gathered, outs] {
        const std::int64_t n = outs.empty() ? 0 : outs[0].numel();
        for (std::size_t i = 0; i < outs.size(); ++i) {
          outs[i].view({-1}).copy_(gathered.narrow(0, static_cast<std::int64_t>(i) * n, n));
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::scatter(std::vector<at::Tensor>& outputs,
                                                              std::vector<std::vector<at::Tensor>>& inputs,
                                                              const c10d::ScatterOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kBroadcast);
  const at::Tensor& out = single(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const bool root = opts.rootRank == rank_;
  at::Tensor packed;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "boostcomm: scatter on the root needs one input list of ", size_, " tensors");
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : inputs[0]) {
      checkLike(t, out, "scatter", "input", rank_);
      flat.push_back(t.reshape({-1}));
    }
    packed = at::cat(flat);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "boostcomm: scatter inputs must be empty on non-root ranks");
    packed = at::empty({static_cast<std::int64_t>(size_) * out.numel()}, out.options());
  }
  bytesOf(out, "scatter output", rank_);
  const View buf = bytesOf(packed, "scatter buffer", rank_);
  const int rootRank = static_cast<int>(opts.rootRank);
  const std::int64_t n = out.numel();
  const std::int64_t at = static_cast<std::int64_t>(rank_) * n;
  return enqueue(
      c10d::OpType::SCATTER, outputs, [buf, rootRank, packed](Communicator& c) { return c.broadcastAsync(buf, rootRank); },
      [packed, out, at, n] { out.view({-1}).copy_(packed.narrow(0, at, n)); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllgather);
  TORCH_CHECK(!inputs.empty(), "boostcomm: allgather_coalesced needs at least one input tensor");
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_,
              "boostcomm: allgather_coalesced needs ", size_, " output lists (one per rank), got ", outputLists.size());
  // outputLists[r][i] receives inputs[i] of rank r: the per-rank list form as it is.
  return allgatherLists(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", inputs, outputLists);
}

}  // namespace boostcomm::python
