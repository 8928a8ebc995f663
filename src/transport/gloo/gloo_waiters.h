// GlooWaiters: completion of Gloo unbound-buffer messages without blocking
// the caller.
//
// Gloo's public buffer API only offers blocking waits (waitSend/waitRecv);
// a zero timeout there is an error that poisons the whole context, so it
// cannot be polled. (The counters those waits read are protected members of
// the TCP buffer class, but Debian's libgloo-dev omits gloo/common/memory.h,
// which the TCP headers include, so that class is out of reach.) Each posted
// message is therefore handed to a waiter thread that blocks in Gloo's wait
// and then sets Pending::done, which Transport::test reads. Threads are
// reused; the pool grows to the number of messages in flight at once and
// never shrinks (a 2 x 2 DDP job under torchrun: ~90 threads per rank, each
// asleep in a wait but for its message's completion): no posted message
// ever waits in the queue behind a thread blocked on another one.
// Rejected: one waiter per peer in posting order -- Gloo completes sends of
// different slots in the order the receiver posts them, so a FIFO waiter
// could sit on an early message while a later one, which the peer needs us
// to see first, has completed.
#pragma once

#include "transport/gloo/gloo_link.h"
#include "transport/pending_messages.h"

namespace boostcomm::transport {

class GlooWaiters final : public PendingMessageSource {
 public:
  // `label` names the transport in the stall report (its store prefix, rank and size).
  // `signal` is called after each completion (GlooTransport::signalCompletions).
  GlooWaiters(int rank, std::string label, CompletionSignal& signal);
  // Aborts the waits in flight (their requests end with an error) and joins.
  ~GlooWaiters() override;
  GlooWaiters(const GlooWaiters&) = delete;
  GlooWaiters& operator=(const GlooWaiters&) = delete;

  // p's buffer has its send/recv posted; p->done is set when it completed.
  void watch(GlooTransport::Pending* p);
  // The messages not yet complete: "queued" (no waiter has taken it yet: a
  // moment at most) or "waiting" (a waiter is blocked in Gloo's wait for it).
  void appendPendingMessages(std::vector<PendingMessage>& out) const override;

 private:
  void loop();

  int rank_;
  std::string label_;
  CompletionSignal& signal_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<GlooTransport::Pending*> queue_;
  std::unordered_set<GlooTransport::Pending*> waiting_;
  int idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace boostcomm::transport
