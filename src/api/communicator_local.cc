// CommunicatorImpl, the two routes without a schedule (api/route.h):
// kDirect, the backend's blocking collective, and kSmall, the shm engine's
// small collective, recorded and checked by the call record (watch/call_record.h)
// and, where node peers' status is unreadable, by the stamp carried in a
// checked allreduce's data. The route itself is chosen in
// communicator_impl.cc (routeOf).
#include <cstdio>
#include <functional>
#include <string>

#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/clock.h"
#include "transport/shared_memory.h"

namespace boostcomm::detail {

namespace {
// The flight recorder's algorithm name of runSmall's calls.
constexpr const char* kSmallName = "shm_small";
}  // namespace

void CommunicatorImpl::runWithoutSchedule(Route route, const CallArgs& args, const CallOptions& options) {
  // Every rank advances the tag sequence the same way. Only kDirect and
  // kSmall calls are recorded here; for the others nothing may be recorded
  // either: a started fingerprint of the per-rank count, replaced by the
  // schedule's one of the total, read by a peer's watchdog in between is a
  // false mismatch (seen with native allgather at 3 ranks under load).
  const bool small = route == Route::kSmall;
  const bool rootsBroadcast = args.collective == Collective::kBroadcast && args.root == rank_;
  // Small broadcasts this rank roots are checked in batches; any other call
  // checks them first.
  record_.beforeCall(sequence_, small && rootsBroadcast);
  const std::size_t count = spec_.count;
  const core::Fingerprint fingerprint = fingerprintOf(spec_);
  record_.start(sequence_, fingerprint, small ? kSmallName : "native", 0, /*blocking=*/!small);
  const CallRecord::Blocking blocking = record_.blockingGuard();
  executor::LinkMeter* meter = links_.meter();
  executor::LevelBytes linkBytes{};
  std::int64_t startNs = 0;
  if (meter != nullptr) {
    linkBytes = meter->modelled({args.collective, count, 0, args.root}, executor::kWorldComm, args.recv.dtype);
    startNs = core::nowNs();
  }
  if (!small) record_.prefetch(sequence_);
  try {
    if (small) {
      runSmall(args, count, fingerprint, options);
    } else {
      runNativeBlocking(args, count, fingerprint);
    }
  } catch (...) {
    record_.failed(sequence_, /*markFailed=*/small, std::current_exception());
  }
  if (!small) record_.verifyReturned(sequence_);
  // A small broadcast's root read no slot: its receivers' fingerprints are
  // compared at a later call (CallRecord::beforeCall).
  if (small && rootsBroadcast) record_.rootedSmallBroadcast(sequence_);
  record_.end(sequence_);
  if (meter != nullptr) meter->collectiveFinished(linkBytes, startNs, core::nowNs());
  ++sequence_;
}

void CommunicatorImpl::runNativeBlocking(const CallArgs& args, std::size_t count, const core::Fingerprint& fingerprint) {
  switch (args.collective) {
    case Collective::kAllreduce:
      if (!runCheckedAllreduce(args, count, fingerprint)) {
        transport_->nativeAllreduce(args.send.data, args.recv.data, count, args.recv.dtype, args.op, nullptr);
      }
      return;
    case Collective::kBroadcast:
      transport_->nativeBroadcast(args.recv.data, count, args.recv.dtype, args.root, nullptr);
      return;
    case Collective::kBarrier:
      transport_->nativeBarrier(nullptr);
      return;
    default:
      BC_INTERNAL(false, "runNativeBlocking of " << toString(args.collective));
  }
}

bool CommunicatorImpl::runCheckedAllreduce(const CallArgs& args, std::size_t count,
                                           const core::Fingerprint& fingerprint) {
  // Where node peers' call status is readable, CallRecord::verifyReturned checks
  // after the call for free; elsewhere the stamp travels in the data.
  if (!record_.fingerprints() || !record_.nodeStatus().empty() || count * dataTypeSize(args.recv.dtype) > transport::kCheckedAllreduceMaxBytes) {
    return false;
  }
  const transport::CallStamp mine{fingerprint.word(), fingerprint.count, sequence_, rank_};
  transport::CallStamp lo;
  transport::CallStamp hi;
  try {
    if (!transport_->nativeAllreduceChecked(args.send.data, args.recv.data, count, args.recv.dtype, args.op, mine, lo,
                                            hi)) {
      return false;
    }
  } catch (const transport::TruncationError& e) {
    // A peer's element is longer: its call has more bytes (count or dtype).
    core::raise(ErrorCategory::kMismatch, rank_,
                "collective mismatch: rank " + std::to_string(rank_) + ": " + core::describe(fingerprint) + ", seq " +
                    std::to_string(sequence_) + "; another rank's payload of this call is larger (a different "
                    "count or dtype; the backend reported: " + e.detail() + ")");
  }
  if (lo.sameCall(hi)) return true;
  const core::Fingerprint a = core::Fingerprint::fromWord(lo.word, lo.count);
  const core::Fingerprint b = core::Fingerprint::fromWord(hi.word, hi.count);
  core::raise(ErrorCategory::kMismatch, rank_,
              core::describeMismatch(static_cast<int>(lo.rank), a, lo.sequence, static_cast<int>(hi.rank), b,
                                     hi.sequence) +
                  " (carried in the backend call's data; no result was written)");
}

void CommunicatorImpl::runSmall(const CallArgs& args, std::size_t count, const core::Fingerprint& fingerprint,
                                const CallOptions& options) {
  transport::SmallCall call;
  call.collective = args.collective;
  call.send = args.send.data;
  call.recv = args.recv.data;
  call.count = count;
  call.dtype = args.recv.dtype;
  call.op = args.op;
  call.root = args.root;
  call.sequence = sequence_;
  call.fingerprint = fingerprint;
  call.compare = record_.fingerprints();
  // Waits end as the engine's do: the wait monitor's checks (a mismatch the
  // watchdog saw, abort, a peer gone) and the deadline, as Error{kTimeout}.
  // The clock starts at the first poll, the wait's first yield (after 64
  // pauses, a few microseconds): most calls never wait that long, and a
  // clock read costs a tenth of an 8-byte call. A peer that gave up on the
  // call (CallStatus::failed: its deadline or abort, maybe before it wrote
  // its slot) ends the wait too, as Error{kTimeout} naming it. The callable
  // holds one pointer, so std::function keeps it without allocating.
  struct Poll {
    CommunicatorImpl* self;
    Collective collective;
    std::optional<std::chrono::milliseconds> deadline;
    std::optional<std::chrono::steady_clock::time_point> start;
    void operator()() {
      const auto now = std::chrono::steady_clock::now();
      if (!start) start = now;
      const auto waited = now - *start;
      const bool late = deadline && waited > *deadline;
      self->engine_->checkWait(waited, late,
                               late ? std::string(toString(collective)) + " did not complete within " +
                                          std::to_string(deadline->count()) + " ms"
                                    : std::string(),
                               self->rank_);
      // Only after a while: a peer that failed on a mismatch wrote its slot
      // first, and this rank is about to find that mismatch in it.
      if (waited > std::chrono::milliseconds(100)) self->record_.raiseIfPeerFailed(self->sequence_, collective);
    }
  } state{this, args.collective, deadlineFor(options), std::nullopt};
  const std::function<void()> poll = [&state] { state(); };
  core::Fingerprint theirs;
  const int culprit = transport_->sharedMemory()->smallCollective(call, theirs, poll);
  if (culprit < 0) {
    // Every slot was written, but a peer may have given up on the call
    // meanwhile (its deadline passed while this rank was stopped or slow):
    // then the call failed there, and must not succeed here.
    record_.raiseIfPeerFailed(sequence_, args.collective);
    return;
  }
  // Every rank that reads a peer's slot finds the difference there.
  inspector_->dumpFlight("mismatch");  // before the raise: the caller's process may end right after it
  core::raise(ErrorCategory::kMismatch, rank_, core::describeMismatch(rank_, fingerprint, culprit, theirs, sequence_));
}

}  // namespace boostcomm::detail
