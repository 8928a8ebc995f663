// The small allreduce: payloads up to kSmallAllreduceBytes (segment.h), for
// the blocking calls of a one-node communicator, in place of the backend's
// collective (ShmEngine::smallAllreduce; CommunicatorImpl::runNativeDirectly).
//
// Every rank copies its input into its slot for the call's parity, beside
// the call's sequence and fingerprint, and stores the sequence last
// (release). Then it waits for every peer's slot of the same call, compares
// the peer's fingerprint with its own, and reduces all slots in rank order
// into its result (each rank computes the whole reduction, so every rank
// ends with the same bits). One line transfer per peer carries both a small
// call's data and its check: the fingerprint is free here, where the backend
// call plus a read of the peer's call status costs a second transfer
// (docs/RELIABILITY.md).
//
// Reuse: call q writes slot q % 2, which call q - 2 (or earlier) used. A peer
// has finished reading that call once it has started a later one, which this
// rank knows without looking when the previous call was small too (it read
// every peer's slot of it); otherwise it reads the peers' call status.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "core/reduce.h"
#include "shm/engine.h"

namespace boostcomm::shm {

namespace {

// Pauses before a waiting rank starts yielding its core, and polls between
// calls of `poll`. Few: on an oversubscribed host (more ranks than cores) the
// peer this rank waits for may need its core (as the progress engine's
// kIdlePollsBeforeYield; 4096 pauses made 3 ranks on 2 cores 15x slower).
constexpr std::uint32_t kSpinsBeforeYield = 64;
constexpr std::uint32_t kPollEvery = 4096;

class Waiter {
 public:
  explicit Waiter(const std::function<void()>& poll) : poll_(poll) {}
  void operator()() {
    ++spins_;
    if (spins_ < kSpinsBeforeYield) {
      cpuPause();
    } else {
      sched_yield();
    }
    if (spins_ % kPollEvery == 0) poll_();
  }

 private:
  const std::function<void()>& poll_;
  std::uint32_t spins_ = 0;
};

}  // namespace

std::size_t ShmEngine::smallAllreduceAutoBytes() const {
  const unsigned threads = std::thread::hardware_concurrency();  // the host's: alike on its ranks
  if (threads > 0 && static_cast<unsigned>(size_) > threads) return kSmallAllreduceBytes;
  return std::min<std::size_t>(size_ == 2 ? 8192 : 4096, kSmallAllreduceBytes);
}

int ShmEngine::smallAllreduce(const transport::SmallAllreduceCall& call, core::Fingerprint& theirs,
                              const std::function<void()>& poll) {
  const std::size_t bytes = call.count * dataTypeSize(call.dtype);
  BC_INTERNAL(bytes <= kSmallAllreduceBytes, "smallAllreduce of " << bytes << " bytes");
  BC_INTERNAL(call.op != ReduceOp::kAvg, "smallAllreduce does not divide (kAvg)");
  BC_INTERNAL(queue_.size() == head_, "smallAllreduce with shm collectives in flight");
  const std::size_t parity = call.sequence % 2;
  const std::uint64_t tag = call.sequence + 1;
  Waiter wait(poll);

  // The slot's previous call must be finished everywhere: every rank has
  // started a later one (CallStatus::started > that call's sequence + 1).
  const std::uint64_t previous = smallSlotUse_[parity];
  if (previous != 0 && smallAllStarted_ < previous + 1) {
    for (int r = 0; r < size_; ++r) {
      while (control(r).status.started.load(std::memory_order_acquire) < previous + 1) wait();
    }
    smallAllStarted_ = previous + 1;
  }

  SmallSlot& mine = control(rank_).small[parity];
  mine.word = call.fingerprint.word();
  mine.count = call.fingerprint.count;
  if (bytes > 0) std::memcpy(mine.data, call.send, bytes);
  mine.tag.store(tag, std::memory_order_release);
  smallSlotUse_[parity] = tag;

  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const SmallSlot& peer = control(r).small[parity];
    while (peer.tag.load(std::memory_order_acquire) != tag) wait();
    if (call.compare && (peer.word != mine.word || peer.count != mine.count)) {
      theirs = core::Fingerprint::fromWord(peer.word, peer.count);
      return r;
    }
  }
  smallAllStarted_ = tag;  // every rank has started this call

  // Rank order: slot 0 op slot 1, then op slot 2, ... (the same on every rank).
  const char* first = control(0).small[parity].data;
  if (size_ == 1) {
    if (bytes > 0) std::memmove(call.recv, first, bytes);
    return -1;
  }
  core::reduce(call.recv, first, control(1).small[parity].data, call.count, call.dtype, call.op);
  for (int r = 2; r < size_; ++r) {
    core::reduce(call.recv, call.recv, control(r).small[parity].data, call.count, call.dtype, call.op);
  }
  return -1;
}

}  // namespace boostcomm::shm
