// The progress engine's share clock (ProgressEngine::enableShareClock), what
// online selection times asynchronous trials by: operations in flight
// together split the time, each charged dt / k; where the transport runs its
// native collectives in turn (Transport::runsNativesInTurn), a native call
// waiting behind another is charged nothing until that one has retired.
// Two in-process ranks: rank 0's engine launches two native allreduces, and
// the test completes them one at a time by calling rank 1's side itself.
// Every bound below comes from clock reads around the engine's calls, so
// none depends on how long a sleep or a sweep takes.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/spin_mutex.h"
#include "executor/progress_engine.h"
#include "testing/inproc_transport.h"

namespace boostcomm {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double usBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

struct Launched {
  std::shared_ptr<executor::OpState> state = std::make_shared<executor::OpState>();
  std::vector<float> send = std::vector<float>(4, 1.0f);
  std::vector<float> recv = std::vector<float>(4, 0.0f);
};

// Clock reads around the run: [before, after] of each event.
struct Times {
  Clock::time_point launchA[2], launchB[2], retireA[2], retireB[2];
};

// Launches A then B (native allreduces on rank 0), then completes A, then B,
// sleeping 20 ms before each completion; returns the clock reads around each.
// together: both complete before the engine's next sweep (retireA = retireB).
Times run(transport::Transport& rank0, transport::Transport& rank1, Launched& a, Launched& b, bool together = false) {
  core::SpinMutex mutex;
  std::lock_guard lock(mutex);
  executor::ProgressEngine engine(rank0, mutex);
  engine.enableShareClock();
  auto schedule =
      std::make_shared<executor::Schedule>(Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, "native");
  executor::NativeCall call;
  call.count = 4;
  schedule->native(call);
  auto launch = [&](Launched& op, std::uint64_t sequence) {
    executor::Binding binding;
    binding.send = op.send.data();
    binding.recv = op.recv.data();
    engine.launch(engine.acquireExecution(), schedule, binding, sequence, 0, false, op.state);
  };
  Times t;
  t.launchA[0] = Clock::now();
  launch(a, 0);
  t.launchA[1] = t.launchB[0] = Clock::now();
  launch(b, 1);
  t.launchB[1] = Clock::now();
  for (int i = 0; i < 4; ++i) engine.progress();  // both posted; neither can complete without rank 1
  EXPECT_FALSE(a.state->isDone());
  EXPECT_FALSE(b.state->isDone());
  std::vector<float> send(4, 2.0f);
  std::vector<float> recv(4);
  for (int which = 0; which < 2; ++which) {
    std::this_thread::sleep_for(20ms);
    rank1.nativeAllreduce(send.data(), recv.data(), 4, DataType::kFloat32, ReduceOp::kSum, nullptr);
    if (together && which == 0) continue;
    Launched& op = which == 0 ? a : b;
    Clock::time_point* retire = which == 0 ? t.retireA : t.retireB;
    retire[0] = Clock::now();
    while (!op.state->isDone()) engine.progress();
    retire[1] = Clock::now();
  }
  if (together) {
    EXPECT_TRUE(a.state->isDone());
    t.retireA[0] = t.retireB[0];
    t.retireA[1] = t.retireB[1];
  }
  EXPECT_FALSE(a.state->error());
  EXPECT_FALSE(b.state->error());
  EXPECT_EQ(a.recv, std::vector<float>(4, 3.0f));
  EXPECT_EQ(b.recv, std::vector<float>(4, 3.0f));
  return t;
}

TEST(ShareClock, NativeCallsWaitingTheirTurnAreChargedNothing) {
  auto transports = transport::InProcFabric::create(2);
  static_cast<transport::InProcTransport&>(*transports[0]).setNativesInTurn(true);
  Launched a, b;
  const Times t = run(*transports[0], *transports[1], a, b);
  // A ran alone in the clock from its launch to its retirement: its share is
  // its wall time. B was charged from A's retirement to its own.
  EXPECT_GE(a.state->sharedUs, usBetween(t.launchA[1], t.retireA[0]));
  EXPECT_LE(a.state->sharedUs, usBetween(t.launchA[0], t.retireA[1]));
  EXPECT_GE(b.state->sharedUs, usBetween(t.retireA[1], t.retireB[0]));
  EXPECT_LE(b.state->sharedUs, usBetween(t.retireA[0], t.retireB[1]));
}

TEST(ShareClock, NativeCallsRetiredInOneSweepSplitTheFirstOnesShare) {
  // Both complete before the engine looks: B ran, unseen, after A. Each gets
  // half of the time A was charged (a time for both, none lost).
  auto transports = transport::InProcFabric::create(2);
  static_cast<transport::InProcTransport&>(*transports[0]).setNativesInTurn(true);
  Launched a, b;
  const Times t = run(*transports[0], *transports[1], a, b, /*together=*/true);
  EXPECT_EQ(a.state->sharedUs, b.state->sharedUs);
  const double sum = a.state->sharedUs + b.state->sharedUs;
  EXPECT_GE(sum, usBetween(t.launchA[1], t.retireB[0]) * (1 - 1e-12));
  EXPECT_LE(sum, usBetween(t.launchA[0], t.retireB[1]) * (1 + 1e-12));
}

TEST(ShareClock, CallsInFlightTogetherSplitTheTime) {
  // The same calls where natives may run side by side (the default): while
  // both are in flight each is charged half; the shares add up to the time
  // from A's launch to B's retirement.
  auto transports = transport::InProcFabric::create(2);
  Launched a, b;
  const Times t = run(*transports[0], *transports[1], a, b);
  EXPECT_GE(a.state->sharedUs, usBetween(t.launchA[1], t.launchB[0]) + usBetween(t.launchB[1], t.retireA[0]) / 2);
  EXPECT_LE(a.state->sharedUs, usBetween(t.launchA[0], t.launchB[1]) + usBetween(t.launchB[0], t.retireA[1]) / 2);
  const double sum = a.state->sharedUs + b.state->sharedUs;
  EXPECT_GE(sum, usBetween(t.launchA[1], t.retireB[0]));
  EXPECT_LE(sum, usBetween(t.launchA[0], t.retireB[1]));
}

}  // namespace
}  // namespace boostcomm
