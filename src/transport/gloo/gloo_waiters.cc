#include "transport/gloo/gloo_waiters.h"

#include <chrono>
#include <string>
#include <utility>

#include "core/thread_name.h"

namespace boostcomm::transport {

GlooWaiters::GlooWaiters(int rank, std::string label, CompletionSignal& signal)
    : rank_(rank), label_(std::move(label)), signal_(signal) {
  registerPendingMessageSource(this);
}

GlooWaiters::~GlooWaiters() {
  unregisterPendingMessageSource(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (GlooTransport::Pending* p : waiting_) {
      if (p->isSend) {
        p->buffer->abortWaitSend();
      } else {
        p->buffer->abortWaitRecv();
      }
    }
    for (GlooTransport::Pending* p : queue_) {
      p->error = std::make_exception_ptr(
          Error(ErrorCategory::kTransport, rank_, "gloo message aborted: the transport is being destroyed"));
      p->done.store(true, std::memory_order_release);
    }
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void GlooWaiters::watch(GlooTransport::Pending* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(p);
  // Every queued message needs a thread of its own now: an idle thread
  // counts until it pops, so a second message posted before the first
  // one's thread woke finds idle_ == 1 with two messages queued. Left to
  // wait behind a thread blocked in an earlier message's wait, a completed
  // message would go unobserved for as long as that wait lasts (forever,
  // when the earlier message's peer needs this one observed first).
  if (idle_ < static_cast<int>(queue_.size())) {
    // Counted once it exists (it cannot pop before we unlock): a thread
    // that failed to start must not count as idle.
    threads_.emplace_back([this] {
      core::nameThisThread("bc-gloo-wait");
      loop();
    });
    ++idle_;
  }
  cv_.notify_one();
}

void GlooWaiters::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Rechecked every second, not only on a notification: a glibc without
    // the 2025 fix of sourceware bug 25847 (Debian 12 ships 2.36) can lose a
    // pthread_cond_signal among several waiters, and a message no thread
    // takes is the hang this pool exists to avoid. ~90 idle threads: ~90
    // wake-ups a second.
    while (!stopping_ && queue_.empty()) cv_.wait_for(lock, std::chrono::seconds(1));
    if (queue_.empty()) return;  // stopping
    GlooTransport::Pending* p = queue_.front();
    queue_.pop_front();
    --idle_;
    waiting_.insert(p);
    lock.unlock();
    try {
      const bool completed = p->isSend ? p->buffer->waitSend() : p->buffer->waitRecv(&p->source);
      if (!completed) {
        throw Error(ErrorCategory::kTransport, rank_, "gloo message aborted: the transport is being destroyed");
      }
    } catch (const Error&) {
      p->error = std::current_exception();
    } catch (const std::exception& e) {
      try {
        raiseGlooError(e, p->isSend ? "send" : "recv", rank_);
      } catch (...) {
        p->error = std::current_exception();
      }
    }
    lock.lock();
    waiting_.erase(p);
    p->done.store(true, std::memory_order_release);  // last touch: test() may free p now
    lock.unlock();
    signal_();  // a progress thread asleep until a completion (Transport::signalCompletions)
    lock.lock();
    // Only now: a message queued meanwhile got a thread of its own (one
    // thread more in a pool that never shrinks, rather than a message that
    // waits for this thread while it signals).
    ++idle_;
  }
}

void GlooWaiters::appendPendingMessages(std::vector<PendingMessage>& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();  // after the lock: no message is younger than it
  auto put = [&](const GlooTransport::Pending* p, const char* state) {
    PendingMessage m;
    m.transport = label_;
    m.isSend = p->isSend;
    m.peer = p->peer;
    m.tag = p->tag;
    m.bytes = p->bytes;
    m.ageMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - p->postedAt).count();
    m.state = state;
    out.push_back(std::move(m));
  };
  for (const GlooTransport::Pending* p : waiting_) put(p, "waiting in Gloo");
  for (const GlooTransport::Pending* p : queue_) put(p, "queued for a waiter");
}

}  // namespace boostcomm::transport
