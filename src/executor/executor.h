// Executor: progresses schedules without blocking.
//
// An Execution is one Schedule bound to a call's buffers. progress() starts
// every step whose dependencies are done (sends/receives are posted, local
// steps run at once), tests the posted ones, and returns; it never waits. The
// caller (blocking call, Work::test/wait, later a background engine) calls it
// repeatedly, for as many executions as are in flight, in issue order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/error.h"
#include "core/call_status.h"
#include "core/segment_list.h"
#include "executor/link_meter.h"
#include "executor/schedule.h"
#include "transport/transport.h"

namespace boostcomm::executor {

struct Binding {
  const void* send = nullptr;
  void* recv = nullptr;
  void* scratch = nullptr;
  // allgatherv layout for native steps (elements, one per rank); may be null.
  const int* nativeCounts = nullptr;
  const int* nativeDispls = nullptr;
  // Transports of the intra-node and inter-node communicators for steps of
  // hierarchical schedules (index kIntraComm / kInterComm); world is passed
  // to progress().
  transport::Transport* subTransports[kNumComms] = {nullptr, nullptr, nullptr};
  // A segment-list call (core/segment_list.h): the send buffer is sendList
  // and the recv buffer recvList (the same list for an in-place allreduce or
  // a broadcast), and send/recv above are unused. Every step addresses a
  // list by offset as if it were contiguous; the execution cuts each step at
  // segment boundaries (send/recv: one scatter-gather message; local steps:
  // one run per piece; shm allreduce: the engine copies in and out of the
  // segments; other backend collectives: through a staging copy). Both are
  // set or neither.
  const core::SegmentList* sendList = nullptr;
  const core::SegmentList* recvList = nullptr;
  // Link accounting (executor/link_meter.h); null when off.
  LinkMeter* meter = nullptr;
  // The call's fingerprint header (see Execution), sent on tag headerTag
  // (absolute, outside every step's tag); headerTag < 0: no header.
  core::CallHeader header;
  int headerTag = -1;
  // Call status of every world rank whose status this rank can read in
  // shared memory (core/call_status.h; null entries elsewhere), or null. A
  // world-communicator peer listed here gets no header message: its
  // fingerprint of the call is read from its status instead (see Execution).
  const std::vector<core::CallStatus*>* peerStatus = nullptr;
  // The transports accept shorter messages than a receive's size
  // (Transport::acceptsShorterMessages): first messages carry the header
  // inline (see Execution).
  bool inlineHeaders = false;
};

// Issue order of collective steps across the executions in flight.
//
// MPI matches a communicator's collectives, and the shm engine its calls, by
// the order each rank issues them, so every rank must issue them in one
// order. A schedule chains its own (Schedule::chainAfterPrevious). Across
// schedules, timing decides: a hierarchical allreduce's second intra-node
// phase waits for its inter-node phase, so one rank of a node may issue it
// before the next call's first intra-node phase and another after it; the
// node's ranks then disagree about which call is which and hang (seen with
// several GradientGroup buckets in flight on 2 nodes x 2 ranks). So each
// execution takes its places in every lane (kind of collective step x
// transport) at its first progress — executions progress in call order,
// the same on every rank — and issues a step only when its place is next.
class IssueLedger {
 public:
  struct Lane {
    std::uint64_t reserved = 0;  // places handed out
    std::uint64_t issued = 0;    // places whose step was issued
  };
  Lane& lane(const transport::Transport* transport, int kind);
  // Forgets every lane (no execution may be in flight).
  void clear() { lanes_.clear(); }

 private:
  struct Entry {
    const transport::Transport* transport;
    int kind;
    Lane lane;
  };
  std::deque<Entry> lanes_;  // a handful; deque: references stay valid
};

// The fingerprint header. Before its first data message to a peer, an
// execution sends that peer its call header (core::CallHeader: sequence,
// collective, dtype, count, op, root, wire; 40 bytes, its own tag), and it
// posts no receive from a peer before that peer's header arrived and agreed.
// So ranks that disagree on a point-to-point schedule's call fail with
// Error{kMismatch} naming both sides, instead of hanging (different peers or
// tags), failing with a truncation error (the sender's message is longer),
// or returning a wrong result (shorter, or a different op or dtype of the
// same size). The header is fixed-size, so it matches whatever the counts.
// Cost: one small message per peer and call, sent at the first progress
// (it travels while the first data step is prepared) — docs/RELIABILITY.md.
// Peers whose call status this rank reads in shared memory (the ranks of
// its node, Binding::peerStatus) exchange no header: each published its
// fingerprint of the call (CommunicatorImpl::launch, before the first send),
// and the receiver reads the sender's entry for this sequence before it
// posts a receive from it — the same check and words, one message fewer.
// Not cheaper on these VMs: the read is a cache-line transfer between cores
// on the critical path (ring/rhd +20-32% at 8 B-1 KiB against +25-37% for
// the message; docs/PERFORMANCE_HISTORY.md section 17).
// Inline header (the default for first messages of at most
// kInlineHeaderBytes, not a wire format or segment list, on transports that
// accept shorter messages than a receive's size: MPI): the header travels in
// FRONT of the first data message to each peer, staged [header | data, with
// the data's length in CallHeader::reserved], so there is no header message
// and no status read, only two small copies. Both sides pick the same
// message: the first one with that peer in step order, which is also the
// one with the smallest tag (checked). The receive is posted for the largest
// inline message, so a peer whose count differs still delivers its header
// and both calls are named; a peer that sends no inline header (its first
// message is larger, or in the skipped window below) delivers bytes without
// the header's magic, or more than the receive takes (a truncation error),
// and is sent a header message anyway, since it waits for one. Either way a
// mismatch. (A trailer instead would truncate before it could be read.)
// docs/RELIABILITY.md, "Inline fingerprint header"; PERFORMANCE_HISTORY.md section 20.
// Messages up to this size carry the fingerprint header inline (see above),
// except those that the header's 40 bytes would push past a cheaper protocol
// of the backend. Open MPI's shared-memory BTL (vader) sends up to 256 bytes
// inline and up to 4 KiB eagerly by default: a 256-byte message becoming 296
// bytes cost 36% (2.37 vs 1.74 us, 2 ranks), and a 4 KiB one would go
// rendezvous. So header + data stays within 4 KiB, and first messages of
// 217-256 bytes keep the separate header (or status read).
inline constexpr std::size_t kInlineHeaderBytes = 4096 - sizeof(core::CallHeader);
// Sends from this size on wait for the peer's header where the transport
// announces receives (Execution::sendMayStart): a round trip is then small
// beside the message's own time on the wire.
inline constexpr std::size_t kHoldSendBytes = 64 * 1024;
inline constexpr std::size_t kInlineSkipFrom = 256 - sizeof(core::CallHeader) + 1;
inline constexpr std::size_t kInlineSkipTo = 256;

class Execution {
 public:
  // tagBase is added to every step's tag (so concurrent calls never match each
  // other's messages). blockingNative: run kNative steps with the backend's
  // blocking call (fastest when nothing else is in flight and no deadline is set).
  // The execution keeps `schedule` (its header plan is reused while the
  // next call runs the same schedule with the same binding flags).
  void start(const std::shared_ptr<const Schedule>& schedule, const Binding& binding, int tagBase,
             bool blockingNative);
  // Advances; true when every step is done. Throws on transport errors.
  // `advanced` (optional) is set when any step started or finished.
  bool progress(transport::Transport& transport, IssueLedger& ledger, bool* advanced = nullptr);
  bool done() const { return remaining_ == 0 && headersPending_ == 0; }
  const Schedule* schedule() const { return schedule_; }
  // Whether a thread may sleep until this execution can advance, instead of
  // polling it: every step in flight is a message or a backend collective on
  // a transport in `signalling` (Transport::signalCompletions), or a kShm
  // step on a shared-memory engine with a doorbell (SharedMemoryEngine::
  // doorbell: its peers ring it), and every header awaited travels on a
  // signalling transport (none is read from a peer's status in shared
  // memory). Steps not started wait on what the sweeps advance (their
  // dependencies, an earlier call's place in its lane, a header message
  // checked like the steps): the sweep that sees the completion freeing
  // them starts them. `wakes` collects what the waits are on.
  struct WakeSources {
    // The engine whose doorbell to sleep on: where kShm steps wait, set to
    // theirs (sleepsUntilWoken is false if it already names another one).
    transport::SharedMemoryEngine* shm = nullptr;
    bool signals = false;  // some steps wait on a signalling transport
  };
  bool sleepsUntilWoken(transport::Transport& world, std::span<transport::Transport* const> signalling,
                        WakeSources& wakes) const;

  // Storage for Binding::nativeCounts/nativeDispls that lives as long as the
  // execution and keeps its capacity across reuse.
  std::vector<int> nativeCounts;
  std::vector<int> nativeDispls;
  // Storage for Binding::sendList / recvList, likewise (an in-place call
  // binds recvList to both).
  core::SegmentList sendList;
  core::SegmentList recvList;

 private:
  enum class State : std::uint8_t { kPending, kRunning, kDone };
  void* resolve(BufRef ref) const;
  bool listCall() const { return binding_.recvList != nullptr; }
  // The segment list ref addresses; null for scratch and for plain calls.
  const core::SegmentList* listOf(BufRef ref) const {
    if (ref.buffer == BufferId::kSend) return binding_.sendList;
    if (ref.buffer == BufferId::kRecv) return binding_.recvList;
    return nullptr;
  }
  bool listed(BufRef ref) const { return listOf(ref) != nullptr; }
  core::Operand operand(BufRef ref) const;
  // Send/recv of a listed range: one message, scatter-gather when it straddles segments.
  void postListed(bool isSend, const Step& step, transport::Transport& transport, transport::Request& req);
  // Backend/shm collectives over a listed range that the backend cannot
  // address piecewise: gathered into staging_, scattered back on completion.
  bool startStaged(std::size_t index, const Step& step, transport::Transport& transport, transport::Request& req);
  // The byte ranges a kNative/kShm step reads (src) and writes (dst).
  struct StepRanges {
    std::size_t srcOffset = 0, srcBytes = 0, dstOffset = 0, dstBytes = 0;
  };
  StepRanges collectiveRanges(const Step& step, transport::Transport& transport) const;
  void finishStep(std::size_t index, transport::Transport& world);
  bool ready(const Step& step) const;
  // Starts a step; true when it completed immediately.
  bool startStep(std::size_t index, transport::Transport& transport);
  // startStep's parts: post a send or a receive (wire staging, a listed
  // range, an inline header, or the plain buffer); run a local step (reduce,
  // copy, round, divide) to completion; start a backend collective.
  void startSend(std::size_t index, const Step& s, transport::Transport& transport, transport::Request& req);
  void startRecv(std::size_t index, const Step& s, transport::Transport& transport, transport::Request& req);
  void runLocalStep(const Step& s);
  bool startNative(std::size_t index, const Step& s, transport::Transport& transport, transport::Request& req);
  // send/recv: the step's memory (at the chunk start for allreduce/broadcast).
  void runNative(const Step& step, transport::Transport& transport, transport::Request* req, const char* send,
                 char* recv);
  // A kShm step the engine can run on the segment lists directly (no staging).
  bool shmOnLists(const Step& step) const;
  transport::SharedMemoryEngine& engineOf(transport::Transport& transport) const;
  void startShm(const Step& step, transport::Transport& transport, transport::Request& req, const void* send,
                void* recv);
  // The transport of communicator `comm` (kWorldComm: world).
  transport::Transport& transportFor(int comm, transport::Transport& world) const;
  // Takes this execution's places in the ledger's lanes (first progress).
  void takePlaces(transport::Transport& world, IssueLedger& ledger);
  // kNative / kShm: whether the step's place is next in its lane.
  bool placeIsNext(const Step& step) const;
  void markIssued(const Step& step);
  // Link accounting of step `index` as it starts / finishes (binding_.meter set).
  void meterStart(std::size_t index);
  void meterFinish(std::size_t index);

  // Fingerprint headers (see above): one per peer a send / receive step names.
  struct PeerHeader {
    int comm = 0;
    int peer = -1;
    transport::Request req;
    core::CallHeader theirs;  // receive side
    bool done = false;        // sent / received and agreed
    // The peer's status in shared memory: no message, its entry is read.
    const core::CallStatus* status = nullptr;
    // The first step (step order) with this peer, and the smallest tag of
    // all steps with it: both sides must name the same message.
    std::uint32_t firstStep = 0;
    int minTag = 0;
    // Inline: the header travels in front of the first step's data (a
    // staged message at inlineOffset in inline_), no header message and no
    // status read (see below).
    bool inlined = false;
    std::size_t inlineOffset = 0;
  };
  // The header plan (which peers, which first messages carry the header
  // inline, where in inline_) depends only on the schedule and the binding's
  // inlineHeaders / list flags and peerStatus: built when they change, then
  // only reset.
  void collectHeaderPeers(const std::shared_ptr<const Schedule>& schedule);
  void buildHeaderPlan();
  void dropHeaderPlan();  // no plan: the lists empty, nothing kept
  // Whether step `index` (a peer's first message) can carry the header inline.
  bool inlineable(std::size_t index) const;
  // The inline header's PeerHeader of step `index`, or null.
  PeerHeader* inlineHeaderOf(std::size_t index) {
    if (inlineOf_.empty() || inlineOf_[index] < 0) return nullptr;
    const Step& s = schedule_->steps()[index];
    return &(s.kind == StepKind::kSend ? sendHeaders_ : recvHeaders_)[static_cast<std::size_t>(inlineOf_[index])];
  }
  // The received inline header agrees (else kMismatch): its data to dst.
  void acceptInline(std::size_t index, PeerHeader& h, transport::Transport& world);
  // It does not: kMismatch naming both calls (after sending the peer our header).
  [[noreturn]] void rejectInline(const Step& s, const PeerHeader& h, std::size_t index, transport::Transport& world);
  // An inline receive failed in the backend (a longer message): kMismatch.
  [[noreturn]] void raiseInlineTruncation(std::size_t index, const Error& e, transport::Transport& world);
  // The peer of inline step `index` may wait for a header message: one to
  // it, before a mismatch is raised (see the .cc).
  void sendHeaderAnyway(std::size_t index, transport::Transport& world);
  transport::Request headerAnyway_;
  // "collective mismatch: rank R (seq N, <call>, <algorithm>)": this rank's side.
  std::string ownCallWords() const;
  void postHeaders(transport::Transport& world);
  // Tests the headers in flight; throws Error{kMismatch} on disagreement.
  void progressHeaders(transport::Transport& world, bool& any);
  bool headerAgreed(std::size_t step) const {
    if (recvSlot_.empty()) return true;
    const PeerHeader& h = recvHeaders_[recvSlot_[step]];
    return h.done || (h.inlined && h.firstStep == step);  // the inline carrier itself may start
  }
  // Whether send step `step` may start on `transport`: a send of at least
  // kHoldSendBytes to a peer this execution also receives from waits, on a
  // transport that announces receives, for that peer's header, so that the
  // receive from it is posted first (progress() posts ready receives
  // before anything else) and its announcement leaves ahead of this send's
  // data. Two ranks exchanging 25 MiB over Gloo's pairs otherwise ran one
  // direction after the other: the receive waited for the header while the
  // send went at once. Headers are never held, so this cannot deadlock.
  // Without fingerprint headers (BOOSTCOMM_FINGERPRINTS=0) receives wait
  // for nothing and nothing is held.
  bool sendMayStart(std::size_t step, const transport::Transport& transport) const {
    if (sendHold_.empty() || sendHold_[step] < 0 || !transport.announcesReceives()) return true;
    return recvHeaders_[static_cast<std::size_t>(sendHold_[step])].done;
  }

  const Schedule* schedule_ = nullptr;
  Binding binding_;
  std::vector<PeerHeader> sendHeaders_;
  std::vector<PeerHeader> recvHeaders_;
  std::vector<std::uint32_t> recvSlot_;  // per step: its peer's entry in recvHeaders_ (receives only)
  std::vector<std::int32_t> inlineOf_;   // per step: its inline header's entry (send or recv list), or -1
  std::vector<std::int32_t> sendHold_;   // per step: the recv header a large send waits for (see sendMayStart), or -1
  std::vector<char> inline_;             // the staged inline messages; capacity kept across calls
  std::size_t headersPending_ = 0;
  // What the header plan above was built for (held: its address is not reused).
  std::shared_ptr<const Schedule> planned_;
  bool plannedInline_ = false;
  bool plannedList_ = false;
  const std::vector<core::CallStatus*>* plannedStatus_ = nullptr;  // the engine's communicator's, stable
  std::size_t headerMessages_ = 0;  // header messages and status reads per call (the plan's)
  int tagBase_ = 0;
  bool blockingNative_ = false;
  std::vector<State> state_;               // capacity kept across calls
  std::vector<transport::Request> requests_;
  struct StagedRange {
    std::size_t offset = 0;  // in the recv list
    std::size_t bytes = 0;   // 0: the step's result is not staged
  };
  std::vector<StagedRange> staged_;  // per step, list-bound calls only
  // staging_ mirrors the recv list at [0, recv total) and, for a call that
  // is not in place, the send list after it, so concurrent steps' ranges
  // never share bytes.
  std::vector<char> staging_;        // capacity kept across calls
  std::vector<core::Piece> pieces_;  // posting scratch
  std::vector<std::int64_t> startNs_;  // per step, when a meter is bound
  std::size_t firstPending_ = 0;
  std::size_t remaining_ = 0;
  bool placed_ = false;
  IssueLedger::Lane* lanes_[kNumIssueLanes][kNumComms] = {};
  std::uint64_t firstPlace_[kNumIssueLanes][kNumComms] = {};
};

}  // namespace boostcomm::executor
