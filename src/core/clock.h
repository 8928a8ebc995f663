// The monotonic clock every measurement uses (durations, link busy time,
// trial timings, probes, deadlines): std::chrono::steady_clock and the few
// conversions callers need. Wall-clock time for traces is the timeline's own
// (telemetry/timeline.h nowUs: system time anchored once, advanced by this clock).
#pragma once

#include <chrono>
#include <cstdint>

namespace boostcomm::core {

using Clock = std::chrono::steady_clock;

// Nanoseconds on the monotonic clock (an arbitrary epoch: differences only).
inline std::int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
// The same in seconds.
inline double nowSeconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Microseconds and milliseconds from `from` to `to`, and from `since` to now.
inline double usBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}
inline double usSince(Clock::time_point since) { return usBetween(since, Clock::now()); }
inline double msSince(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

}  // namespace boostcomm::core
