// The group's wire option (boostcomm.torch.set_wire): float32 allreduces,
// reduce-scatters and all_gather_into_tensor of this group carry 16-bit wire
// formats inside the algorithm (the group's communicator's setWireFormat:
// collective, compared across ranks), and, when asked, allreduces with error
// feedback per tensor.
//
// Feedback state is keyed by the tensor's storage (and its offset and
// element count): DDP allreduces each bucket's persistent flat buffer every
// step, so its residual follows the bucket. The storage is held weakly: a
// bucket buffer that DDP frees (its bucket rebuild after the first
// iteration) drops its residual, and a new tensor that happens to reuse the
// address starts from zero instead of inheriting another tensor's residual.
#include <c10/util/Exception.h>

#include "core/wire_feedback.h"
#include "torch/process_group.h"

namespace boostcomm::python {

void ProcessGroupBoostcomm::setWire(WireFormat wire, bool errorFeedback) {
  comm_->setWireFormat(wire);  // collective; ranks that differ all throw kMismatch
  std::lock_guard lock(feedbackMutex_);
  errorFeedback_ = errorFeedback;
  residuals_.clear();
}

WireFormat ProcessGroupBoostcomm::wire() const { return comm_->wireFormat(); }

bool ProcessGroupBoostcomm::errorFeedback() const {
  std::lock_guard lock(feedbackMutex_);
  return errorFeedback_;
}

std::array<std::int64_t, 3> ProcessGroupBoostcomm::wireCounts(bool reset) {
  std::array<std::int64_t, 3> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = reset ? wireCounts_[i].exchange(0) : wireCounts_[i].load();
  return out;
}

void ProcessGroupBoostcomm::countWire(WireFormat travelled) {
  const auto i = static_cast<std::size_t>(travelled);
  if (i < wireCounts_.size()) wireCounts_[i].fetch_add(1);
}

void ProcessGroupBoostcomm::feedBack(const at::Tensor& tensor, ReduceOp op) {
  if (tensor.scalar_type() != at::kFloat || (op != ReduceOp::kSum && op != ReduceOp::kAvg)) return;
  std::lock_guard lock(feedbackMutex_);
  if (!errorFeedback_) return;
  // How this call will travel (the selection may pick an algorithm that
  // moves float32, or auto may decide against compressing): feedback only
  // for a compressed call, with the format it will use.
  const WireFormat travels = comm_->wireFormatOf(static_cast<std::size_t>(tensor.numel()) * sizeof(float));
  if (travels == WireFormat::kOff) return;
  for (auto it = residuals_.begin(); it != residuals_.end();) {
    it = it->second.storage.expired() ? residuals_.erase(it) : std::next(it);
  }
  const c10::StorageImpl* key = tensor.storage().unsafeGetStorageImpl();
  Residual& r = residuals_[key];
  const auto count = static_cast<std::size_t>(tensor.numel());
  if (r.storage.expired() || r.offset != tensor.storage_offset() || r.values.size() != count) {
    r.storage = tensor.storage().getWeakStorageImpl();
    r.offset = tensor.storage_offset();
    r.values.assign(count, 0.0f);
  }
  const std::pair<float*, std::size_t> run{tensor.data_ptr<float>(), count};
  core::applyWireFeedback(travels, core::FloatRuns(&run, 1), r.values.data());
}

}  // namespace boostcomm::python
