#include "executor/executor.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/clock.h"
#include "core/reduce.h"
#include "executor/wire_steps.h"
#include "transport/shared_memory.h"

namespace boostcomm::executor {

IssueLedger::Lane& IssueLedger::lane(const transport::Transport* transport, int kind) {
  for (Entry& e : lanes_) {
    if (e.transport == transport && e.kind == kind) return e.lane;
  }
  lanes_.push_back(Entry{transport, kind, Lane{}});
  return lanes_.back().lane;
}

void Execution::start(const std::shared_ptr<const Schedule>& owner, const Binding& binding, int tagBase,
                      bool blockingNative) {
  const Schedule& schedule = *owner;
  placed_ = false;
  schedule_ = &schedule;
  binding_ = binding;
  tagBase_ = tagBase;
  blockingNative_ = blockingNative;
  const std::size_t n = schedule.steps().size();
  state_.assign(n, State::kPending);
  requests_.assign(n, transport::Request{});
  firstPending_ = 0;
  remaining_ = n;
  if (binding.meter != nullptr) startNs_.assign(n, 0);
  collectHeaderPeers(owner);
  // Executions are reused: a plain call must not see a list call's staging.
  if (binding.recvList != nullptr) {
    staged_.assign(n, StagedRange{});
  } else {
    staged_.clear();
  }
}

core::Operand Execution::operand(BufRef ref) const {
  if (const core::SegmentList* list = listOf(ref)) return core::Operand{list, nullptr, ref.offsetBytes};
  return core::Operand{nullptr, static_cast<char*>(resolve(ref)), 0};
}

void Execution::postListed(bool isSend, const Step& step, transport::Transport& transport, transport::Request& req) {
  const BufRef ref = isSend ? step.src : step.dst;
  const core::SegmentList& list = *listOf(ref);
  char* whole = list.contiguous(ref.offsetBytes, step.bytes);
  if (whole != nullptr || step.bytes == 0) {
    if (isSend) {
      transport.isend(whole, step.bytes, step.peer, tagBase_ + step.tag, req);
    } else {
      transport.irecv(whole, step.bytes, step.peer, tagBase_ + step.tag, req);
    }
    return;
  }
  pieces_.clear();
  list.forEachPiece(ref.offsetBytes, step.bytes, [&](core::Piece p) { pieces_.push_back(p); });
  if (isSend) {
    transport.isendPieces(pieces_.data(), pieces_.size(), step.peer, tagBase_ + step.tag, req);
  } else {
    transport.irecvPieces(pieces_.data(), pieces_.size(), step.peer, tagBase_ + step.tag, req);
  }
}

Execution::StepRanges Execution::collectiveRanges(const Step& step, transport::Transport& transport) const {
  const NativeCall& call = step.native;
  const std::size_t es = schedule_->elementSize();
  const std::size_t ranks = static_cast<std::size_t>(transport.size());
  StepRanges r;
  r.srcOffset = step.src.offsetBytes;
  r.dstOffset = step.dst.offsetBytes;
  switch (call.collective) {
    case Collective::kAllreduce:
    case Collective::kBroadcast: {
      // Chunked: a kNative step covers elements [elementOffset, + count) of
      // its buffers; a kShm step's offsets already point at its range.
      const std::size_t chunk = step.kind == StepKind::kNative ? call.elementOffset * es : 0;
      r.dstOffset += chunk;
      r.dstBytes = call.count * es;
      if (call.collective == Collective::kAllreduce) {
        r.srcOffset += chunk;
        r.srcBytes = call.count * es;
      }
      break;
    }
    case Collective::kAllgather: {
      std::size_t total = ranks * call.count;
      if (binding_.nativeCounts != nullptr) {
        total = 0;
        for (std::size_t i = 0; i < ranks; ++i) total += static_cast<std::size_t>(binding_.nativeCounts[i]);
      }
      r.srcBytes = call.count * es;
      r.dstBytes = total * es;
      break;
    }
    case Collective::kReduceScatter:
      r.srcBytes = ranks * call.count * es;
      r.dstBytes = call.count * es;
      break;
    case Collective::kBarrier:
      BC_INTERNAL(false, schedule_->algorithm() << ": a barrier step cannot run on a segment list");
  }
  return r;
}

bool Execution::startStaged(std::size_t index, const Step& step, transport::Transport& transport,
                            transport::Request& req) {
  // The documented fallback for backend collectives over a listed range that
  // straddles segments (MPI's reductions over derived datatypes are not
  // portable, and an hindexed type over absolute addresses makes Open MPI
  // size its temporaries by the address span): one gather of what the step
  // reads and one scatter of what it writes.
  const StepRanges r = collectiveRanges(step, transport);
  const bool inPlace = binding_.sendList == binding_.recvList;
  const std::size_t recvTotal = binding_.recvList->totalBytes();
  auto memoryOf = [&](BufRef ref, std::size_t offset, std::size_t bytes, std::size_t stagingBase,
                      bool& staged) -> char* {
    staged = false;
    const core::SegmentList* list = listOf(ref);
    if (list == nullptr) return static_cast<char*>(resolve(ref)) + (offset - ref.offsetBytes);
    if (bytes == 0) return nullptr;
    char* whole = list->contiguous(offset, bytes);
    if (whole != nullptr) return whole;
    const std::size_t need = recvTotal + (inPlace ? 0 : binding_.sendList->totalBytes());
    if (staging_.size() < need) staging_.resize(need);
    staged = true;
    return staging_.data() + stagingBase + offset;
  };
  bool srcStaged = false;
  bool dstStaged = false;
  const bool broadcast = step.native.collective == Collective::kBroadcast;
  char* dst = memoryOf(step.dst, r.dstOffset, r.dstBytes, 0, dstStaged);
  // A broadcast reads and writes its one buffer (the root sends what it holds).
  char* src = broadcast ? dst : memoryOf(step.src, r.srcOffset, r.srcBytes, inPlace ? 0 : recvTotal, srcStaged);
  if (srcStaged) listOf(step.src)->gather(src, r.srcOffset, r.srcBytes);
  if (broadcast && dstStaged) binding_.recvList->gather(dst, r.dstOffset, r.dstBytes);
  if (dstStaged) staged_[index] = StagedRange{r.dstOffset, r.dstBytes};
  if (step.kind == StepKind::kShm) {
    startShm(step, transport, req, src, dst);
    return engineOf(transport).test(req);
  }
  if (blockingNative_) {
    runNative(step, transport, nullptr, src, dst);
    return true;
  }
  runNative(step, transport, &req, src, dst);
  return transport.test(req);
}

void Execution::finishStep(std::size_t index, transport::Transport& world) {
  const Step& step = schedule_->steps()[index];
  if (step.kind == StepKind::kRecv) {
    if (PeerHeader* h = inlineHeaderOf(index)) acceptInline(index, *h, world);
  }
  if (step.wire != WireFormat::kOff && step.kind == StepKind::kRecv && !step.fused) {
    decodeWireStep(step, static_cast<const char*>(resolve(step.src2)), operand(step.dst));
  }
  if (staged_.empty()) return;
  StagedRange& r = staged_[index];
  if (r.bytes == 0) return;
  binding_.recvList->scatter(r.offset, staging_.data() + r.offset, r.bytes);
  r.bytes = 0;
}

void* Execution::resolve(BufRef ref) const {
  char* base = nullptr;
  switch (ref.buffer) {
    case BufferId::kSend: base = static_cast<char*>(const_cast<void*>(binding_.send)); break;
    case BufferId::kRecv: base = static_cast<char*>(binding_.recv); break;
    case BufferId::kScratch: base = static_cast<char*>(binding_.scratch); break;
  }
  return base == nullptr ? nullptr : base + ref.offsetBytes;
}

bool Execution::ready(const Step& step) const {
  const auto& deps = schedule_->deps();
  for (std::uint32_t d = 0; d < step.depCount; ++d) {
    if (state_[deps[step.depBegin + d]] != State::kDone) return false;
  }
  return true;
}

transport::Transport& Execution::transportFor(int comm, transport::Transport& world) const {
  if (comm == kWorldComm) return world;
  transport::Transport* sub = binding_.subTransports[comm];
  BC_INTERNAL(sub != nullptr, schedule_->algorithm() << ": step on communicator " << comm
                                                     << " but no such sub-communicator is bound");
  return *sub;
}

void Execution::runNative(const Step& step, transport::Transport& transport, transport::Request* req,
                          const char* send, char* recv) {
  const NativeCall& call = step.native;
  // kAvg is finished by a kDivide step of the schedule; the backend sums.
  const ReduceOp op = schedule_->op() == ReduceOp::kAvg ? ReduceOp::kSum : schedule_->op();
  switch (call.collective) {
    case Collective::kAllreduce:
      transport.nativeAllreduce(send, recv, call.count, schedule_->dtype(), op, req);
      break;
    case Collective::kAllgather:
      transport.nativeAllgatherv(send, call.count, recv, binding_.nativeCounts, binding_.nativeDispls,
                                 schedule_->dtype(), req);
      break;
    case Collective::kBroadcast:
      transport.nativeBroadcast(recv, call.count, schedule_->dtype(), call.root, req);
      break;
    case Collective::kReduceScatter:
      transport.nativeReduceScatter(send, recv, call.count, schedule_->dtype(), op, req);
      break;
    case Collective::kBarrier:
      transport.nativeBarrier(req);
      break;
  }
}

transport::SharedMemoryEngine& Execution::engineOf(transport::Transport& transport) const {
  transport::SharedMemoryEngine* engine = transport.sharedMemory();
  BC_INTERNAL(engine != nullptr, schedule_->algorithm() << ": shm step on a transport without a shared-memory engine");
  return *engine;
}

bool Execution::shmOnLists(const Step& step) const {
  switch (step.native.collective) {
    case Collective::kAllreduce:  // in place on one list
      return listOf(step.src) == listOf(step.dst) && step.src.offsetBytes == step.dst.offsetBytes;
    case Collective::kBroadcast:  // one buffer: the step's dst
      return listed(step.dst);
    case Collective::kAllgather:
      // Separate send and recv lists (an in-place allgather, send inside
      // recv, is staged: the engine's own-block copy would read what it writes).
      return listed(step.src) && listed(step.dst) && listOf(step.src) != listOf(step.dst);
    default:  // reduce_scatter, barrier
      return false;
  }
}

void Execution::startShm(const Step& step, transport::Transport& transport, transport::Request& req,
                         const void* send, void* recv) {
  transport::SharedMemoryCall call;
  call.collective = step.native.collective;
  call.send = send;
  call.recv = recv;
  call.count = step.native.count;
  if (call.collective == Collective::kAllgather) {
    call.counts = binding_.nativeCounts;
    call.displs = binding_.nativeDispls;
  }
  call.dtype = schedule_->dtype();
  call.op = schedule_->op();
  call.avgDivisor = step.divisor;
  call.root = step.native.root;
  if (send == nullptr && recv == nullptr && listCall() && shmOnLists(step)) {
    // On the lists themselves: the engine copies in from the segments and
    // out to them, the copies it makes anyway. (A staged step passes null
    // buffers only when it moves no bytes; it stays off the lists.)
    const StepRanges r = collectiveRanges(step, transport);
    call.list = listOf(step.dst);
    call.listOffsetBytes = r.dstOffset;
    if (call.collective == Collective::kAllgather) {
      call.sendList = listOf(step.src);
      call.sendListOffsetBytes = r.srcOffset;
    }
  }
  engineOf(transport).start(call, req);
}

bool Execution::startStep(std::size_t index, transport::Transport& world) {
  const Step& s = schedule_->steps()[index];
  transport::Transport& transport = transportFor(s.comm, world);
  transport::Request& req = requests_[index];
  switch (s.kind) {
    case StepKind::kSend:
      startSend(index, s, transport, req);
      return transport.test(req);
    case StepKind::kRecv:
      startRecv(index, s, transport, req);
      return transport.test(req);
    case StepKind::kReduce:
    case StepKind::kCopy:
    case StepKind::kRound:
    case StepKind::kDivide:
      runLocalStep(s);
      return true;
    case StepKind::kNative:
      return startNative(index, s, transport, req);
    case StepKind::kShm:
      if (listCall() && (listed(s.src) || listed(s.dst))) {
        if (!shmOnLists(s)) return startStaged(index, s, transport, req);
        startShm(s, transport, req, nullptr, nullptr);
      } else {
        startShm(s, transport, req, resolve(s.src), resolve(s.dst));
      }
      return engineOf(transport).test(req);
  }
  return true;
}

void Execution::startSend(std::size_t index, const Step& s, transport::Transport& transport, transport::Request& req) {
  if (s.wire != WireFormat::kOff) {
    char* staging = static_cast<char*>(resolve(s.src2));
    if (!s.staged) encodeWireStep(s, operand(s.src), staging);
    transport.isend(staging, s.bytes, s.peer, tagBase_ + s.tag, req);
  } else if (listCall() && listed(s.src)) {
    postListed(true, s, transport, req);
  } else if (PeerHeader* h = inlineHeaderOf(index)) {
    char* message = inline_.data() + h->inlineOffset;
    core::CallHeader header = binding_.header;
    header.reserved = static_cast<std::uint32_t>(s.bytes);  // the inline data's length (<= 4056)
    std::memcpy(message, &header, sizeof(core::CallHeader));
    if (s.bytes > 0) std::memcpy(message + sizeof(core::CallHeader), resolve(s.src), s.bytes);
    transport.isend(message, sizeof(core::CallHeader) + s.bytes, s.peer, tagBase_ + s.tag, req);
  } else {
    transport.isend(resolve(s.src), s.bytes, s.peer, tagBase_ + s.tag, req);
  }
}

void Execution::startRecv(std::size_t index, const Step& s, transport::Transport& transport, transport::Request& req) {
  if (s.wire != WireFormat::kOff) {
    transport.irecv(resolve(s.src2), s.bytes, s.peer, tagBase_ + s.tag, req);
  } else if (listCall() && listed(s.dst)) {
    postListed(false, s, transport, req);
  } else if (PeerHeader* h = inlineHeaderOf(index)) {
    // No stale header may pass for the peer's: a message shorter than one reads as no header.
    std::memset(inline_.data() + h->inlineOffset, 0, sizeof(core::CallHeader));
    transport.irecv(inline_.data() + h->inlineOffset, sizeof(core::CallHeader) + kInlineHeaderBytes, s.peer,
                    tagBase_ + s.tag, req);
  } else {
    transport.irecv(resolve(s.dst), s.bytes, s.peer, tagBase_ + s.tag, req);
  }
}

void Execution::runLocalStep(const Step& s) {
  const bool list = listCall();
  const std::size_t es = schedule_->elementSize();
  switch (s.kind) {
    case StepKind::kReduce:
      if (s.count == 0) return;
      if (s.fused) {
        const Step* round = s.roundStep == kNoStep ? nullptr : &schedule_->steps()[s.roundStep];
        reduceWireStep(s, schedule_->dtype(), schedule_->op(), operand(s.dst), operand(s.src),
                       static_cast<const char*>(resolve(s.src2)), round != nullptr,
                       round != nullptr && round->staged ? static_cast<char*>(resolve(round->src2)) : nullptr);
        return;
      }
      if (list) {
        const core::Operand ops[3] = {operand(s.dst), operand(s.src), operand(s.src2)};
        core::forEachRun(ops, s.count * es, [&](char* const* p, std::size_t n) {
          core::reduce(p[0], p[1], p[2], n / es, schedule_->dtype(), schedule_->op());
        });
      } else {
        core::reduce(resolve(s.dst), resolve(s.src), resolve(s.src2), s.count, schedule_->dtype(), schedule_->op());
      }
      return;
    case StepKind::kCopy: {
      if (s.bytes == 0) return;
      if (list) {
        const core::Operand ops[2] = {operand(s.dst), operand(s.src)};
        core::forEachRun(ops, s.bytes, [](char* const* p, std::size_t n) {
          if (p[0] != p[1]) std::memcpy(p[0], p[1], n);
        });
        return;
      }
      void* dst = resolve(s.dst);
      const void* src = resolve(s.src);
      if (dst != src) std::memcpy(dst, src, s.bytes);
      return;
    }
    case StepKind::kRound:
      if (s.fused) return;  // its reduce rounded (and staged) these elements
      roundWireStep(s, operand(s.dst), s.staged ? static_cast<char*>(resolve(s.src2)) : nullptr);
      return;
    case StepKind::kDivide:
      if (s.count == 0) return;
      if (list) {
        const core::Operand ops[1] = {operand(s.dst)};
        core::forEachRun(ops, s.count * es, [&](char* const* p, std::size_t n) {
          core::divideBy(p[0], n / es, schedule_->dtype(), s.divisor);
        });
      } else {
        core::divideBy(resolve(s.dst), s.count, schedule_->dtype(), s.divisor);
      }
      return;
    default:
      BC_INTERNAL(false, "executor: step kind " << static_cast<int>(s.kind) << " is not local");
  }
}

bool Execution::startNative(std::size_t index, const Step& s, transport::Transport& transport,
                            transport::Request& req) {
  if (listCall() && (listed(s.src) || listed(s.dst))) return startStaged(index, s, transport, req);
  const bool chunked = s.native.collective == Collective::kAllreduce || s.native.collective == Collective::kBroadcast;
  const std::size_t at = chunked ? s.native.elementOffset * schedule_->elementSize() : 0;
  const char* send = static_cast<const char*>(resolve(s.src));
  char* recv = static_cast<char*>(resolve(s.dst));
  if (send != nullptr) send += at;
  if (recv != nullptr) recv += at;
  if (blockingNative_) {
    runNative(s, transport, nullptr, send, recv);
    return true;
  }
  runNative(s, transport, &req, send, recv);
  return transport.test(req);
}

void Execution::takePlaces(transport::Transport& world, IssueLedger& ledger) {
  for (int lane = 0; lane < kNumIssueLanes; ++lane) {
    for (int comm = 0; comm < kNumComms; ++comm) {
      const std::uint32_t count = schedule_->issueCount(lane, comm);
      lanes_[lane][comm] = nullptr;
      if (count == 0) continue;
      IssueLedger::Lane& l = ledger.lane(&transportFor(comm, world), lane);
      lanes_[lane][comm] = &l;
      firstPlace_[lane][comm] = l.reserved;
      l.reserved += count;
    }
  }
  placed_ = true;
}

bool Execution::placeIsNext(const Step& step) const {
  const int lane = issueLane(step.kind);
  return lanes_[lane][step.comm]->issued == firstPlace_[lane][step.comm] + step.issueIndex;
}

void Execution::markIssued(const Step& step) { ++lanes_[issueLane(step.kind)][step.comm]->issued; }

void Execution::meterStart(std::size_t index) {
  const Step& s = schedule_->steps()[index];
  if (s.kind == StepKind::kSend || s.kind == StepKind::kNative || s.kind == StepKind::kShm) {
    startNs_[index] = core::nowNs();
  }
}

void Execution::meterFinish(std::size_t index) {
  const Step& s = schedule_->steps()[index];
  LinkMeter& m = *binding_.meter;
  if (s.kind == StepKind::kSend) {
    m.sendFinished(m.levelOf(s.comm, s.peer), s.bytes, startNs_[index], core::nowNs());
  } else if (s.kind == StepKind::kNative || s.kind == StepKind::kShm) {
    m.collectiveFinished(m.modelled(s.native, s.comm, schedule_->dtype()), startNs_[index], core::nowNs());
  }
}

bool Execution::progress(transport::Transport& transport, IssueLedger& ledger, bool* anyAdvance) {
  bool any = false;
  if (!placed_) {
    takePlaces(transport, ledger);
    if (headersPending_ > 0) postHeaders(transport);
  }
  if (headersPending_ > 0) progressHeaders(transport, any);
  const auto& steps = schedule_->steps();
  bool advanced = true;
  const bool announcesReceives = transport.announcesReceives();
  // Tests step i when running, starts it when ready (only receives when
  // recvsOnly), and retires it when that finished it.
  auto visit = [&](std::size_t i, bool recvsOnly) {
    State& st = state_[i];
    if (st == State::kDone) return;
    if (recvsOnly && (st != State::kPending || steps[i].kind != StepKind::kRecv)) return;
    bool finished = false;
    try {
      if (st == State::kRunning) {
        transport::Transport& t = transportFor(steps[i].comm, transport);
        if (steps[i].kind == StepKind::kShm) {
          // Chunks that moved count as progress (the progress thread then
          // keeps polling instead of backing off into sleeps mid-transfer).
          transport::SharedMemoryEngine& shm = engineOf(t);
          const std::uint64_t before = shm.advances();
          finished = shm.test(requests_[i]);
          if (shm.advances() != before) any = true;
        } else {
          finished = t.test(requests_[i]);
        }
      } else if (ready(steps[i])) {
        const bool ordered = isIssueOrdered(steps[i].kind);
        if (ordered && !placeIsNext(steps[i])) return;  // an earlier call's collective goes first
        if (steps[i].kind == StepKind::kRecv && !headerAgreed(i)) return;  // the peer's header first
        if (steps[i].kind == StepKind::kSend && !sendMayStart(i, transportFor(steps[i].comm, transport))) return;
        st = State::kRunning;
        any = true;
        if (ordered) markIssued(steps[i]);
        if (binding_.meter != nullptr) meterStart(i);
        finished = startStep(i, transport);
      }
    } catch (const transport::TruncationError& e) {
      // A peer's first message longer than its inline receive: its call differs.
      if (steps[i].kind == StepKind::kRecv && inlineHeaderOf(i) != nullptr) raiseInlineTruncation(i, e, transport);
      throw;
    }
    if (finished) {
      finishStep(i, transport);
      if (binding_.meter != nullptr) meterFinish(i);
      st = State::kDone;
      --remaining_;
      advanced = true;
      any = true;
    }
  };
  // Local steps finish at once and may unblock later ones: sweep until a pass
  // changes nothing. Steps are in dependency order, so one pass usually does it.
  while (advanced && remaining_ > 0) {
    advanced = false;
    // On a transport that announces receives to their senders (Gloo's
    // pairs), receives that are ready are posted before anything else of
    // the pass: the notice then leaves ahead of this rank's own outgoing
    // data instead of behind it, where it held the peer's send back until
    // ours had crossed the link (two ranks exchanging 25 MiB ran one
    // direction after the other). Elsewhere steps go in schedule order
    // (posting receives first there broke the inline header's mismatch
    // report on the in-process transport: both ranks then waited).
    // (A job's transports are all of one kind: the world's answer holds for
    // its splits, and the pass costs MPI nothing.)
    if (announcesReceives) {
      for (std::size_t i = firstPending_; i < steps.size(); ++i) visit(i, /*recvsOnly=*/true);
    }
    for (std::size_t i = firstPending_; i < steps.size(); ++i) visit(i, /*recvsOnly=*/false);
    while (firstPending_ < steps.size() && state_[firstPending_] == State::kDone) ++firstPending_;
  }
  if (anyAdvance != nullptr && any) *anyAdvance = true;
  return remaining_ == 0 && headersPending_ == 0;
}

bool Execution::sleepsUntilWoken(transport::Transport& world, std::span<transport::Transport* const> signalling,
                                 WakeSources& wakes) const {
  auto signals = [&](int comm) {
    const transport::Transport* t = &transportFor(comm, world);
    return std::find(signalling.begin(), signalling.end(), t) != signalling.end();
  };
  if (headersPending_ > 0) {
    for (const PeerHeader& h : sendHeaders_) {
      if (h.done) continue;
      if (!signals(h.comm)) return false;
      wakes.signals = true;
    }
    for (const PeerHeader& h : recvHeaders_) {
      if (h.done || h.inlined) continue;  // inline: its step's message, checked below
      if (h.status != nullptr || !signals(h.comm)) return false;
      wakes.signals = true;
    }
  }
  const auto& steps = schedule_->steps();
  for (std::size_t i = firstPending_; i < steps.size(); ++i) {
    if (state_[i] != State::kRunning) continue;
    if (steps[i].kind == StepKind::kShm) {
      transport::SharedMemoryEngine* its = &engineOf(transportFor(steps[i].comm, world));
      if (its->doorbell() == nullptr || (wakes.shm != nullptr && wakes.shm != its)) return false;
      wakes.shm = its;
    } else if (!signals(steps[i].comm)) {
      return false;
    } else {
      wakes.signals = true;
    }
  }
  return true;
}

}  // namespace boostcomm::executor
