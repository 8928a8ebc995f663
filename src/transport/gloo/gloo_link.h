// Internals shared by the files of transport/gloo/.
#pragma once

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "boostcomm/error.h"
#include "core/segment_list.h"
#include "transport/gloo/gloo_transport.h"

namespace boostcomm::transport {

// What GlooTransport::signalCompletions installs, called by the waiters and
// the native worker after each completion. Its lock makes a change wait for
// a call in progress: the engine that installed the function may be going away.
class CompletionSignal {
 public:
  void set(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = std::move(fn);
  }
  void operator()() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fn_) fn_();
  }

 private:
  std::mutex mutex_;
  std::function<void()> fn_;
};

// One native collective on the worker thread.
struct GlooNativeJob {
  std::function<void()> run;
  const char* what = "";
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::exception_ptr error;
};

// A posted request (Request::slot[0]). A message: the staging buffer holds
// it for pieces (gathered before a send, scattered after a receive) and
// stands in for an empty message (a Gloo buffer needs memory behind it).
// Or a native collective (job). `done` is set last by whoever completes it
// (a waiter, gloo_waiters.h); test() frees it after seeing `done`.
struct GlooTransport::Pending {
  bool isSend = false;
  int source = -1;  // the sender of a receive, once done (any-source receives)
  // For the stall report (pending_messages.h): peer (-1: any source), tag, bytes, when posted.
  int peer = -1;
  int tag = 0;
  std::size_t bytes = 0;
  std::chrono::steady_clock::time_point postedAt{};
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  std::vector<char> staging;
  std::vector<core::Piece> scatter;
  std::shared_ptr<GlooNativeJob> job;
  std::atomic<bool> done{false};
  std::exception_ptr error;
};

// Gloo's exceptions as boostcomm errors: one place for the translation.
[[noreturn]] inline void raiseGlooError(const std::exception& e, const char* what, int rank) {
  const std::string text = e.what();
  const bool timedOut = text.find("imed out") != std::string::npos || text.find("imeout") != std::string::npos;
  throw Error(timedOut ? ErrorCategory::kTimeout : ErrorCategory::kTransport, rank,
              std::string("gloo ") + what + " failed: " + text);
}

}  // namespace boostcomm::transport
