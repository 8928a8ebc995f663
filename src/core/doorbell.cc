#include "core/doorbell.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace boostcomm::core {
namespace {

// The futex word is the atomic's value (std::atomic<std::uint32_t> holds
// exactly one std::uint32_t). Shared, not private: the ringer may be
// another process mapping the same memory.
long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

void Doorbell::ring() {
  rings_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) futex(&rings_, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::sleep(std::uint32_t seen, std::chrono::microseconds timeout) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (rings_.load(std::memory_order_seq_cst) == seen) {
    const auto us = timeout.count();
    const timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
    // Returns on a ring, a changed value (EAGAIN), the timeout or a signal:
    // the caller looks again either way.
    futex(&rings_, FUTEX_WAIT, seen, &ts);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace boostcomm::core
