// The stall inspector's side across nodes: the control channel
// (watch/control_channel.h), driven by the watchdog's tick.
#include "watch/stall_inspector.h"

#include "watch/control_channel.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/check.h"

namespace boostcomm::detail {

namespace {
using core::CallStatus;
using core::Fingerprint;

ControlEntry entryOf(const CallStatus& s, std::uint64_t seqPlusOne) {
  ControlEntry e;
  core::Fingerprint f;
  if (seqPlusOne == 0 || !s.read(seqPlusOne - 1, f)) return e;
  e.tag = seqPlusOne;
  e.word = f.word();
  e.count = f.count;
  return e;
}

// Writes an answered entry into a mirror's ring (the owner's seqlock order).
void storeEntry(CallStatus& mirror, const ControlEntry& e) {
  if (e.tag == 0) return;
  core::FlightEntry& slot = mirror.ring[(e.tag - 1) % core::kFlightRingEntries];
  slot.tag.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.word.store(e.word, std::memory_order_relaxed);
  slot.count.store(e.count, std::memory_order_relaxed);
  slot.tag.store(e.tag, std::memory_order_release);
}
}  // namespace

StallInspector::~StallInspector() = default;  // here, where ControlChannel is complete

void StallInspector::attachChannel(std::unique_ptr<ControlChannel> channel, int worldSize) {
  if (!channel) return;
  std::lock_guard lock(channelMutex_);
  mirrors_.resize(static_cast<std::size_t>(worldSize));
  for (std::size_t r = 0; r < mirrors_.size(); ++r) {
    const bool visible = r < peers_.size() && peers_[r] != nullptr;
    if (!visible && static_cast<int>(r) != rank_) mirrors_[r] = std::make_unique<CallStatus>();
  }
  // The audit peer: the next rank in rank order whose status shm does not
  // show (the channel exists only on communicators without a shared call
  // status, so that is rank + 1): the chain 0 -> 1 -> ... -> n-1 -> 0 covers
  // every pair by transitivity.
  for (int i = 1; i < worldSize && auditPeer_ < 0; ++i) {
    const auto r = static_cast<std::size_t>((rank_ + i) % worldSize);
    if (mirrors_[r]) auditPeer_ = static_cast<int>(r);
  }
  channel_ = std::move(channel);
  channelSize_ = worldSize;
}

void StallInspector::sendAudit(std::uint64_t completed) {
  // The oldest unaudited calls still in the ring (a rank more than a ring
  // ahead of its last answer skips the calls in between: they stay unchecked).
  std::uint64_t seq = std::max<std::uint64_t>(
      auditedUpTo_, completed > core::kFlightRingEntries ? completed - core::kFlightRingEntries : 0);
  ControlMessage a;
  a.type = ControlMessage::kAudit;
  a.from = rank_;
  for (; seq < completed && a.auditCount < static_cast<std::uint32_t>(ControlMessage::kAuditEntries); ++seq) {
    const ControlEntry e = entryOf(*own_, seq + 1);
    if (e.tag == 0) {  // being rewritten: this rank ran a ring ahead meanwhile
      if (a.auditCount == 0) continue;  // skipped, unchecked
      break;
    }
    a.audit[a.auditCount++] = e;
  }
  if (a.auditCount == 0) {
    auditedUpTo_ = seq;
    return;
  }
  channel_->send(auditPeer_, a);
  auditNextAt_ = std::chrono::steady_clock::now() + kAuditRetry;
}

void StallInspector::answerAudit(const ControlMessage& m) {
  ControlMessage ack;
  ack.type = ControlMessage::kAuditAck;
  ack.from = rank_;
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint32_t n = std::min<std::uint32_t>(m.auditCount, ControlMessage::kAuditEntries);
  for (std::uint32_t i = 0; i < n; ++i) {
    const ControlEntry& e = m.audit[i];
    if (e.tag == 0 || e.tag > started) break;  // not started here yet: the next audit
    const std::uint64_t seq = e.tag - 1;
    Fingerprint mine;
    const Fingerprint theirs = Fingerprint::fromWord(e.word, e.count);
    // (A rejected entry sits at seq == started, never below: the test above stops there.)
    if (own_->read(seq, mine)) {
      if (!(mine == theirs)) {
        if (auditMismatch_.empty())
          auditMismatch_ = core::describeMismatch(m.from, theirs, rank_, mine, seq) +
                           " (found by the cross-node audit after rank " + std::to_string(m.from) +
                           "'s call had returned)";
        break;
      }
    }  // else gone from this rank's ring (it ran a ring ahead): unchecked
    ack.asked = e.tag;
  }
  channel_->send(m.from, ack);
}

void StallInspector::closeChannel() {
  std::lock_guard lock(channelMutex_);
  if (!channel_) return;
  if (!pendingNotice_.empty()) sendNotice(pendingNotice_);
  pendingNotice_.clear();
  channel_.reset();  // waits briefly for the sends, frees the communicator
}

std::int64_t StallInspector::queryAfterMs() const {
  // Soon enough that the warning (and a timeout) can name what remote ranks
  // do; late enough that healthy waits never ask (a query costs one small
  // message per remote rank, once per stall).
  std::int64_t ms = 1000;
  if (warnMs_ > 0) ms = std::min<std::int64_t>(ms, warnMs_ / 2);
  if (deadlineMs() > 0) ms = std::min<std::int64_t>(ms, deadlineMs() / 2);
  return ms;
}

const CallStatus* StallInspector::statusOf(std::size_t r) const {
  if (r < peers_.size() && peers_[r] != nullptr) return peers_[r];
  if (static_cast<int>(r) == rank_) return own_;
  if (r < mirrors_.size() && mirrors_[r] && mirrors_[r]->pid.load(std::memory_order_acquire) != 0)
    return mirrors_[r].get();
  return nullptr;
}

void StallInspector::failed(const std::exception_ptr& error) {
  if (!hasChannel() || poisoned()) return;  // poisoned: the notice came from another rank
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    if (e.category() != ErrorCategory::kMismatch) return;
    std::lock_guard lock(channelMutex_);
    if (pendingNotice_.empty()) pendingNotice_ = e.detail();
  } catch (...) {
  }
}

void StallInspector::onMismatch(const std::string& m, bool blocking, bool tellOthers) {
  // The dump first: a caller waiting on this rank leaves its wait as soon
  // as the communicator is poisoned, and its process may end right after.
  std::fprintf(stderr, "boostcomm: error: rank %d: %s\n", rank_, m.c_str());
  dumpFlight("mismatch");
  poison(m);
  if (tellOthers && hasChannel()) {
    std::lock_guard lock(channelMutex_);
    if (channel_) sendNotice(m);
  }
  // A blocking backend call that returns raises the mismatch itself
  // (verifyReturned): end the job only for one that stays stuck. A tick
  // that compares the rings while both ranks are briefly inside calls that
  // do return (sum vs max) must not end a job that would have failed cleanly.
  if (blocking && stillBlocking(std::chrono::milliseconds(200))) terminate(m);
}

bool StallInspector::stillBlocking(std::chrono::milliseconds grace) const {
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    if (own_->blocking.load(std::memory_order_acquire) == 0 ||
        own_->started.load(std::memory_order_acquire) != started)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void StallInspector::sendNotice(const std::string& text) {
  ControlMessage m;
  m.type = ControlMessage::kNotice;
  m.from = rank_;
  std::snprintf(m.text, sizeof(m.text), "%s", text.c_str());
  for (int r = 0; r < channel_->size(); ++r) channel_->send(r, m);
  channel_->flush(0);
}

void StallInspector::queryRemotes(std::uint64_t waitingSeq) {
  ControlMessage q;
  q.type = ControlMessage::kQuery;
  q.from = rank_;
  q.asked = waitingSeq + 1;
  for (std::size_t r = 0; r < mirrors_.size(); ++r) {
    if (!mirrors_[r]) continue;
    mirrors_[r]->pid.store(0, std::memory_order_release);  // until it answers this query
    channel_->send(static_cast<int>(r), q);
  }
  queried_.store(true, std::memory_order_release);
}

bool StallInspector::pollChannel() {
  bool statusArrived = false;
  ControlMessage m;
  while (channel_->poll(m)) {
    if (m.from < 0 || m.from >= channel_->size()) continue;
    const auto from = static_cast<std::size_t>(m.from);
    switch (m.type) {
      case ControlMessage::kQuery: {
        ControlMessage a;
        a.type = ControlMessage::kStatus;
        a.from = rank_;
        a.pid = static_cast<std::uint32_t>(getpid());
        a.started = own_->started.load(std::memory_order_acquire);
        a.completed = own_->completed.load(std::memory_order_acquire);
        a.asked = m.asked;
        a.entries[0] = entryOf(*own_, a.started);
        a.entries[1] = entryOf(*own_, a.completed);
        a.entries[2] = entryOf(*own_, m.asked);
        channel_->send(m.from, a);
        break;
      }
      case ControlMessage::kStatus: {
        if (from >= mirrors_.size() || !mirrors_[from]) break;
        CallStatus& mirror = *mirrors_[from];
        for (const ControlEntry& e : m.entries) storeEntry(mirror, e);
        mirror.started.store(m.started, std::memory_order_relaxed);
        mirror.completed.store(m.completed, std::memory_order_relaxed);
        mirror.pid.store(std::max<std::uint32_t>(m.pid, 1), std::memory_order_release);  // answered
        statusArrived = true;
        break;
      }
      case ControlMessage::kAudit:
        answerAudit(m);
        break;
      case ControlMessage::kAuditAck:
        if (m.from == auditPeer_) {
          // No progress (the peer has not reached those calls yet, e.g. a
          // broadcast root running ahead): ask again in a second, not every tick.
          auditNextAt_ = std::chrono::steady_clock::now() + (m.asked <= auditedUpTo_ ? kAuditBackoff : std::chrono::seconds{0});
          auditedUpTo_ = std::max(auditedUpTo_, m.asked);
        }
        break;
      case ControlMessage::kNotice: {
        if (poisoned()) break;
        m.text[sizeof(m.text) - 1] = '\0';
        const std::string text = std::string(m.text) + " (reported by rank " + std::to_string(m.from) +
                                 " over the control channel)";
        pendingNotice_.clear();  // whoever saw it first tells everyone; no echo
        if (noticeReceived_.empty()) noticeReceived_ = text;
        break;
      }
      default:
        break;
    }
  }
  if (!pendingNotice_.empty()) {
    sendNotice(pendingNotice_);
    pendingNotice_.clear();
  }
  return statusArrived;
}

}  // namespace boostcomm::detail
