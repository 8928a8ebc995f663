// Who issued a call: the caller's stack (the Python stack when a collective
// is called from Python), kept per flight-recorder entry in a process-local
// ring parallel to the shared CallStatus ring (core/call_status.h).
//
// Why apart from the shared ring: peers read that ring from shared memory and
// must not follow pointers into this process, and a FlightEntry stays one
// cache line (a peer's read is one line transfer). Why opaque words: the core
// knows nothing of Python. The caller's layer (python/src/caller_stack.cc)
// captures frames as (code id, instruction offset) pairs, a few ns each, into
// this thread's pending stack before it calls the library; the library binds
// the pending stack to the entry of every call it starts in that thread
// (CallerRing::bind) until the layer clears it; the text ("file.py:12 in train_step") is
// made only when a dump is written, by the formatter that layer installed.
// Signal-handler dumps leave the stacks out (the formatter is not
// async-signal-safe).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/call_status.h"

namespace boostcomm::core {

// Innermost frames kept per call.
inline constexpr std::size_t kCallerFrames = 8;

// One frame: an id the capturing layer gives the frame's code (nonzero) and
// the instruction offset in it, packed in one word: id << 32 | offset.
struct CallerStack {
  std::uint32_t depth = 0;
  std::uint64_t frames[kCallerFrames] = {};
};

// This thread's stack for the call it is about to make (depth 0: none).
CallerStack& pendingCallerStack();

// Frame text, innermost first: installed by the capturing layer (one per
// process; nullptr: none). Called outside signal handlers only.
using CallerFormatter = void (*)(const CallerStack& stack, std::vector<std::string>& out);
void setCallerFormatter(CallerFormatter formatter);
CallerFormatter callerFormatter();

// The process-local ring: slot seq % kFlightRingEntries holds call seq's
// stack, seqlocked like FlightEntry (tag = seq + 1, 0 while written), so the
// watchdog thread can read it while the owner writes.
class CallerRing {
 public:
  // The owner, in the issuing thread: copies this thread's pending stack
  // into call `seq`'s slot (none: the slot says so). A load and a branch for
  // calls without one.
  void bind(std::uint64_t seq) {
    CallerStack& pending = pendingCallerStack();
    Slot& s = slots_[seq % kFlightRingEntries];
    if (pending.depth == 0) {
      if (s.depth.load(std::memory_order_relaxed) != 0) s.depth.store(0, std::memory_order_relaxed);
      s.tag.store(seq + 1, std::memory_order_release);
      return;
    }
    s.tag.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (std::uint32_t i = 0; i < pending.depth; ++i) s.frames[i].store(pending.frames[i], std::memory_order_relaxed);
    s.depth.store(pending.depth, std::memory_order_relaxed);
    s.tag.store(seq + 1, std::memory_order_release);
  }
  // Call seq's stack, if its slot still holds it (depth 0: no stack).
  bool read(std::uint64_t seq, CallerStack& out) const;

 private:
  struct Slot {
    std::atomic<std::uint64_t> tag{0};
    std::atomic<std::uint32_t> depth{0};
    std::atomic<std::uint64_t> frames[kCallerFrames] = {};
  };
  Slot slots_[kFlightRingEntries];
};

}  // namespace boostcomm::core
