#include "core/caller_stack.h"

#include <algorithm>

namespace boostcomm::core {

namespace {
std::atomic<CallerFormatter> gFormatter{nullptr};
}  // namespace

CallerStack& pendingCallerStack() {
  thread_local CallerStack pending;
  return pending;
}

void setCallerFormatter(CallerFormatter formatter) { gFormatter.store(formatter, std::memory_order_release); }
CallerFormatter callerFormatter() { return gFormatter.load(std::memory_order_acquire); }

bool CallerRing::read(std::uint64_t seq, CallerStack& out) const {
  const Slot& s = slots_[seq % kFlightRingEntries];
  const std::uint64_t before = s.tag.load(std::memory_order_acquire);
  if (before != seq + 1) return false;
  out.depth = std::min<std::uint32_t>(s.depth.load(std::memory_order_relaxed), kCallerFrames);
  for (std::uint32_t i = 0; i < out.depth; ++i) out.frames[i] = s.frames[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return s.tag.load(std::memory_order_relaxed) == before;
}

}  // namespace boostcomm::core
