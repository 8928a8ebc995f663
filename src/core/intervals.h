// Intervals [first, second) on one clock, and their union: how long at least
// one was open (busy) and how long two or more were (congested). The one
// implementation behind the overlap statistics' communication time
// (telemetry/stats.h), the link meter's busy time and the link rows
// (executor/link_meter.h), measured and simulated (simulate/replay_sim.cc).
// ShareClock: each open interval's share of the time, as it goes (the
// progress engine's, for online selection's trials).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace boostcomm::core {

template <typename T>
using Interval = std::pair<T, T>;

// The length covered by at least one of `intervals`, in any order; they are
// sorted in place (no allocation: the link meter folds its full ring on the
// call path). Empty and reversed intervals cover nothing.
template <typename T>
T unionLength(std::vector<Interval<T>>& intervals) {
  // Recorded as they finish, which is start order for most callers: a check
  // costs a comparison per interval, the sort n log n.
  if (!std::is_sorted(intervals.begin(), intervals.end())) std::sort(intervals.begin(), intervals.end());
  T total{};
  T start{};
  T end{};
  bool open = false;
  for (const auto& [b, e] : intervals) {
    if (e <= b) continue;
    if (open && b <= end) {
      end = std::max(end, e);
      continue;
    }
    if (open) total += end - start;
    start = b;
    end = e;
    open = true;
  }
  if (open) total += end - start;
  return total;
}

template <typename T>
struct Occupancy {
  T busy{};       // covered by at least one interval: unionLength
  T congested{};  // covered by two or more
};

// A sweep over the start (+1) and end (-1) events in time order, ends first
// at a tie (touching intervals do not congest).
template <typename T>
Occupancy<T> occupancy(const std::vector<Interval<T>>& intervals) {
  std::vector<std::pair<T, int>> events;
  events.reserve(2 * intervals.size());
  for (const auto& [b, e] : intervals) {
    if (e <= b) continue;
    events.emplace_back(b, +1);
    events.emplace_back(e, -1);
  }
  std::sort(events.begin(), events.end());
  Occupancy<T> out;
  int depth = 0;
  T previous{};
  for (const auto& [t, delta] : events) {
    if (depth >= 1) out.busy += t - previous;
    if (depth >= 2) out.congested += t - previous;
    depth += delta;
    previous = t;
  }
  return out;
}

// A clock that runs at 1/k of real time while k intervals are open. An
// interval's share, the clock's advance from its start to its end, is the
// integral of dt / k over it; the shares of a set of intervals add up to
// their union length. Where the open intervals share one resource evenly
// (calls on one link), a share is about the time the interval's work would
// have taken alone.
template <typename T>
class ShareClock {
 public:
  // Real time `now` (never earlier than the last call's); `open` intervals
  // were open since the last call. Returns the clock's reading at `now`.
  T advance(T now, std::size_t open) {
    if (open > 0) value_ += (now - last_) / static_cast<T>(open);
    last_ = now;
    return value_;
  }

 private:
  T value_{};
  T last_{};
};

}  // namespace boostcomm::core
