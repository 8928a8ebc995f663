// The coalesced and split parts of ProcessGroupBoostcomm (torch 2.x):
//   _coalescing_manager       startCoalescing / endCoalescing: one Work for
//                             every op launched in between
//   all_gather_into_tensor and reduce_scatter_tensor, coalesced: one
//                             collective over every (output, input) pair
//                             (allgatherMany / reduceScatterMany); a
//                             reduce-scatter list that mixes dtypes (gloo
//                             takes one) runs one reduceScatterMany per dtype
//   ProcessGroup.split_group  a subgroup on the store transport
#include <c10/util/Exception.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <atomic>

#include "torch/process_group.h"
#include "torch/store_adapter.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace py = pybind11;

namespace {

// One Work over `works`: it completes once every one of them did, with the
// first error (a callback on a completed future runs at once, on this thread).
c10::intrusive_ptr<WorkBoostcomm> joined(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                                         const std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  auto all = c10::make_intrusive<WorkBoostcomm>(rank, type, std::move(outputs));
  if (works.empty()) {
    all->complete(nullptr);
    return all;
  }
  struct Join {
    std::atomic<std::size_t> left;
    std::mutex mutex;
    std::exception_ptr error;
  };
  auto join = std::make_shared<Join>();
  join->left.store(works.size());
  for (const auto& w : works) {
    w->getFuture()->addCallback([all, join](c10::ivalue::Future& f) {
      if (f.hasError()) {
        std::lock_guard lock(join->mutex);
        if (!join->error) join->error = f.exception_ptr();
      }
      if (join->left.fetch_sub(1) == 1) all->complete(join->error);
    });
  }
  return all;
}

}  // namespace

void ProcessGroupBoostcomm::startCoalescing() {
  std::lock_guard lock(coalescingMutex_);
  // torch's _coalescing_manager does not call endCoalescing when its body
  // raised: the group recovers here instead of collecting every later Work.
  if (coalescing_) {
    TORCH_WARN("boostcomm: startCoalescing without endCoalescing of the previous block (rank ", rank_,
               "); its ", coalesced_.size(), " op(s) are no longer joined");
  }
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::endCoalescing() {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard lock(coalescingMutex_);
    TORCH_CHECK(coalescing_, "boostcomm: endCoalescing without startCoalescing (rank ", rank_, ")");
    coalescing_ = false;
    works.swap(coalesced_);
  }
  std::vector<at::Tensor> outputs;
  for (auto& w : works) {
    for (at::Tensor& t : w->result()) outputs.push_back(t);
  }
  return joined(rank_, c10d::OpType::COALESCED, std::move(outputs), works);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kAllgather);
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "boostcomm: allgather_into_tensor_coalesced needs ",
              "as many outputs as inputs (at least one), got ", outputs.size(), " and ", inputs.size(), " (rank ",
              rank_, ")");
  // Raw bytes: the pairs may differ in dtype (FSDP gathers uint8 views of
  // mixed-dtype parameters; torch's own ops may not). All float32: typed,
  // so the group's wire format applies as to all_gather_into_tensor.
  const bool float32 = std::all_of(inputs.begin(), inputs.end(),
                                   [](const at::Tensor& t) { return t.scalar_type() == at::kFloat; });
  auto asView = [&](const at::Tensor& t, const char* what) {
    return float32 ? viewOf(t, what, rank_) : rawBytesOf(t, what, rank_);
  };
  std::vector<ConstView> send;
  std::vector<View> recv;
  std::vector<at::Tensor> keep;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_ && outputs[i].scalar_type() == inputs[i].scalar_type(),
                "boostcomm: allgather_into_tensor_coalesced output ", i, " must hold world_size x input ", i,
                "'s elements of its dtype (rank ", rank_, ")");
    at::Tensor in = inputs[i];
    // In place (the input is this rank's block of the output): read it from a copy.
    for (const at::Tensor& o : outputs) {
      if (overlaps(in, o)) {
        in = in.clone();
        break;
      }
    }
    send.push_back(asView(in, "allgather_into_tensor_coalesced input"));
    recv.push_back(asView(outputs[i], "allgather_into_tensor_coalesced output"));
    keep.push_back(in);
  }
  return enqueue(c10d::OpType::COALESCED, outputs,
                 [this, send = std::move(send), recv = std::move(recv), keep](Communicator& c) {
                   return counted(c.allgatherManyAsync(send, recv));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const RejectGuard rejected(*comm_, Collective::kReduceScatter);
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "boostcomm: reduce_scatter_tensor_coalesced needs ",
              "as many outputs as inputs (at least one), got ", outputs.size(), " and ", inputs.size(), " (rank ",
              rank_, ")");
  const ReduceOp op = reduceOpOf(opts.reduceOp, rank_);
  // Every pair is checked before anything is launched, so a bad pair leaves
  // no collective of the list running.
  std::vector<at::ScalarType> dtypes;  // in order of first appearance: the same on every rank
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type(), "boostcomm: reduce_scatter_tensor_coalesced ",
                "input ", i, " has dtype ", inputs[i].scalar_type(), ", output ", i, " ", outputs[i].scalar_type(),
                ": they must match (rank ", rank_, ")");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "boostcomm: reduce_scatter_tensor_coalesced input ",
                i, " has ", inputs[i].numel(), " elements; it must hold world_size (", size_, ") x output ", i, "'s ",
                outputs[i].numel(), " (rank ", rank_, ")");
    viewOf(inputs[i], "reduce_scatter_tensor_coalesced input", rank_);
    viewOf(outputs[i], "reduce_scatter_tensor_coalesced output", rank_);
    TORCH_CHECK(opts.reduceOp.op_ != c10d::ReduceOp::PREMUL_SUM || at::isFloatingType(inputs[i].scalar_type()),
                "boostcomm: PREMUL_SUM needs a floating-point tensor, got ", inputs[i].scalar_type(), " (input ", i,
                ", rank ", rank_, ")");
    if (std::find(dtypes.begin(), dtypes.end(), inputs[i].scalar_type()) == dtypes.end()) {
      dtypes.push_back(inputs[i].scalar_type());
    }
  }
  if (dtypes.size() > 1) {
    // One reduceScatterMany takes one dtype: one per dtype, joined. Inside a
    // _coalescing_manager block each is also one of the block's ops.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (const at::ScalarType dtype : dtypes) {
      std::vector<at::Tensor> outs, ins;
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].scalar_type() != dtype) continue;
        outs.push_back(outputs[i]);
        ins.push_back(inputs[i]);
      }
      works.push_back(reduce_scatter_tensor_coalesced(outs, ins, opts));
    }
    return joined(rank_, c10d::OpType::COALESCED, outputs, works);
  }
  std::vector<ConstView> send;
  std::vector<View> recv;
  std::vector<at::Tensor> keep;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor in = premultiplied(inputs[i], opts.reduceOp, rank_);
    for (const at::Tensor& o : outputs) {
      if (in.is_same(inputs[i]) && overlaps(in, o)) {
        in = in.clone();
        break;
      }
    }
    send.push_back(viewOf(in, "reduce_scatter_tensor_coalesced input", rank_));
    recv.push_back(viewOf(outputs[i], "reduce_scatter_tensor_coalesced output", rank_));
    keep.push_back(in);
  }
  return enqueue(c10d::OpType::COALESCED, outputs,
                 [this, send = std::move(send), recv = std::move(recv), op, keep](Communicator& c) {
                   return counted(c.reduceScatterManyAsync(send, recv, op));
                 });
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupBoostcomm::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                               const std::vector<int>& ranks,
                                                               const c10::intrusive_ptr<Options>& opts) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    TORCH_CHECK(ranks[i] >= 0 && ranks[i] < size_, "boostcomm: split: rank ", ranks[i], " is outside the group of ",
                size_, " ranks (rank ", rank_, ")");
    TORCH_CHECK(std::count(ranks.begin(), ranks.end(), ranks[i]) == 1, "boostcomm: split: rank ", ranks[i],
                " appears more than once (rank ", rank_, ")");
  }
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;  // not a member: torch returns None here
  const int rank = static_cast<int>(me - ranks.begin());
  const int size = static_cast<int>(ranks.size());
  const std::chrono::milliseconds timeout = opts && opts->timeout.count() > 0 ? opts->timeout : timeout_;
  const std::string name = opts ? opts->group_name : std::string();
  auto kv = std::make_shared<C10dStore>(store, "the c10d store of split group '" + name + "'");
  std::shared_ptr<Communicator> comm;
  if (PyGILState_Check()) {
    py::gil_scoped_release release;  // collective: waits on the other members through the store
    comm = Communicator::createFromStore(std::move(kv), rank, size, timeout);
  } else {
    comm = Communicator::createFromStore(std::move(kv), rank, size, timeout);
  }
  // The package's one way to make a group (boostcomm.torch._wrap): the
  // communicator kept for the ordered finalize at exit, the strategy and
  // overlap settings applied, the group registered.
  py::gil_scoped_acquire gil;
  py::object pg = py::module_::import("boostcomm.torch").attr("_wrap")(comm, rank, size, timeout);
  auto child = pg.cast<c10::intrusive_ptr<ProcessGroupBoostcomm>>();
  child->setAsync(async());
  return child;
}

}  // namespace boostcomm::python
