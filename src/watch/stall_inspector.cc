#include "watch/stall_inspector.h"

#include "watch/control_channel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/tunables.h"
#include "transport/pending_messages.h"

namespace boostcomm::detail {

namespace {
using core::CallStatus;
using core::Fingerprint;
using core::kFlightRingEntries;

// Waits shorter than this are not worth a look at the peers.
constexpr auto kCheckAfter = std::chrono::milliseconds(1);

std::string describeSeq(const CallStatus& s, std::uint64_t seqPlusOne) {
  if (seqPlusOne == 0) return "none";
  std::ostringstream os;
  os << "seq " << seqPlusOne - 1;
  Fingerprint f;
  if (s.read(seqPlusOne - 1, f)) os << " (" << core::describe(f) << ")";
  return os.str();
}

// The inode of /proc/self/ns/pid (0 if unknown: no probe then).
std::uint64_t pidNamespaceId() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// True when process `pid` has exited: no /proc entry, or a zombie (dead,
// not yet reaped by its launcher: mpirun's orted reaps it only when it
// notices, and then tears the job down).
bool processGone(std::uint32_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return n == 0 || errno == ESRCH;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');  // the command name may hold spaces and parentheses
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}
}  // namespace

StallInspector::StallInspector(int rank, CallStatus* own, std::vector<CallStatus*> peers, std::int64_t warnMs,
                               std::int64_t deadlineMs)
    : rank_(rank),
      own_(own),
      peers_(std::move(peers)),
      warnMs_(warnMs),
      deadlineMs_(deadlineMs),
      createdNs_(core::coarseWallNs()) {
  own_->pidNamespace.store(pidNamespaceId(), std::memory_order_relaxed);
}

bool StallInspector::findExitedPeer(std::string& message) const {
  const std::uint64_t ns = own_->pidNamespace.load(std::memory_order_relaxed);
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    const CallStatus* peer = peers_[r];
    if (peer == nullptr || peer == own_ || ns == 0) continue;
    const std::uint32_t pid = peer->pid.load(std::memory_order_acquire);
    if (pid == 0 || peer->pidNamespace.load(std::memory_order_relaxed) != ns || !processGone(pid)) continue;
    std::ostringstream os;
    os << "rank " << r << " (pid " << pid << ") on this node exited while rank " << rank_ << " waits in "
       << describeSeq(*own_, own_->completed.load(std::memory_order_acquire) + 1) << "; rank " << r
       << " last started " << describeSeq(*peer, peer->started.load(std::memory_order_acquire))
       << ", last completed " << describeSeq(*peer, peer->completed.load(std::memory_order_acquire));
    message = os.str();
    return true;
  }
  return false;
}

std::string StallInspector::peerExitedMessage() const {
  std::lock_guard lock(poisonMutex_);
  return peerExitedMessage_ + " (seen by the watchdog; the communicator is unusable)";
}

std::string StallInspector::mismatch(std::uint64_t fromSeq, std::uint64_t toSeq) const {
  if (toSeq > kFlightRingEntries) fromSeq = std::max<std::uint64_t>(fromSeq, toSeq - kFlightRingEntries);
  for (std::uint64_t seq = fromSeq; seq < toSeq; ++seq) {
    Fingerprint mine;
    if (!own_->read(seq, mine)) continue;
    for (std::size_t r = 0; r < worldSize(); ++r) {
      const CallStatus* peer = statusOf(r);
      Fingerprint theirs;
      std::uint64_t theirStartNs = 0;
      if (peer == nullptr || peer == own_ || !peer->read(seq, theirs, &theirStartNs) || theirs == mine) continue;
      // A rejection may be retried at once (every rank rejected the same bad call).
      if (theirs.rejected && core::coarseWallNs() < theirStartNs + core::kRejectedGraceNs) continue;
      return core::describeMismatch(rank_, mine, static_cast<int>(r), theirs, seq);
    }
  }
  return {};
}

std::string StallInspector::verifyReturned(std::uint64_t seq) const {
  Fingerprint mine;
  if (peers_.empty() || !own_->read(seq, mine)) return {};
  const bool broadcast = mine.collective == Collective::kBroadcast;
  const std::uint64_t word = mine.word();
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    const CallStatus* peer = peers_[r];
    if (peer == nullptr || peer == own_ || peer->holds(seq, word, mine.count)) continue;  // the common case
    Fingerprint theirs;
    if (!peer->read(seq, theirs)) {
      // Implied: published before our return could happen (memory order:
      // its release store, then its send, then our receive). Not implied:
      // a broadcast root's peers, and a non-root's fellow non-roots.
      const bool implied = !broadcast || static_cast<int>(r) == mine.root;
      const bool amRoot = broadcast && mine.root == rank_;
      if (!implied && !amRoot) continue;
      // Even where implied, allow a short wait: a peer descheduled between
      // its two stores of the entry (the seqlock) shows tag 0 for a moment.
      const auto limit = std::chrono::steady_clock::now() +
                         std::chrono::microseconds(implied ? 1000 : kRootWaitUs);
      bool seen = false;
      while (!(seen = peer->read(seq, theirs)) && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
      if (!seen) continue;  // left to the watchdog (it compares every call all ranks started)
    }
    // A call the peer's own checks rejected is reported by the rejection
    // path after its grace (CallStatus::recordRejected), not here.
    if (theirs.rejected) continue;
    if (!(theirs == mine)) return core::describeMismatch(rank_, mine, static_cast<int>(r), theirs, seq);
  }
  return {};
}

std::uint64_t StallInspector::agreedThrough(std::uint64_t least, std::uint64_t last) const {
  std::uint64_t agreed = last + 1;
  for (const CallStatus* peer : peers_) {
    if (peer == nullptr || peer == own_) continue;
    std::uint64_t started = peer->started.load(std::memory_order_acquire);
    if (started <= least) {
      const auto limit = std::chrono::steady_clock::now() + std::chrono::microseconds(kRootWaitUs);
      while ((started = peer->started.load(std::memory_order_acquire)) <= least &&
             std::chrono::steady_clock::now() < limit)
        std::this_thread::yield();
      if (started <= least) return 0;
    }
    const std::uint64_t q = std::min(started - 1, last);
    const std::uint64_t digest = own_->digestOf(q);
    if (digest == 0 || !peer->holdsDigest(q, digest)) return 0;
    agreed = std::min(agreed, q + 1);
  }
  return agreed;
}

void StallInspector::check(std::chrono::steady_clock::duration waited) {
  if (aborted())
    core::raise(ErrorCategory::kAborted, rank_, "communicator aborted (Communicator::abort) while this call waited");
  if (poisoned()) core::raise(ErrorCategory::kMismatch, rank_, poisonMessage());
  if (peerExited()) core::raise(ErrorCategory::kTransport, rank_, peerExitedMessage());
  if (waited < kCheckAfter || peers_.empty()) return;
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  if (started <= completed) return;
  const std::string m = mismatch(completed, started);
  if (m.empty()) return;
  dumpFlight("mismatch");  // before the raise: the caller's process may end right after it
  core::raise(ErrorCategory::kMismatch, rank_, m);
}

std::string StallInspector::report() {
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  const std::uint64_t waiting = completed < started ? completed : (started > 0 ? started - 1 : 0);  // seq
  std::ostringstream os;
  os << "rank " << rank_ << " waits in " << describeSeq(*own_, waiting + 1);
  if (peers_.empty() && !hasChannel()) {
    os << "; the other ranks' progress is not visible from here (no shared-memory call status and no control "
          "channel: ranks on other nodes without MPI_THREAD_MULTIPLE, or a non-MPI transport)";
    return os.str();
  }
  int behind = 0;
  std::string reached;
  std::string silent;
  for (std::size_t r = 0; r < worldSize(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    const CallStatus* peer = statusOf(r);
    if (peer == nullptr) {
      if (hasChannel() && (r >= peers_.size() || peers_[r] == nullptr))
        silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    if (peer == own_) continue;
    const std::uint64_t ps = peer->started.load(std::memory_order_acquire);
    const std::uint64_t pc = peer->completed.load(std::memory_order_acquire);
    if (ps > waiting) {
      reached += (reached.empty() ? "" : ", ") + std::to_string(r);
      continue;
    }
    os << (behind++ == 0 ? "; not reached by " : "; ") << "rank " << r << " (pid "
       << peer->pid.load(std::memory_order_relaxed) << "; last started " << describeSeq(*peer, ps)
       << ", last completed " << describeSeq(*peer, pc) << ")";
  }
  if (!silent.empty()) {
    os << "; no status from rank(s) " << silent
       << (queried_.load(std::memory_order_acquire)
               ? " on other nodes (asked over the control channel, no answer yet: stopped, dead, or its watchdog "
                 "not running)"
               : " on other nodes (not asked yet: they are asked after " + std::to_string(queryAfterMs()) +
                     " ms of waiting)");
  }
  if (behind == 0 && silent.empty()) os << "; every visible rank has started it";
  if (!reached.empty()) os << "; started by rank(s) " << reached;
  return os.str();
}

void StallInspector::tick(std::chrono::steady_clock::time_point now) {
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  const bool blocking = own_->blocking.load(std::memory_order_acquire) != 0;
  checkFingerprints(started, completed, blocking, now);
  checkPeersAlive(started, completed, blocking);
  checkWait(started, completed, blocking, now);
}

void StallInspector::checkFingerprints(std::uint64_t started, std::uint64_t completed, bool blocking,
                                       std::chrono::steady_clock::time_point now) {
  bool statusArrived = false;
  std::string notice;
  std::string audited;
  if (hasChannel()) {
    std::lock_guard lock(channelMutex_);
    if (channel_) {
      statusArrived = pollChannel();
      // The audit of completed calls (auditNextAt_ paces it).
      if (auditPeer_ >= 0 && !poisoned() && completed > auditedUpTo_ && now >= auditNextAt_) sendAudit(completed);
    }
    notice.swap(noticeReceived_);
    audited.swap(auditMismatch_);
  }
  if (!notice.empty() && !poisoned()) onMismatch(notice, blocking, false);
  // A rank inside a blocking backend call that stays stuck there (its peers
  // now fail at their next call instead of joining it) ends the job, as for
  // a notice; one whose call returns raises the mismatch at its next call.
  if (!audited.empty() && !poisoned()) onMismatch(audited, blocking, true);
  if (statusArrived && !poisoned() && started > completed) {
    // A remote rank's fingerprint of a call we both started differs: the
    // check for calls whose data carries none (native collectives).
    const std::string m = mismatch(completed, started);
    if (!m.empty()) onMismatch(m, blocking, true);
  }
  // Fingerprints of every call all visible ranks have started, including
  // those that completed (a backend may return from mismatched calls).
  if (!poisoned() && !peers_.empty() && started > checkedUpTo_) {
    const std::string m = mismatch(checkedUpTo_, started);
    if (!m.empty()) {
      onMismatch(m, blocking, true);
    } else {
      std::uint64_t everyone = started;
      for (const CallStatus* peer : peers_) {
        if (peer != nullptr) everyone = std::min(everyone, peer->started.load(std::memory_order_acquire));
      }
      checkedUpTo_ = std::max(checkedUpTo_, everyone);
    }
  }
}

void StallInspector::checkPeersAlive(std::uint64_t started, std::uint64_t completed, bool blocking) {
  // Liveness of node peers, only while a call waits (a peer that exits after
  // the job's last call is normal): a few /proc reads per tick.
  if (started > completed && !peerExited()) {
    std::string gone;
    if (findExitedPeer(gone)) {
      {
        std::lock_guard lock(poisonMutex_);
        peerExitedMessage_ = gone;
      }
      peerExited_.store(true, std::memory_order_release);
      std::fprintf(stderr, "boostcomm: error: rank %d: %s\n", rank_, gone.c_str());
      std::fflush(stderr);
      dumpFlight("peer exited");
      if (blocking && stillBlocking(std::chrono::milliseconds(200))) terminate(gone);
    }
  }
}

void StallInspector::checkWait(std::uint64_t started, std::uint64_t completed, bool blocking,
                               std::chrono::steady_clock::time_point now) {
  if (started <= completed) {
    seenStarted_ = seenCompleted_ = 0;
    queried_.store(false, std::memory_order_release);
    return;
  }
  if (started != seenStarted_ || completed != seenCompleted_) {
    seenStarted_ = started;
    seenCompleted_ = completed;
    since_ = now;
    warned_ = false;
    queried_.store(false, std::memory_order_release);
    return;
  }
  const auto waitedMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
  if (hasChannel() && !queried_.load(std::memory_order_acquire) && waitedMs >= queryAfterMs()) {
    std::lock_guard lock(channelMutex_);
    if (channel_) queryRemotes(completed);
  }
  if (warnMs_ > 0 && !warned_ && waitedMs >= warnMs_) {
    warned_ = true;
    const std::vector<transport::PendingMessage> pending = transport::pendingMessages();
    const std::string path = dumpFlight("stall", pending);
    const std::string messages = transport::pendingMessagesSummary(pending);
    std::fprintf(stderr, "boostcomm: warning: rank %d: a collective has waited %.1f s: %s%s%s%s%s\n", rank_,
                 static_cast<double>(waitedMs) / 1000.0, report().c_str(), messages.empty() ? "" : "; ",
                 messages.c_str(), path.empty() ? "" : "; flight record ", path.c_str());
  }
  const std::int64_t deadline = deadlineMs();
  if (blocking && deadline > 0 && waitedMs >= deadline) {
    terminate("a blocking backend call did not complete within " + std::to_string(deadline) + " ms; " + report());
  }
}

void StallInspector::poison(const std::string& message) {
  std::lock_guard lock(poisonMutex_);
  poisonMessage_ = message;
  poisoned_.store(true, std::memory_order_release);
}

std::string StallInspector::poisonMessage() const {
  std::lock_guard lock(poisonMutex_);
  return poisonMessage_ + " (seen by the watchdog; the communicator is unusable)";
}

void StallInspector::terminate(const std::string& message) {
  dumpFlight("deadline");
  std::fprintf(stderr,
               "boostcomm: error: rank %d: %s; ending the job (this rank is inside a blocking backend call, which "
               "cannot return an error; set BOOSTCOMM_TIMEOUT_MS or CallOptions::timeout to get Error{kTimeout} "
               "instead)\n",
               rank_, message.c_str());
  std::fflush(stderr);
  // Peers that watch the same status see the same fault within a tick: give
  // them time to say so before the job ends.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  if (jobEnd_) jobEnd_();  // the transport's Transport::abortJob (MPI_Abort)
  std::abort();
}

void StallInspector::writeFlight(core::FixedWriter& w, const char* reason, std::uint64_t dump,
                                 bool withCallers) const {
  // Async-signal-safe (dumpFlightFromSignal) without callers' stacks: loads,
  // getpid and FixedWriter only.
  const core::CallerFormatter formatter = withCallers ? core::callerFormatter() : nullptr;
  std::vector<std::string> frames;
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  w.put("{");
  if (reason != nullptr) w.put("\"reason\": \"").put(reason).put("\", ");
  w.put("\"rank\": ").put(static_cast<std::uint64_t>(rank_)).put(", \"pid\": ").put(static_cast<std::uint64_t>(getpid()));
  if (dump != 0) w.put(", \"dump\": ").put(dump);
  w.put(", \"started\": ").put(started).put(", \"completed\": ").put(completed);
  w.put(", \"size\": ").put(static_cast<std::uint64_t>(worldSize())).put(", \"peers\": [");
  // What this rank sees of its node's peers and of the ranks that answered
  // over the control channel: names ranks that cannot dump (stopped, killed)
  // in `boostcomm trace analyze`.
  bool firstPeer = true;
  for (std::size_t r = 0; r < worldSize(); ++r) {
    const CallStatus* peer = statusOf(r);
    if (peer == nullptr) continue;
    w.put(firstPeer ? "" : ", ").put("{\"rank\": ").put(static_cast<std::uint64_t>(r));
    w.put(", \"started\": ").put(peer->started.load(std::memory_order_acquire));
    w.put(", \"completed\": ").put(peer->completed.load(std::memory_order_acquire)).put("}");
    firstPeer = false;
  }
  w.put("], \"entries\": [\n");
  const std::uint64_t from = started > kFlightRingEntries ? started - kFlightRingEntries : 0;
  bool first = true;
  for (std::uint64_t seq = from; seq < started; ++seq) {
    Fingerprint f;
    if (!own_->read(seq, f)) continue;
    const core::FlightEntry& e = own_->ring[seq % kFlightRingEntries];
    const auto* algorithm = reinterpret_cast<const char*>(e.algorithm.load(std::memory_order_relaxed));
    const std::uint64_t startNs = e.startNs.load(std::memory_order_relaxed);
    const std::uint64_t endNs = own_->endNs[seq % core::kFlightRingEntries].load(std::memory_order_relaxed);
    w.put(first ? "" : ",\n").put("  {\"seq\": ").put(seq).put(", \"call\": \"");
    core::describeTo(w, f);
    w.put("\", \"algorithm\": \"").put(algorithm != nullptr ? algorithm : "?").put("\", \"state\": \"");
    w.put(endNs != 0 || seq + 1 == completed ? "completed" : "in flight").put("\", \"start_ns\": ").put(startNs);
    w.put(", \"end_ns\": ").put(endNs);
    // The caller's stack, when the call had one (issued from Python):
    // innermost frame first. No field for C++ callers.
    core::CallerStack stack;
    if (formatter != nullptr && callers_.read(seq, stack) && stack.depth > 0) {
      frames.clear();
      formatter(stack, frames);
      w.put(", \"python_stack\": [");
      for (std::size_t i = 0; i < frames.size(); ++i) {
        w.put(i == 0 ? "\"" : ", \"");
        core::putJsonText(w, frames[i]);
        w.put("\"");
      }
      w.put("]");
    }
    w.put("}");
    first = false;
  }
  w.put("\n], \"created_ns\": ").put(createdNs_).put(", \"dumped_ns\": ").put(core::coarseWallNs()).put("}\n");
}

std::size_t StallInspector::flightCapacity() const {
  // A stack's frame: a path, a line and a function name, ~100-200 bytes.
  const std::size_t stackBytes = core::callerFormatter() != nullptr ? 256 * core::kCallerFrames : 0;
  return 4096 + (256 + stackBytes) * kFlightRingEntries + 80 * worldSize();
}

std::string StallInspector::flightJson(const char* reason) const {
  std::string out(flightCapacity(), '\0');
  core::FixedWriter w(out.data(), out.size());
  writeFlight(w, reason, 0, true);
  out.resize(w.size());
  return out;
}

void StallInspector::putDumpSuffix(core::FixedWriter& w, std::uint64_t dump) {
  if (dump > 1) w.put(".").put(std::min(dump, kFlightDumpsKept));
  w.put(".json");
}

std::string StallInspector::dumpFlight(const char* reason) const {
  return dumpFlight(reason, transport::pendingMessages());
}

std::string StallInspector::dumpFlight(const char* reason, const std::vector<transport::PendingMessage>& pending) const {
  const std::string dir = core::tunableString(core::kTunableTraceDir);
  if (dir.empty()) return {};
  const std::uint64_t dump = dumps_.fetch_add(1, std::memory_order_relaxed) + 1;
  char suffix[32];
  core::FixedWriter name(suffix, sizeof suffix);
  putDumpSuffix(name, dump);
  const std::string path = dir + "/rank-" + std::to_string(rank_) + std::string(suffix, name.size());
  // Per writer: the watchdog and a waiting caller may both dump.
  static std::atomic<unsigned> writers{0};
  const std::string tmp = path + ".tmp" + std::to_string(getpid()) + "." + std::to_string(writers++);
  {
    std::string json(flightCapacity(), '\0');
    core::FixedWriter w(json.data(), json.size());
    writeFlight(w, reason, dump, true);
    json.resize(w.size());
    // The transports' messages not yet complete (not in the signal path:
    // they are read under locks).
    const std::size_t close = json.rfind('}');
    if (!w.overflowed() && close != std::string::npos) {  // a truncated record has no closing brace to go before
      json.insert(close, ", \"messages\": [\n" + transport::pendingMessagesJson(pending) + "\n]");
    }
    std::ofstream out(tmp);
    if (!out) return {};
    out << json;
    if (!out.flush()) return {};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return {};
  return path;
}

void StallInspector::dumpFlightFromSignal(const char* reason, char* buffer, std::size_t capacity) const {
  if (signalPrefix_[0] == '\0') return;
  const std::uint64_t dump = dumps_.fetch_add(1, std::memory_order_relaxed) + 1;
  char path[sizeof signalPrefix_ + 32];
  core::FixedWriter name(path, sizeof path - 1);
  name.put(signalPrefix_);
  putDumpSuffix(name, dump);
  if (name.overflowed()) return;
  path[name.size()] = '\0';
  core::FixedWriter w(buffer, capacity);
  writeFlight(w, reason, dump, false);  // no callers' stacks: their formatter is not async-signal-safe
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < w.size()) {
    const ssize_t n = ::write(fd, buffer + done, w.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

void StallInspector::prepareSignalDump() {
  const std::string dir = core::tunableString(core::kTunableTraceDir);
  const std::string prefix = dir.empty() ? std::string() : dir + "/rank-" + std::to_string(rank_);
  std::snprintf(signalPrefix_, sizeof signalPrefix_, "%s", prefix.size() < sizeof signalPrefix_ ? prefix.c_str() : "");
}

}  // namespace boostcomm::detail
