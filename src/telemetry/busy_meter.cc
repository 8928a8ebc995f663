#include "telemetry/busy_meter.h"

#include <pthread.h>

#include <algorithm>

#include "core/clock.h"

namespace boostcomm::telemetry {
namespace {

bool cpuSeconds(clockid_t clock, double& out) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return false;  // the thread has exited
  out = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  return true;
}

}  // namespace

void BusyMeter::opStarted() {
  clockid_t clock{};
  const bool haveClock = pthread_getcpuclockid(pthread_self(), &clock) == 0;
  std::lock_guard lock(mutex_);
  if (inFlight_++ > 0) return;
  busyStartSeconds_ = core::nowSeconds();
  callerClock_ = clock;
  callerClockValid_ = haveClock && cpuSeconds(clock, busyStartCpuSeconds_);
}

void BusyMeter::opFinished() {
  std::lock_guard lock(mutex_);
  ++totals_.ops;
  if (inFlight_ == 0 || --inFlight_ > 0) return;
  const double wall = core::nowSeconds() - busyStartSeconds_;
  double cpu = 0;
  double hidden = 0;
  if (callerClockValid_ && cpuSeconds(callerClock_, cpu)) hidden = std::clamp(cpu - busyStartCpuSeconds_, 0.0, wall);
  totals_.commSeconds += wall;
  totals_.hiddenSeconds += hidden;
  totals_.exposedSeconds += wall - hidden;
  ++totals_.busyPeriods;
}

std::uint64_t BusyMeter::inFlight() const {
  std::lock_guard lock(mutex_);
  return inFlight_;
}

BusyTotals BusyMeter::totals(bool reset) {
  std::lock_guard lock(mutex_);
  BusyTotals out = totals_;
  if (reset) totals_ = BusyTotals{};
  return out;
}

}  // namespace boostcomm::telemetry
