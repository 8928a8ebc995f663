// Ranks of the store transport as threads of one process: an in-memory
// KeyValueStore to rendezvous through, a runner that joins the threads and
// rethrows the first rank's error, and a world of GlooTransports (each rank
// its own Gloo TCP device on this host). Shared by the store-transport tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "boostcomm/store.h"
#include "transport/gloo/gloo_transport.h"

namespace boostcomm::testing {

class MemoryStore final : public KeyValueStore {
 public:
  void set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    kv_[key] = value;
    cv_.notify_all();
  }
  std::vector<std::uint8_t> get(const std::string& key) override {
    wait({key}, std::chrono::seconds(60));
    std::lock_guard<std::mutex> lock(mutex_);
    return kv_.at(key);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool ok = cv_.wait_for(lock, timeout, [&] {
      for (const auto& k : keys) {
        if (!kv_.count(k)) return false;
      }
      return true;
    });
    if (!ok) throw std::runtime_error("memory store: wait timed out");
  }
  std::string describe() const override { return "the test's memory store"; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::uint8_t>> kv_;
};

// Runs fn(rank) on n threads; rethrows the lowest rank's error after all joined.
inline void onThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

inline std::vector<std::unique_ptr<transport::GlooTransport>> makeGlooTransports(int n) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::unique_ptr<transport::GlooTransport>> out(static_cast<std::size_t>(n));
  onThreads(n, [&](int r) {
    out[static_cast<std::size_t>(r)] = std::make_unique<transport::GlooTransport>(
        transport::StoreBridge(store, "t", std::chrono::seconds(30), r), transport::GlooTransport::createDevice(r), r,
        n, std::vector<long long>{});
  });
  return out;
}

}  // namespace boostcomm::testing
