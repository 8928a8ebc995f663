// Doorbell: a word in memory the processes of a node share, on which a
// thread sleeps until another process (or thread) rings it: a futex that
// works across processes (the word lives in the shared-memory segment; no
// FUTEX_PRIVATE_FLAG).
//
// The progress thread of a rank whose collectives wait on shared-memory
// hand-offs sleeps on its own bell instead of polling; every peer rings it
// after it moved something the rank may be waiting for (shm/engine.cc), and
// the rank's own wakers (new work, a transport's completion signal) ring it
// too. A ring costs an atomic add, and a wake-up call only while a thread
// sleeps. Zero-filled memory is a valid bell.
//
// No lost wake-up: a sleeper reads value() before it looks at what it waits
// for, and sleep(seen) returns at once if the bell rang since; ring() adds
// before it checks for sleepers, sleep() counts itself before it compares
// (both sequentially consistent), so a ringer either sees the sleeper or the
// sleeper sees the ring.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace boostcomm::core {

class alignas(64) Doorbell {
 public:
  std::uint32_t value() const { return rings_.load(std::memory_order_seq_cst); }
  void ring();
  // Sleeps until the bell rings (its value differs from `seen`), or for
  // `timeout` at most; returns at once if it rang since `seen` was read.
  void sleep(std::uint32_t seen, std::chrono::microseconds timeout);

 private:
  std::atomic<std::uint32_t> rings_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};
static_assert(sizeof(Doorbell) == 64);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace boostcomm::core
