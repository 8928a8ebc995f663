#include "simulate/program.h"

#include <algorithm>

#include "algorithms/registry.h"
#include "core/check.h"
#include "core/backend_facts.h"

namespace boostcomm::simulate {

using executor::BufferId;
using executor::BufRef;
using executor::Schedule;
using executor::Step;
using executor::StepKind;

namespace {

// Channel layout: job (20 bits) | communicator (2) | native expansion (18) | tag (24).
constexpr int kTagBits = 24;
constexpr int kExpansionBits = 18;
constexpr int kCommBits = 2;

std::uint64_t channelOf(std::uint32_t job, std::uint8_t comm, std::uint32_t expansion, int tag) {
  return (static_cast<std::uint64_t>(job) << (kTagBits + kExpansionBits + kCommBits)) |
         (static_cast<std::uint64_t>(comm) << (kTagBits + kExpansionBits)) |
         (static_cast<std::uint64_t>(expansion) << kTagBits) | static_cast<std::uint64_t>(tag);
}

}  // namespace

int RankPlace::worldPeer(std::uint8_t comm, int peer) const {
  switch (comm) {
    case executor::kIntraComm: return node * perNode + peer;
    case executor::kInterComm: return peer * perNode + localRank;
    default: return peer;
  }
}

int RankPlace::commRank(std::uint8_t comm) const {
  return comm == executor::kIntraComm ? localRank : comm == executor::kInterComm ? node : rank;
}

int RankPlace::commSize(std::uint8_t comm) const {
  return comm == executor::kIntraComm ? perNode : comm == executor::kInterComm ? nodes : nodes * perNode;
}

std::size_t nativeTemporaryBytes(Collective collective, std::size_t bytes) {
  if (collective != Collective::kAllreduce) return 0;
  return bytes >= core::kFreshAllocationBytes ? bytes : 0;
}

// How one schedule's steps land in the program: what its send / recv /
// scratch offsets 0 stand for, which communicator a nested schedule runs on,
// and what its dependency-free steps wait for.
struct RankProgram::Placement {
  const algorithms::CollectiveSpec* spec = nullptr;  // the job's request
  const RankPlace* place = nullptr;
  std::uint32_t job = 0;
  BufRef send{BufferId::kSend, 0};
  BufRef recv{BufferId::kRecv, 0};
  std::size_t scratchBase = 0;
  int commOverride = -1;       // nested (native) schedules: the native step's communicator
  std::uint32_t expansion = 0;  // 0: the job's own steps
  std::vector<std::uint32_t> entry;
  std::uint32_t* nativeCounter = nullptr;  // per communicator, kNumComms entries
};

void RankProgram::appendJob(const Schedule& schedule, const algorithms::CollectiveSpec& spec, const RankPlace& place) {
  const auto job = static_cast<std::uint32_t>(opsOfJob.size());
  const auto before = static_cast<std::uint32_t>(ops.size());
  scratchBytesOfJob.push_back(schedule.scratchBytes());
  temporaryBytesOfJob.push_back(0);
  // One op per step (natives expand, joins add a few): reserving spares the
  // vector's regrowth copies, a tenth of the build time at 1024 ranks.
  ops.reserve(ops.size() + schedule.steps().size() + 16);
  pending.reserve(ops.capacity());
  std::uint32_t counters[executor::kNumComms] = {0, 0, 0};
  Placement p;
  p.spec = &spec;
  p.place = &place;
  p.job = job;
  p.nativeCounter = counters;
  append(schedule, p);
  opsOfJob.push_back(static_cast<std::uint32_t>(ops.size()) - before);
}

namespace {

// A schedule's buffer reference placed in its job: the send and receive
// buffers where the placement puts them, scratch past the placement's base.
BufRef placed(BufRef r, const BufRef& send, const BufRef& recv, std::size_t scratchBase) {
  switch (r.buffer) {
    case BufferId::kSend: return BufRef{send.buffer, send.offsetBytes + r.offsetBytes};
    case BufferId::kRecv: return BufRef{recv.buffer, recv.offsetBytes + r.offsetBytes};
    case BufferId::kScratch: return BufRef{BufferId::kScratch, scratchBase + r.offsetBytes};
  }
  return r;
}

}  // namespace

std::vector<std::uint32_t> RankProgram::append(const Schedule& schedule, const Placement& p) {
  const auto& steps = schedule.steps();
  const auto& deps = schedule.deps();
  // exits of step i: the ops its dependants wait for (one op, or a native
  // expansion's sinks, or — for an empty expansion — what it waited for).
  std::vector<std::uint32_t> exitBegin(steps.size()), exitCount(steps.size()), exits;
  exits.reserve(steps.size());
  std::vector<std::uint32_t> preds;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    preds.clear();
    for (std::uint32_t d = 0; d < s.depCount; ++d) {
      const std::uint32_t dep = deps[s.depBegin + d];
      preds.insert(preds.end(), exits.begin() + exitBegin[dep], exits.begin() + exitBegin[dep] + exitCount[dep]);
    }
    if (s.depCount == 0) preds = p.entry;
    joinLarge(preds, p.job);
    const auto comm = static_cast<std::uint8_t>(p.commOverride >= 0 ? p.commOverride : s.comm);
    exitBegin[i] = static_cast<std::uint32_t>(exits.size());
    if (s.kind == StepKind::kNative || s.kind == StepKind::kShm) {
      const std::vector<std::uint32_t> sinks = appendNative(s, schedule.elementSize(), p, comm, preds);
      exits.insert(exits.end(), sinks.begin(), sinks.end());
      exitCount[i] = static_cast<std::uint32_t>(sinks.size());
    } else {
      exits.push_back(addOp(opOf(s, schedule.elementSize(), p, comm), preds));
      exitCount[i] = 1;
    }
  }
  std::vector<std::uint32_t> out;
  for (Schedule::StepId sink : schedule.sinks(0, static_cast<Schedule::StepId>(steps.size()))) {
    out.insert(out.end(), exits.begin() + exitBegin[sink], exits.begin() + exitBegin[sink] + exitCount[sink]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::uint32_t> RankProgram::appendNative(const Step& s, std::size_t es, const Placement& p,
                                                     std::uint8_t comm, const std::vector<std::uint32_t>& preds) {
  // The backend's collective on `comm`, expanded into the modelled algorithm.
  const executor::NativeCall& call = s.native;
  algorithms::CollectiveSpec sub;
  sub.collective = call.collective;
  sub.dtype = p.spec->dtype;
  sub.op = p.spec->op == ReduceOp::kAvg ? ReduceOp::kSum : p.spec->op;
  sub.count = call.count;
  sub.root = call.root;
  sub.rank = p.place->commRank(comm);
  sub.size = p.place->commSize(comm);
  sub.chunkBytes = p.spec->chunkBytes;
  sub.maxChunks = p.spec->maxChunks;
  if (call.collective == Collective::kAllgather && comm == executor::kWorldComm) sub.counts = p.spec->counts;
  const char* model = nativeModelOf(call.collective, sub.payloadBytes(), sub.size);
  const algorithms::AlgorithmInfo* algo = algorithms::findAlgorithm(call.collective, model);
  BC_INTERNAL(algo != nullptr, "simulator: no model algorithm '" << model << "' for native "
                                                                 << toString(call.collective));
  Schedule nested(sub.collective, sub.dtype, sub.op, model);
  algo->build(sub, nested);
  const std::size_t off = call.elementOffset * es;
  const BufRef src = placed(s.src, p.send, p.recv, p.scratchBase);
  const BufRef dst = placed(s.dst, p.send, p.recv, p.scratchBase);
  Placement q = p;
  q.send = call.collective == Collective::kBroadcast ? BufRef{dst.buffer, dst.offsetBytes + off}
                                                     : BufRef{src.buffer, src.offsetBytes + off};
  q.recv = BufRef{dst.buffer, dst.offsetBytes + off};
  std::size_t& jobScratch = scratchBytesOfJob[p.job];
  q.scratchBase = (jobScratch + 63) & ~std::size_t{63};
  jobScratch = q.scratchBase + nested.scratchBytes();
  q.commOverride = comm;
  q.expansion = ++p.nativeCounter[comm];
  BC_INTERNAL(q.expansion < (1u << kExpansionBits), "simulator: too many native steps in one job");
  q.entry = preds;
  std::vector<std::uint32_t> sinks = nested.empty() ? preds : append(nested, q);
  if (const std::size_t temporary = nativeTemporaryBytes(call.collective, sub.payloadBytes()); temporary > 0) {
    // The temporary is faulted in as the algorithm first writes it: CPU
    // time of the rank alongside the schedule, not before it, so a rank
    // waiting on the network absorbs it and a CPU-bound one pays it in full.
    Op touch;
    touch.kind = OpKind::kTouch;
    touch.job = p.job;
    touch.bytes = temporary;
    temporaryBytesOfJob[p.job] += temporary;
    sinks.push_back(addOp(touch, preds));
  }
  return sinks;
}

Op RankProgram::opOf(const Step& s, std::size_t es, const Placement& p, std::uint8_t comm) const {
  Op op;
  op.job = p.job;
  // A wire-format send/recv moves its 16-bit message through its scratch
  // staging area (core/wire.h); the simulator moves those bytes (the
  // conversions themselves are local passes it does not time).
  const bool staged = s.wire != WireFormat::kOff && (s.kind == StepKind::kSend || s.kind == StepKind::kRecv);
  const BufRef dst = placed(staged && s.kind == StepKind::kRecv ? s.src2 : s.dst, p.send, p.recv, p.scratchBase);
  const BufRef src = placed(staged && s.kind == StepKind::kSend ? s.src2 : s.src, p.send, p.recv, p.scratchBase);
  const BufRef src2 = placed(s.src2, p.send, p.recv, p.scratchBase);
  op.dstBuf = dst.buffer;
  op.dstOff = dst.offsetBytes;
  op.srcBuf = src.buffer;
  op.srcOff = src.offsetBytes;
  op.src2Buf = src2.buffer;
  op.src2Off = src2.offsetBytes;
  op.bytes = s.bytes;
  op.divisor = s.divisor;
  switch (s.kind) {
    case StepKind::kSend: op.kind = OpKind::kSend; break;
    case StepKind::kRecv: op.kind = OpKind::kRecv; break;
    case StepKind::kReduce: op.kind = OpKind::kReduce; op.bytes = s.count * es; break;
    case StepKind::kCopy: op.kind = OpKind::kCopy; break;
    case StepKind::kDivide: op.kind = OpKind::kDivide; op.bytes = s.count * es; break;
    default: break;
  }
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    op.peer = p.place->worldPeer(comm, s.peer);
    BC_INTERNAL(s.tag >= 0 && s.tag < (1 << kTagBits), "simulator: tag " << s.tag << " out of range");
    op.channel = channelOf(p.job, comm, p.expansion, s.tag);
  }
  return op;
}

std::uint32_t RankProgram::addOp(const Op& op, const std::vector<std::uint32_t>& preds) {
  const auto id = static_cast<std::uint32_t>(ops.size());
  ops.push_back(op);
  pending.push_back(static_cast<std::uint32_t>(preds.size()));
  for (std::uint32_t pred : preds) edges_.emplace_back(pred, id);
  return id;
}

// Composed schedules make every first step of a phase wait for all sinks of
// the previous phase (Frame::after, listed first), and a ring's sinks are one
// per segment: a hierarchical allreduce on 128 nodes has ~17 dependencies per
// step, 60,000 edges per rank. Making such steps depend on one join op of the
// shared set (plus the step's own last dependency, which builders add after
// the frame's) keeps the edges near two per step and the event loop linear.
void RankProgram::joinLarge(std::vector<std::uint32_t>& preds, std::uint32_t job) {
  constexpr std::size_t kJoinAbove = 4;
  if (preds.size() <= kJoinAbove) return;
  auto joinOf = [&](std::vector<std::uint32_t> set) {
    auto [it, fresh] = joins_.try_emplace(std::move(set), 0);
    if (fresh) {
      Op join;
      join.kind = OpKind::kJoin;
      join.job = job;
      it->second = addOp(join, it->first);
    }
    return it->second;
  };
  if (auto it = joins_.find(preds); it != joins_.end()) {
    preds.assign(1, it->second);
    return;
  }
  const std::uint32_t last = preds.back();
  preds.pop_back();
  preds = {joinOf(preds), last};
}

void RankProgram::finish() {
  joins_.clear();
  // Duplicate edges (a step depending on two steps of one expansion's sinks
  // twice) are harmless: the predecessor count includes them too.
  std::vector<std::uint32_t> degree(ops.size() + 1, 0);
  for (const auto& [from, to] : edges_) ++degree[from];
  std::uint32_t offset = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ops[i].succBegin = offset;
    offset += degree[i];
    degree[i] = ops[i].succBegin;
  }
  succ.assign(offset, 0);
  for (const auto& [from, to] : edges_) succ[degree[from]++] = to;
  for (Op& op : ops) op.succCount = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) ops[i].succCount = degree[i] - ops[i].succBegin;
  edges_.clear();
  edges_.shrink_to_fit();
}

}  // namespace boostcomm::simulate
