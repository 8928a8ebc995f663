#include "api/watchdog.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "api/stall_inspector.h"

namespace boostcomm::detail {

namespace {

class Watchdog {
 public:
  void add(StallInspector* inspector) {
    std::lock_guard lock(mutex_);
    inspectors_.push_back(inspector);
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_one();  // a shorter threshold may shorten the tick
  }
  void remove(StallInspector* inspector) {
    std::lock_guard lock(mutex_);  // waits for a tick in progress
    std::erase(inspectors_, inspector);
  }

 private:
  // A quarter of the shortest threshold, within [10 ms, 500 ms].
  std::chrono::milliseconds tickLocked() const {
    std::int64_t shortest = 2000;
    for (const StallInspector* i : inspectors_) {
      if (i->warnMs() > 0) shortest = std::min(shortest, i->warnMs());
      if (i->deadlineMs() > 0) shortest = std::min(shortest, i->deadlineMs());
    }
    return std::chrono::milliseconds(std::clamp<std::int64_t>(shortest / 4, 10, 500));
  }
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      cv_.wait_for(lock, tickLocked());
      const auto now = std::chrono::steady_clock::now();
      for (StallInspector* i : inspectors_) i->tick(now);
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<StallInspector*> inspectors_;
  bool started_ = false;
};

Watchdog& instance() {
  static Watchdog* dog = new Watchdog;  // never destroyed (see watchdog.h)
  return *dog;
}

}  // namespace

void watch(StallInspector* inspector) { instance().add(inspector); }
void unwatch(StallInspector* inspector) { instance().remove(inspector); }

}  // namespace boostcomm::detail
