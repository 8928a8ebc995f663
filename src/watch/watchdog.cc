#include "watch/watchdog.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "watch/flight_signals.h"
#include "watch/stall_inspector.h"
#include "core/thread_name.h"

namespace boostcomm::detail {

namespace {

void stopAtExit();

class Watchdog {
 public:
  void add(StallInspector* inspector) {
    installFlightSignals();
    inspector->prepareSignalDump();
    registerForSignals(inspector);
    std::lock_guard lock(mutex_);
    inspectors_.push_back(inspector);
    if (!started_) {
      started_ = true;
      std::atexit(&stopAtExit);
      std::thread([this] {
        core::nameThisThread("bc-watchdog");
        run();
      }).detach();
    }
    cv_.notify_one();  // a shorter threshold may shorten the tick
  }
  // At process exit: no tick after this returns. A communicator that is
  // never destroyed stays registered, and its inspector reads state that the
  // exit tears down (static destructors, unloaded libraries): a tick then
  // crashed test processes at exit (about 1 run in 150). Called on the
  // watchdog thread itself (a tick that ends the job), it cannot wait for
  // that tick, which is its caller.
  void stop() {
    exiting_.store(true, std::memory_order_release);
    if (std::this_thread::get_id() == thread_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(mutex_);  // waits for a tick in progress
    cv_.notify_one();
  }
  void remove(StallInspector* inspector) {
    unregisterForSignals(inspector);  // no fatal-signal dump of it from now on
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
    thread_.store(std::this_thread::get_id(), std::memory_order_release);
    std::unique_lock lock(mutex_);
    while (!exiting_.load(std::memory_order_acquire)) {
      cv_.wait_for(lock, tickLocked());
      if (exiting_.load(std::memory_order_acquire)) break;
      const auto now = std::chrono::steady_clock::now();
      const bool dump = takeDumpRequest();  // SIGUSR1 (watch/flight_signals.h)
      for (StallInspector* i : inspectors_) {
        if (dump) i->dumpFlight("signal");
        i->tick(now);
      }
    }
  }

  std::atomic<bool> exiting_{false};
  std::atomic<std::thread::id> thread_{};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<StallInspector*> inspectors_;
  bool started_ = false;
};

Watchdog& instance() {
  static Watchdog* dog = new Watchdog;  // never destroyed (see watchdog.h)
  return *dog;
}

void stopAtExit() { instance().stop(); }

}  // namespace

void watch(StallInspector* inspector) { instance().add(inspector); }
void unwatch(StallInspector* inspector) { instance().remove(inspector); }

}  // namespace boostcomm::detail
