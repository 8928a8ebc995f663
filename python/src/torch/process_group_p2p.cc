// Point-to-point and control ops of ProcessGroupBoostcomm:
//   send / recv / recvAnysource  the communicator's messages (Communicator::sendAsync / recvAsync,
//                                a channel apart from the collectives; opened at group creation)
//   alltoall                     the list form, packed into alltoall_base's (one path, one set of checks)
//   monitoredBarrier             rank 0 collects one message from every rank within the timeout
//                                and names the ranks that did not arrive, then releases them
//   sequence numbers             a per-group count of the collectives issued, equal on every rank
#include <c10/util/Exception.h>

#include <chrono>
#include <numeric>
#include <sstream>
#include <thread>

#include "torch/process_group.h"
#include "torch/tensor_view.h"

namespace boostcomm::python {

namespace {

// Tags above every c10d user tag torch 1.13 passes (Python ints that fit
// c10d's int; boostcomm's channel takes [0, kMaxMessageTag]) are ours.
constexpr int kMonitoredBarrierTag = Communicator::kMaxMessageTag;

void checkPeer(int peer, int rank, int size, const char* op) {
  TORCH_CHECK(peer >= 0 && peer < size, "boostcomm: ", op, " rank ", peer, " out of range for a group of ", size,
              " ranks (this is rank ", rank, ")");
  TORCH_CHECK(peer != rank, "boostcomm: ", op, " rank ", peer, " is this rank: a message needs another rank");
}

void checkTag(int tag, const char* op) {
  TORCH_CHECK(tag >= 0 && tag < kMonitoredBarrierTag, "boostcomm: ", op, " tag ", tag, " outside [0, ",
              kMonitoredBarrierTag - 1, "]");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const at::Tensor& t = single(tensors, "send");
  checkPeer(dstRank, rank_, size_, "send: destination");
  checkTag(tag, "send");
  const View v = bytesOf(t, "send tensor", rank_);
  return enqueue(c10d::OpType::SEND, tensors, [v, dstRank, tag, t](Communicator& c) {
    return c.sendAsync(ConstView(v.data, v.count, v.dtype), dstRank, tag);
  }, nullptr, /*collective=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  checkPeer(srcRank, rank_, size_, "recv: source");
  checkTag(tag, "recv");
  const View v = bytesOf(t, "recv tensor", rank_);
  return enqueue(c10d::OpType::RECV, tensors, [v, srcRank, tag](Communicator& c) { return c.recvAsync(v, srcRank, tag); },
                 nullptr, /*collective=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(tensors, "recvAnysource");
  TORCH_CHECK(size_ > 1, "boostcomm: recvAnysource in a group of one rank: there is no other rank to receive from");
  checkTag(tag, "recvAnysource");
  const View v = bytesOf(t, "recv tensor", rank_);
  return enqueue(c10d::OpType::RECVANYSOURCE, tensors,
                 [v, tag](Communicator& c) { return c.recvAsync(v, Communicator::kAnySource, tag); }, nullptr,
                 /*collective=*/false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBoostcomm::alltoall(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "boostcomm: alltoall needs ", size_, " input and ", size_, " output tensors, got ", inputs.size(), " and ",
              outputs.size());
  TORCH_CHECK(!inputs.empty(), "boostcomm: alltoall with no tensors");
  const at::ScalarType dtype = inputs[0].scalar_type();
  std::vector<at::Tensor> flatIn, flatOut;
  std::vector<std::int64_t> inSplits, outSplits;
  for (int i = 0; i < size_; ++i) {
    const at::Tensor& in = inputs[static_cast<std::size_t>(i)];
    const at::Tensor& out = outputs[static_cast<std::size_t>(i)];
    viewOf(in, "alltoall input", rank_);
    viewOf(out, "alltoall output", rank_);
    TORCH_CHECK(in.scalar_type() == dtype && out.scalar_type() == dtype, "boostcomm: alltoall tensors must share one dtype");
    flatIn.push_back(in.reshape({-1}));
    inSplits.push_back(in.numel());
    outSplits.push_back(out.numel());
  }
  at::Tensor packedIn = at::cat(flatIn);
  at::Tensor packedOut = at::empty({std::accumulate(outSplits.begin(), outSplits.end(), std::int64_t{0})},
                                   inputs[0].options());
  // alltoall_base checks the splits across ranks (every rank raises together)
  // and runs the exchange; the unpack runs when it completed.
  auto base = alltoall_base(packedOut, packedIn, outSplits, inSplits, opts);
  auto work = c10::make_intrusive<WorkBoostcomm>(rank_, c10d::OpType::ALLTOALL, outputs);
  std::vector<at::Tensor> outs = outputs;
  base->getFuture()->addCallback([work, outs, packedOut, outSplits](c10::ivalue::Future& f) {
    if (f.hasError()) {
      work->complete(f.exception_ptr());
      return;
    }
    try {
      std::int64_t at = 0;
      for (std::size_t i = 0; i < outs.size(); ++i) {
        outs[i].view({-1}).copy_(packedOut.narrow(0, at, outSplits[i]));
        at += outSplits[i];
      }
      work->complete(nullptr);
    } catch (...) {
      work->complete(std::current_exception());
    }
  });
  return work;
}

void ProcessGroupBoostcomm::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  using Clock = std::chrono::steady_clock;
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const auto deadline = Clock::now() + timeout;
  at::Tensor token = at::zeros({1}, at::kInt);
  auto waitUntil = [&](Work& w) {
    while (!w.test()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  };
  const View v = viewOf(token, "monitoredBarrier token", rank_);
  if (size_ == 1) return;
  if (rank_ != 0) {
    // Arrive, then wait for rank 0's release: it names us if we are late.
    Work arrive = comm_->sendAsync(ConstView(v.data, 1, v.dtype), 0, kMonitoredBarrierTag);
    at::Tensor released = at::zeros({1}, at::kInt);
    Work release = comm_->recvAsync(viewOf(released, "monitoredBarrier token", rank_), 0, kMonitoredBarrierTag);
    const bool passed = waitUntil(arrive) && waitUntil(release);
    if (!passed) keepUntilFinalize({token, released});  // the messages may still land in it
    TORCH_CHECK(passed, "boostcomm: monitoredBarrier on rank ", rank_,
                ": rank 0 did not release the barrier within ", timeout.count(), " ms");
    return;
  }
  std::vector<at::Tensor> slots;
  std::vector<Work> arrivals;
  for (int r = 1; r < size_; ++r) {
    slots.push_back(at::zeros({1}, at::kInt));
    arrivals.push_back(comm_->recvAsync(viewOf(slots.back(), "monitoredBarrier token", rank_), r, kMonitoredBarrierTag));
  }
  std::vector<int> missing;
  std::ostringstream passed;  // ranks that arrived, for the timed-out message
  for (int r = 1; r < size_; ++r) {
    // As gloo: without waitAllRanks each rank gets what is left of the timeout, in whole ms, and
    // once none is left rank 0 reports its own timeout (torch's suite checks "Rank 0 timed out").
    const auto leftMs = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (!waitAllRanks && leftMs <= 0) {
      keepUntilFinalize(slots);
      const std::string done = passed.str();
      TORCH_CHECK(false, "boostcomm: monitoredBarrier: Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                  " ms (", done.empty() ? "no rank arrived" : "arrived: ranks " + done, ")");
    }
    if (waitUntil(arrivals[static_cast<std::size_t>(r - 1)])) {
      passed << (passed.tellp() > 0 ? ", " : "") << r;
    } else {
      missing.push_back(r);
      if (!waitAllRanks) break;  // torch names the first missing rank only, unless asked for all
    }
  }
  if (!missing.empty()) {
    keepUntilFinalize(slots);  // late arrivals still land in them
    std::ostringstream names;
    for (std::size_t i = 0; i < missing.size(); ++i) names << (i ? ", " : "") << missing[i];
    TORCH_CHECK(false, "boostcomm: monitoredBarrier: ", missing.size() == 1 ? "Rank " : "Ranks ", names.str(),
                " failed to pass monitoredBarrier in ", timeout.count(), " ms (waited on rank 0)");
  }
  std::vector<Work> releases;
  for (int r = 1; r < size_; ++r) releases.push_back(comm_->sendAsync(ConstView(v.data, 1, v.dtype), r, kMonitoredBarrierTag));
  for (Work& w : releases) {
    if (!waitUntil(w)) keepUntilFinalize({token});
    TORCH_CHECK(w.test(), "boostcomm: monitoredBarrier: releasing the ranks did not complete within ",
                timeout.count(), " ms");
  }
}

void ProcessGroupBoostcomm::setSequenceNumberForGroup() { sequence_.store(0); }

std::uint64_t ProcessGroupBoostcomm::getSequenceNumberForGroup() { return sequence_.load(); }

}  // namespace boostcomm::python
