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

// Polls `w` until it completes (true) or `until` passes (false).
bool waitUntil(Work& w, core::Clock::time_point until) {
  while (!w.test()) {
    if (core::Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
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
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  if (size_ == 1) return;
  // Rank 0's verdict, sent to every rank that arrived: verdict[0] is the
  // number of ranks that did not (-1: rank 0 ran out of time before asking
  // them all), verdict[1..] those ranks. A rank that arrived thus raises at
  // once, naming the missing ranks, instead of waiting out its own timeout
  // or seeing rank 0's connection close when rank 0 exits on its error.
  if (rank_ != 0) {
    monitoredBarrierPeer(timeout, core::Clock::now() + timeout);
  } else {
    monitoredBarrierRoot(timeout, core::Clock::now() + timeout, waitAllRanks);
  }
}

void ProcessGroupBoostcomm::monitoredBarrierPeer(std::chrono::milliseconds timeout, core::Clock::time_point deadline) {
  const auto verdictCount = static_cast<std::int64_t>(size_);
  at::Tensor token = at::zeros({1}, at::kInt);
  at::Tensor verdict = at::zeros({verdictCount}, at::kInt);
  const View t = viewOf(token, "monitoredBarrier token", rank_);
  Work arrive = comm_->sendAsync(ConstView(t.data, 1, t.dtype), 0, kMonitoredBarrierTag);
  Work release = comm_->recvAsync(viewOf(verdict, "monitoredBarrier verdict", rank_), 0, kMonitoredBarrierTag);
  // Rank 0 may itself wait the whole timeout for a late rank before its
  // verdict leaves, so the others wait for it up to twice the timeout.
  const auto verdictDeadline = deadline + timeout;
  const bool answered = waitUntil(arrive, verdictDeadline) && waitUntil(release, verdictDeadline);
  if (!answered) keepUntilFinalize({token, verdict});  // the messages may still land in them
  TORCH_CHECK(answered, "boostcomm: monitoredBarrier on rank ", rank_,
              ": rank 0 did not release the barrier within ", 2 * timeout.count(), " ms (twice the timeout)");
  const int* v = verdict.data_ptr<int>();
  if (v[0] == -1) {
    TORCH_CHECK(false, "boostcomm: monitoredBarrier on rank ", rank_, ": Rank 0 timed out in monitoredBarrier after ",
                timeout.count(), " ms");
  }
  if (v[0] > 0) {
    std::ostringstream names;
    for (int i = 0; i < v[0] && i + 1 < size_; ++i) names << (i ? ", " : "") << v[i + 1];
    TORCH_CHECK(false, "boostcomm: monitoredBarrier on rank ", rank_, ": rank 0 reports ",
                v[0] == 1 ? "Rank " : "Ranks ", names.str(), " failed to pass monitoredBarrier in ", timeout.count(),
                " ms");
  }
}

void ProcessGroupBoostcomm::monitoredBarrierRoot(std::chrono::milliseconds timeout, core::Clock::time_point deadline,
                                                 bool waitAllRanks) {
  const auto verdictCount = static_cast<std::int64_t>(size_);
  std::vector<at::Tensor> slots;
  std::vector<Work> arrivals;
  for (int r = 1; r < size_; ++r) {
    slots.push_back(at::zeros({1}, at::kInt));
    arrivals.push_back(comm_->recvAsync(viewOf(slots.back(), "monitoredBarrier token", rank_), r, kMonitoredBarrierTag));
  }
  std::vector<int> missing;
  std::vector<int> arrived;
  bool outOfTime = false;
  int next = 1;  // the first rank not waited on yet
  for (; next < size_; ++next) {
    // As gloo: without waitAllRanks each rank gets what is left of the timeout, in whole ms, and
    // once none is left rank 0 reports its own timeout (torch's suite checks "Rank 0 timed out").
    const auto leftMs = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - core::Clock::now()).count();
    if (!waitAllRanks && leftMs <= 0) {
      outOfTime = true;
      break;
    }
    if (waitUntil(arrivals[static_cast<std::size_t>(next - 1)], deadline)) {
      arrived.push_back(next);
    } else {
      missing.push_back(next);
      if (!waitAllRanks) {  // torch names the first missing rank only, unless asked for all
        ++next;
        break;
      }
    }
  }
  // Ranks not waited on after an early stop that have arrived all the same
  // get the verdict too.
  for (; next < size_; ++next) {
    if (arrivals[static_cast<std::size_t>(next - 1)].test()) arrived.push_back(next);
  }
  // The verdict goes to the ranks that arrived (their release recv is
  // posted); a rank that has not arrived gets nothing, so nothing is left
  // pending for a rank that never comes.
  at::Tensor verdict = at::zeros({verdictCount}, at::kInt);
  int* v = verdict.data_ptr<int>();
  v[0] = outOfTime ? -1 : static_cast<int>(missing.size());
  for (std::size_t i = 0; i < missing.size(); ++i) v[i + 1] = missing[i];
  const View vv = viewOf(verdict, "monitoredBarrier verdict", rank_);
  std::vector<Work> releases;
  for (int r : arrived) releases.push_back(comm_->sendAsync(ConstView(vv.data, vv.count, vv.dtype), r, kMonitoredBarrierTag));
  const bool failed = outOfTime || !missing.empty();
  // A failed barrier still delivers its verdict before rank 0 raises (a
  // rank that arrived has its recv posted, so this takes a round trip);
  // bounded by the timeout, as the release of a barrier that passed.
  const auto releaseDeadline = core::Clock::now() + timeout;
  bool released = true;
  for (Work& w : releases) released = waitUntil(w, releaseDeadline) && released;
  if (!released || failed) keepUntilFinalize({verdict});
  if (failed) keepUntilFinalize(slots);  // late arrivals still land in them
  if (outOfTime) {
    std::ostringstream done;
    for (std::size_t i = 0; i < arrived.size(); ++i) done << (i ? ", " : "") << arrived[i];
    TORCH_CHECK(false, "boostcomm: monitoredBarrier: Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                " ms (", arrived.empty() ? "no rank arrived" : "arrived: ranks " + done.str(), ")");
  }
  if (!missing.empty()) {
    std::ostringstream names;
    for (std::size_t i = 0; i < missing.size(); ++i) names << (i ? ", " : "") << missing[i];
    TORCH_CHECK(false, "boostcomm: monitoredBarrier: ", missing.size() == 1 ? "Rank " : "Ranks ", names.str(),
                " failed to pass monitoredBarrier in ", timeout.count(), " ms (waited on rank 0)");
  }
  TORCH_CHECK(released, "boostcomm: monitoredBarrier: releasing the ranks did not complete within ", timeout.count(),
              " ms");
}

void ProcessGroupBoostcomm::setSequenceNumberForGroup() { sequence_.store(0); }

std::uint64_t ProcessGroupBoostcomm::getSequenceNumberForGroup() { return sequence_.load(); }

}  // namespace boostcomm::python
