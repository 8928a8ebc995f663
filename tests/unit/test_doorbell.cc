// core/doorbell.h: a sleep ends at a ring, in this process or from another
// one sharing the memory (a futex without FUTEX_PRIVATE_FLAG), and a ring
// between reading the value and sleeping is never lost. The bounds below
// are far above any scheduling delay: a missed ring sleeps to a 60 s
// timeout and fails them.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <new>
#include <thread>

#include "core/doorbell.h"

namespace boostcomm::core {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(Doorbell, ARingBeforeTheSleepEndsItAtOnce) {
  Doorbell bell;
  const std::uint32_t seen = bell.value();
  bell.ring();
  const auto start = Clock::now();
  bell.sleep(seen, 60s);
  EXPECT_LT(Clock::now() - start, 30s);
  EXPECT_EQ(bell.value(), seen + 1);
}

TEST(Doorbell, ARingWakesAThreadAsleep) {
  Doorbell bell;
  std::atomic<bool> reading{false};
  Clock::duration slept{};
  std::thread sleeper([&] {
    const std::uint32_t seen = bell.value();
    reading = true;
    const auto start = Clock::now();
    bell.sleep(seen, 60s);
    slept = Clock::now() - start;
  });
  while (!reading) std::this_thread::yield();
  bell.ring();
  sleeper.join();
  EXPECT_LT(slept, 30s);
}

TEST(Doorbell, ARingWakesAProcessAsleepOnSharedMemory) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bell = new (mem) Doorbell;
  auto* reading = new (static_cast<char*>(mem) + sizeof(Doorbell)) std::atomic<int>{0};
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::uint32_t seen = bell->value();
    reading->store(1);
    const auto start = Clock::now();
    bell->sleep(seen, 60s);
    _exit(Clock::now() - start < 30s && bell->value() != seen ? 0 : 1);
  }
  while (reading->load() == 0) std::this_thread::yield();
  bell->ring();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child slept to its timeout";
  munmap(mem, 4096);
}

}  // namespace
}  // namespace boostcomm::core
