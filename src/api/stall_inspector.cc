#include "api/stall_inspector.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/tunables.h"
#include "transport/mpi/mpi_c.h"

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
}  // namespace

StallInspector::StallInspector(int rank, CallStatus* own, std::vector<CallStatus*> peers, std::int64_t warnMs,
                               std::int64_t deadlineMs)
    : rank_(rank), own_(own), peers_(std::move(peers)), warnMs_(warnMs), deadlineMs_(deadlineMs) {}

std::string StallInspector::mismatch(std::uint64_t fromSeq, std::uint64_t toSeq) const {
  if (toSeq > kFlightRingEntries) fromSeq = std::max<std::uint64_t>(fromSeq, toSeq - kFlightRingEntries);
  for (std::uint64_t seq = fromSeq; seq < toSeq; ++seq) {
    Fingerprint mine;
    if (!own_->read(seq, mine)) continue;
    for (std::size_t r = 0; r < peers_.size(); ++r) {
      const CallStatus* peer = peers_[r];
      Fingerprint theirs;
      if (peer == nullptr || peer == own_ || !peer->read(seq, theirs) || theirs == mine) continue;
      return core::describeMismatch(rank_, mine, static_cast<int>(r), theirs, seq);
    }
  }
  return {};
}

void StallInspector::check(std::chrono::steady_clock::duration waited) {
  if (aborted())
    core::raise(ErrorCategory::kFinalized, rank_, "communicator aborted (Communicator::abort) while this call waited");
  if (poisoned()) core::raise(ErrorCategory::kMismatch, rank_, poisonMessage());
  if (waited < kCheckAfter || peers_.empty()) return;
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  if (started <= completed) return;
  const std::string m = mismatch(completed, started);
  if (!m.empty()) core::raise(ErrorCategory::kMismatch, rank_, m);
}

std::string StallInspector::report() {
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  const std::uint64_t waiting = completed < started ? completed : (started > 0 ? started - 1 : 0);  // seq
  std::ostringstream os;
  os << "rank " << rank_ << " waits in " << describeSeq(*own_, waiting + 1);
  if (peers_.empty()) {
    os << "; the other ranks' progress is not visible from here (no shared-memory call status: ranks on other "
          "nodes, or shared memory off)";
    return os.str();
  }
  int behind = 0;
  std::string reached;
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    const CallStatus* peer = peers_[r];
    if (peer == nullptr || peer == own_) continue;
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
  if (behind == 0) os << "; every visible rank has started it";
  if (!reached.empty()) os << "; started by rank(s) " << reached;
  return os.str();
}

void StallInspector::tick(std::chrono::steady_clock::time_point now) {
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  const bool blocking = own_->blocking.load(std::memory_order_acquire) != 0;
  // Fingerprints of every call all visible ranks have started, including
  // those that completed (a backend may return from mismatched calls).
  if (!poisoned() && !peers_.empty() && started > checkedUpTo_) {
    const std::string m = mismatch(checkedUpTo_, started);
    if (!m.empty()) {
      poison(m);
      std::fprintf(stderr, "boostcomm: error: rank %d: %s\n", rank_, m.c_str());
      dumpFlight("mismatch");
      if (blocking) terminate(m);
    } else {
      std::uint64_t everyone = started;
      for (const CallStatus* peer : peers_) {
        if (peer != nullptr) everyone = std::min(everyone, peer->started.load(std::memory_order_acquire));
      }
      checkedUpTo_ = std::max(checkedUpTo_, everyone);
    }
  }
  if (started <= completed) {
    seenStarted_ = seenCompleted_ = 0;
    return;
  }
  if (started != seenStarted_ || completed != seenCompleted_) {
    seenStarted_ = started;
    seenCompleted_ = completed;
    since_ = now;
    warned_ = false;
    return;
  }
  const auto waitedMs = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
  if (warnMs_ > 0 && !warned_ && waitedMs >= warnMs_) {
    warned_ = true;
    const std::string path = dumpFlight("stall");
    std::fprintf(stderr, "boostcomm: warning: rank %d: a collective has waited %.1f s: %s%s%s\n", rank_,
                 static_cast<double>(waitedMs) / 1000.0, report().c_str(), path.empty() ? "" : "; flight record ",
                 path.c_str());
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
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

std::string StallInspector::flightJson() const {
  std::ostringstream os;
  const std::uint64_t started = own_->started.load(std::memory_order_acquire);
  const std::uint64_t completed = own_->completed.load(std::memory_order_acquire);
  os << "{\"rank\": " << rank_ << ", \"pid\": " << getpid() << ", \"started\": " << started
     << ", \"completed\": " << completed << ", \"size\": " << peers_.size() << ", \"peers\": [";
  // What this rank sees of its node's peers: names ranks that cannot dump
  // (stopped, killed) in `boostcomm trace analyze`.
  for (std::size_t r = 0; r < peers_.size(); ++r) {
    if (peers_[r] == nullptr) continue;
    os << (r == 0 ? "" : ", ") << "{\"rank\": " << r
       << ", \"started\": " << peers_[r]->started.load(std::memory_order_acquire)
       << ", \"completed\": " << peers_[r]->completed.load(std::memory_order_acquire) << "}";
  }
  os << "], \"entries\": [\n";
  const std::uint64_t from = started > kFlightRingEntries ? started - kFlightRingEntries : 0;
  bool first = true;
  for (std::uint64_t seq = from; seq < started; ++seq) {
    Fingerprint f;
    if (!own_->read(seq, f)) continue;
    os << (first ? "" : ",\n") << "  {\"seq\": " << seq << ", \"call\": \"" << core::describe(f)
       << "\", \"state\": \"" << (seq < completed ? "completed" : "started") << "\"}";
    first = false;
  }
  os << "\n]}\n";
  return os.str();
}

std::string StallInspector::dumpFlight(const char* reason) const {
  const std::string dir = core::tunableString(core::kTunableTraceDir);
  if (dir.empty()) return {};
  const std::string path = dir + "/rank-" + std::to_string(rank_) + ".json";
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    if (!out) return {};
    std::string json = flightJson();
    json.insert(1, "\"reason\": \"" + std::string(reason) + "\", ");
    out << json;
    if (!out.flush()) return {};
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return {};
  return path;
}

}  // namespace boostcomm::detail
