// The small collectives: blocking calls of a one-node communicator whose
// slot payload is at most kSmallAllreduceBytes (segment.h), in place of the
// backend's collective (ShmEngine::smallCollective;
// CommunicatorImpl::runWithoutSchedule, the small route of api/route.h).
//
// A rank with input (every rank; a broadcast's root alone) copies it into
// its slot for the call's parity, beside the call's sequence and
// fingerprint, and stores the sequence last (release). Then it waits for the
// slots it needs (every peer's; a broadcast receiver: the root's), compares
// each one's fingerprint with its own, and combines them in rank order
// (allreduce: reduces them all; allgather: copies each rank's block;
// reduce_scatter: reduces its own block of each; broadcast: copies the
// root's), so every rank ends with the same bits. One line transfer per
// peer carries both a small call's data and its check: the fingerprint is
// free here, where the backend call plus a read of the peer's call status
// costs a second transfer (docs/RELIABILITY.md). Slots are found by the
// call's sequence, not by the order of messages, so a slot of a call ranks
// disagreed on (two ranks both taking themselves for a broadcast's root)
// is never read by a later call.
//
// A broadcast of at most kBroadcastRingBytes uses the root's ring of
// kBroadcastRingEntries entries instead of the two slots, so its root can
// run ahead of its receivers (segment.h).
//
// Reuse: call q writes slot q % 2, which call q - 2 (or earlier) used. A peer
// has finished reading that call once it has started a later one, which this
// rank knows without looking when the previous call read every peer's slot;
// otherwise it reads the peers' call status.
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
// ... or this long after the last poll, whichever comes first. A yield is
// ~1.5 us on an idle core (4096 of them ~6 ms) but a whole time slice when
// another process wants the core: 4096 took 6.3 s beside a busy loop (`yes`)
// on this 2-core host, and the deadline (and the abort, peer-exit and
// mismatch checks) of a waiting call came seconds late (faults.extra's
// kTimeout at 8.6 s instead of 4 s). A clock read (~20 ns) per yield bounds it.
constexpr auto kPollInterval = std::chrono::milliseconds(5);

class Waiter {
 public:
  explicit Waiter(const std::function<void()>& poll) : poll_(poll) {}
  void operator()() {
    ++spins_;
    if (spins_ < kSpinsBeforeYield) {
      cpuPause();
      return;
    }
    sched_yield();
    // The first poll comes with the first yield (its caller's deadline
    // clock starts there), then every kPollEvery waits or kPollInterval.
    const auto now = std::chrono::steady_clock::now();
    if (spins_ == kSpinsBeforeYield || spins_ % kPollEvery == 0 || now - lastPoll_ >= kPollInterval) {
      lastPoll_ = now;
      poll_();
    }
  }

 private:
  const std::function<void()>& poll_;
  std::uint32_t spins_ = 0;
  std::chrono::steady_clock::time_point lastPoll_{};
};

// Writes this rank's input (`bytes` of `data`) and the call's fingerprint
// into `slot`, its tag last (release).
template <std::size_t Bytes>
void publishSlot(TaggedSlot<Bytes>& slot, const transport::SmallCall& call, const void* data, std::size_t bytes) {
  slot.word = call.fingerprint.word();
  slot.count = call.fingerprint.count;
  if (bytes > 0) std::memcpy(slot.data, data, bytes);
  slot.tag.store(call.sequence + 1, std::memory_order_release);
}

// Waits until `slot` holds the call; whether its fingerprint differs from
// the call's (then in `theirs`; never with call.compare false).
template <std::size_t Bytes>
bool differs(const TaggedSlot<Bytes>& slot, const transport::SmallCall& call, Waiter& wait, core::Fingerprint& theirs) {
  while (slot.tag.load(std::memory_order_acquire) != call.sequence + 1) wait();
  if (!call.compare || (slot.word == call.fingerprint.word() && slot.count == call.fingerprint.count)) return false;
  theirs = core::Fingerprint::fromWord(slot.word, slot.count);
  return true;
}

}  // namespace

std::size_t ShmEngine::smallAllreduceAutoBytes() const {
  const unsigned threads = std::thread::hardware_concurrency();  // the host's: alike on its ranks
  if (threads > 0 && static_cast<unsigned>(size_) > threads) return kSmallAllreduceBytes;
  return std::min<std::size_t>(size_ == 2 ? 8192 : 4096, kSmallAllreduceBytes);
}

template <typename Wait>
void ShmEngine::awaitAllStarted(std::uint64_t atLeast, Wait& wait) {
  if (smallAllStarted_ >= atLeast) return;
  std::uint64_t least = ~std::uint64_t{0};
  for (int r = 0; r < size_; ++r) {
    std::uint64_t started = 0;
    while ((started = control(r).status.started.load(std::memory_order_acquire)) < atLeast) wait();
    least = std::min(least, started);
  }
  smallAllStarted_ = least;
}

int ShmEngine::smallCollective(const transport::SmallCall& call, core::Fingerprint& theirs,
                               const std::function<void()>& poll) {
  const std::size_t elementBytes = dataTypeSize(call.dtype);
  const std::size_t bytes = call.slotCount(rank_, size_) * elementBytes;
  BC_INTERNAL(bytes <= kSmallAllreduceBytes, "smallCollective of " << bytes << " bytes");
  BC_INTERNAL(call.op != ReduceOp::kAvg ||
                  (call.collective != Collective::kAllreduce && call.collective != Collective::kReduceScatter),
              "smallCollective does not divide (kAvg)");
  BC_INTERNAL(queue_.size() == head_, "smallCollective with shm collectives in flight");
  const bool broadcast = call.collective == Collective::kBroadcast;
  const bool writes = !broadcast || call.root == rank_;
  const std::size_t parity = call.sequence % 2;
  const std::uint64_t tag = call.sequence + 1;
  Waiter wait(poll);

  if (broadcast && call.count * elementBytes <= kBroadcastRingBytes) {
    // The broadcast ring: the root writes its entry of the call and returns;
    // a receiver waits for it. An entry's previous call must be finished
    // everywhere (every rank has started a later one) before its reuse.
    const std::size_t index = call.sequence % kBroadcastRingEntries;
    if (writes) {
      const std::uint64_t previous = broadcastRingUse_[index];
      if (previous != 0) awaitAllStarted(previous + 1, wait);
      publishSlot(control(rank_).broadcastRing[index], call, call.recv, bytes);
      broadcastRingUse_[index] = tag;
      return -1;
    }
    const BroadcastEntry& entry = control(call.root).broadcastRing[index];
    if (differs(entry, call, wait, theirs)) return call.root;
    if (call.count > 0) std::memcpy(call.recv, entry.data, call.count * elementBytes);
    if (size_ == 2) smallAllStarted_ = std::max(smallAllStarted_, tag);
    return -1;
  }

  if (writes) {
    // The slot's previous call must be finished everywhere: every rank has
    // started a later one (CallStatus::started > that call's sequence + 1).
    const std::uint64_t previous = smallSlotUse_[parity];
    if (previous != 0) awaitAllStarted(previous + 1, wait);
    publishSlot(control(rank_).small[parity], call, broadcast ? call.recv : call.send, bytes);
    smallSlotUse_[parity] = tag;
  }
  if (broadcast && writes) return -1;  // the root's data is its own; its check comes later

  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || (broadcast && r != call.root)) continue;
    if (differs(control(r).small[parity], call, wait, theirs)) return r;
  }
  // Every rank has started this call when every peer's slot was read.
  if (!broadcast || size_ == 2) smallAllStarted_ = std::max(smallAllStarted_, tag);

  const auto data = [&](int r) -> const char* { return control(r).small[parity].data; };
  switch (call.collective) {
    case Collective::kBroadcast:
      if (call.count > 0) std::memcpy(call.recv, data(call.root), call.count * elementBytes);
      break;
    case Collective::kAllgather: {
      const std::size_t block = call.count * elementBytes;
      for (int r = 0; r < size_ && block > 0; ++r) {
        std::memcpy(static_cast<char*>(call.recv) + static_cast<std::size_t>(r) * block, data(r), block);
      }
      break;
    }
    case Collective::kAllreduce:
    case Collective::kReduceScatter: {
      // Rank order: slot 0 op slot 1, then op slot 2, ... (the same on every
      // rank); reduce_scatter takes this rank's block of each slot.
      const std::size_t offset =
          call.collective == Collective::kReduceScatter ? static_cast<std::size_t>(rank_) * call.count * elementBytes : 0;
      if (size_ == 1) {
        if (call.count > 0) std::memmove(call.recv, data(0) + offset, call.count * elementBytes);
        break;
      }
      core::reduce(call.recv, data(0) + offset, data(1) + offset, call.count, call.dtype, call.op);
      for (int r = 2; r < size_; ++r) {
        core::reduce(call.recv, call.recv, data(r) + offset, call.count, call.dtype, call.op);
      }
      break;
    }
    case Collective::kBarrier:
      break;
  }
  return -1;
}

}  // namespace boostcomm::shm
