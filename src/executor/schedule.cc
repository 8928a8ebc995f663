#include "executor/schedule.h"

#include <sstream>

#include "core/check.h"
#include "core/wire.h"

namespace boostcomm::executor {

Schedule::Schedule(Collective coll, DataType dtype, ReduceOp op, std::string algorithm)
    : collective_(coll), dtype_(dtype), op_(op), algorithm_(std::move(algorithm)) {}

std::size_t Schedule::elementSize() const { return dataTypeSize(dtype_); }

Schedule::StepId Schedule::add(Step step, std::initializer_list<StepId> deps) {
  if (wire_ != WireFormat::kOff && (step.kind == StepKind::kSend || step.kind == StepKind::kRecv)) {
    BC_INTERNAL(step.bytes % 4 == 0, algorithm_ << ": wire step of " << step.bytes << " bytes (not float32 elements)");
    step.wire = wire_;
    step.count = step.bytes / 4;
    step.bytes = core::wireBytes(wire_, step.count);
    step.src2 = BufRef{BufferId::kScratch, reserveScratch(step.bytes)};
  }
  step.depBegin = static_cast<std::uint32_t>(deps_.size());
  step.depCount = static_cast<std::uint32_t>(deps.size());
  for (StepId d : deps) deps_.push_back(d);
  if (framed_) {
    auto redirect = [this](BufRef& ref) {
      const BufRef& base = ref.buffer == BufferId::kSend ? frame_.send
                           : ref.buffer == BufferId::kRecv ? frame_.recv
                                                           : ref;
      if (&base != &ref) ref = BufRef{base.buffer, base.offsetBytes + ref.offsetBytes};
    };
    redirect(step.dst);
    redirect(step.src);
    redirect(step.src2);
    step.comm = frame_.comm;
    step.tag += frame_.tagOffset;
    if (deps.size() == 0) {
      for (StepId d : frame_.after) deps_.push_back(d);
      step.depCount = static_cast<std::uint32_t>(frame_.after.size());
    }
  }
  if (step.comm != kWorldComm || step.kind == StepKind::kShm) worldMessagesOnly_ = false;
  if (step.kind != StepKind::kNative && step.kind != StepKind::kDivide) nativeOnly_ = false;
  steps_.push_back(step);
  const auto id = static_cast<StepId>(steps_.size() - 1);
  for (std::uint32_t d = 0; d < steps_[id].depCount; ++d) linkRoundToSend(id, deps_[steps_[id].depBegin + d]);
  return id;
}

void Schedule::linkRoundToSend(StepId send, StepId dep) {
  Step& s = steps_[send];
  Step& round = steps_[dep];
  if (s.kind != StepKind::kSend || s.wire == WireFormat::kOff || s.staged) return;
  if (round.kind != StepKind::kRound || round.wire != s.wire || round.count != s.count) return;
  if (round.dst.buffer != s.src.buffer || round.dst.offsetBytes != s.src.offsetBytes) return;
  // The chunk is final once rounded, so every send of it can share one message.
  if (!round.staged) {
    round.src2 = s.src2;
    round.staged = true;
  }
  s.src2 = round.src2;
  s.staged = true;
}

void Schedule::setWire(WireFormat wire) {
  BC_INTERNAL(wire != WireFormat::kAuto, algorithm_ << ": a schedule's wire format is resolved (not auto)");
  BC_INTERNAL(wire == WireFormat::kOff || dtype_ == DataType::kFloat32,
              algorithm_ << ": wire format " << boostcomm::toString(wire) << " on " << boostcomm::toString(dtype_) << " data");
  wire_ = wire;
}

Schedule::StepId Schedule::wireRound(BufRef dst, std::size_t count, StepId after) {
  if (wire_ == WireFormat::kOff) return after;
  Step s;
  s.kind = StepKind::kRound;
  s.dst = dst;
  s.count = count;
  s.wire = wire_;
  const StepId id = add(s, {after});
  // bf16 rounds each element alone, so the fused reduce that made these
  // elements can round them as it goes (fp16's scale needs the whole chunk first).
  Step& reduce = steps_[after];
  Step& round = steps_[id];
  if (wire_ == WireFormat::kBf16 && reduce.kind == StepKind::kReduce && reduce.fused && reduce.count == count &&
      reduce.roundStep == kNoStep && reduce.dst.buffer == round.dst.buffer &&
      reduce.dst.offsetBytes == round.dst.offsetBytes) {
    reduce.roundStep = id;
    round.fused = true;
  }
  return id;
}

void Schedule::addDependency(StepId dep) {
  BC_INTERNAL(!steps_.empty(), "addDependency on an empty schedule");
  Step& last = steps_.back();
  BC_INTERNAL(last.depBegin + last.depCount == deps_.size(), "dependencies of the last step are not contiguous");
  deps_.push_back(dep);
  ++last.depCount;
  linkRoundToSend(static_cast<StepId>(steps_.size() - 1), dep);
}

void Schedule::addDependencies(const std::vector<StepId>& deps) {
  for (StepId d : deps) addDependency(d);
}

Schedule::StepId Schedule::send(BufRef src, std::size_t bytes, int peer, int tag, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kSend;
  s.src = src;
  s.bytes = bytes;
  s.peer = peer;
  s.tag = tag;
  return add(s, deps);
}

Schedule::StepId Schedule::recv(BufRef dst, std::size_t bytes, int peer, int tag, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kRecv;
  s.dst = dst;
  s.bytes = bytes;
  s.peer = peer;
  s.tag = tag;
  return add(s, deps);
}

Schedule::StepId Schedule::reduce(BufRef dst, BufRef a, BufRef b, std::size_t count,
                                  std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kReduce;
  s.dst = dst;
  s.src = a;
  s.src2 = b;
  s.count = count;
  return add(s, deps);
}

Schedule::StepId Schedule::reduceReceived(BufRef dst, BufRef a, BufRef received, std::size_t count, StepId recv) {
  Step& r = steps_[recv];
  BC_INTERNAL(r.kind == StepKind::kRecv, algorithm_ << ": reduceReceived after step " << recv << ", not a receive");
  if (r.wire == WireFormat::kOff || r.count != count) return reduce(dst, a, received, count, {recv});
  r.fused = true;
  Step s;
  s.kind = StepKind::kReduce;
  s.dst = dst;
  s.src = a;
  s.src2 = r.src2;  // the message, in the receive's staging area
  s.count = count;
  s.wire = r.wire;
  s.fused = true;
  return add(s, {recv});
}

Schedule::StepId Schedule::copy(BufRef dst, BufRef src, std::size_t bytes, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kCopy;
  s.dst = dst;
  s.src = src;
  s.bytes = bytes;
  return add(s, deps);
}

Schedule::StepId Schedule::divide(BufRef dst, std::size_t count, int divisor, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kDivide;
  s.dst = dst;
  s.count = count;
  s.divisor = divisor;
  return add(s, deps);
}

Schedule::StepId Schedule::native(const NativeCall& call, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kNative;
  s.native = call;
  s.src = BufRef{BufferId::kSend, 0};
  s.dst = BufRef{BufferId::kRecv, 0};
  return chainAfterPrevious(add(s, deps));
}

Schedule::StepId Schedule::shm(const NativeCall& call, int avgDivisor, std::initializer_list<StepId> deps) {
  Step s;
  s.kind = StepKind::kShm;
  s.native = call;
  s.divisor = avgDivisor;
  s.src = BufRef{BufferId::kSend, 0};
  s.dst = BufRef{BufferId::kRecv, 0};
  return chainAfterPrevious(add(s, deps));
}

Schedule::StepId Schedule::chainAfterPrevious(StepId id) {
  // Backend and shared-memory collectives on one communicator must be issued
  // in the same order on every rank (MPI's rule; the shm engine runs them in
  // start order). Steps of a schedule start in whatever order their inputs
  // arrive, which differs between ranks, so such a step also waits for the
  // previous one of its kind on its communicator: every rank builds the same chain.
  Step& step = steps_[id];
  step.issueIndex = issueCount_[issueLane(step.kind)][step.comm]++;
  for (StepId prev = id; prev-- > 0;) {
    if (steps_[prev].kind == step.kind && steps_[prev].comm == step.comm) {
      addDependency(prev);
      break;
    }
  }
  return id;
}

void Schedule::pushFrame(Frame frame) {
  BC_INTERNAL(!framed_, algorithm_ << ": frames do not nest");
  frame_ = std::move(frame);
  framed_ = true;
}

void Schedule::popFrame() {
  framed_ = false;
  frame_ = Frame{};
}

std::vector<Schedule::StepId> Schedule::sinks(StepId begin, StepId end) const {
  std::vector<bool> needed(end - begin, false);
  for (StepId i = begin; i < end; ++i) {
    const Step& s = steps_[i];
    for (std::uint32_t d = 0; d < s.depCount; ++d) {
      const StepId dep = deps_[s.depBegin + d];
      if (dep >= begin && dep < end) needed[dep - begin] = true;
    }
  }
  std::vector<StepId> out;
  for (StepId i = begin; i < end; ++i) {
    if (!needed[i - begin]) out.push_back(i);
  }
  return out;
}

std::size_t Schedule::reserveScratch(std::size_t bytes) {
  // Keep every reservation 64-byte aligned so vector kernels start on a cache line.
  const std::size_t offset = (scratchBytes_ + 63) & ~std::size_t{63};
  scratchBytes_ = offset + bytes;
  return offset;
}

void Schedule::validate(int worldSize, int tagSpan) const {
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    for (std::uint32_t d = 0; d < s.depCount; ++d) {
      BC_INTERNAL(deps_[s.depBegin + d] < i, algorithm_ << ": step " << i << " depends on later step "
                                                        << deps_[s.depBegin + d]);
    }
    if (s.kind == StepKind::kSend || s.kind == StepKind::kRecv) {
      BC_INTERNAL(s.peer >= 0 && s.peer < worldSize, algorithm_ << ": step " << i << " peer " << s.peer);
      BC_INTERNAL(s.tag >= 0 && s.tag < tagSpan,
                  algorithm_ << ": step " << i << " tag " << s.tag << " outside the call's " << tagSpan << " tags");
    }
  }
}

namespace {
const char* bufferName(BufferId b) {
  switch (b) {
    case BufferId::kSend: return "send";
    case BufferId::kRecv: return "recv";
    case BufferId::kScratch: return "scratch";
  }
  return "?";
}
std::ostream& operator<<(std::ostream& os, BufRef r) { return os << bufferName(r.buffer) << "+" << r.offsetBytes; }
}  // namespace

std::string Schedule::toString() const {
  std::ostringstream os;
  os << algorithm_ << " (" << steps_.size() << " steps, scratch " << scratchBytes_ << " B)\n";
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    os << "  " << i << ": ";
    switch (s.kind) {
      case StepKind::kSend: os << "send " << s.src << " " << s.bytes << "B -> " << s.peer << " tag " << s.tag; break;
      case StepKind::kRecv: os << "recv " << s.dst << " " << s.bytes << "B <- " << s.peer << " tag " << s.tag; break;
      case StepKind::kReduce: os << "reduce " << s.dst << " = " << s.src << " op " << s.src2 << " x" << s.count; break;
      case StepKind::kCopy: os << "copy " << s.dst << " = " << s.src << " " << s.bytes << "B"; break;
      case StepKind::kDivide: os << "divide " << s.dst << " /" << s.divisor << " x" << s.count; break;
      case StepKind::kNative: os << "native " << boostcomm::toString(s.native.collective) << " x" << s.native.count; break;
      case StepKind::kShm: os << "shm " << boostcomm::toString(s.native.collective) << " x" << s.native.count; break;
      case StepKind::kRound: os << "round " << s.dst << " x" << s.count; break;
    }
    if (s.wire != WireFormat::kOff) os << " [" << boostcomm::toString(s.wire) << (s.fused ? ", fused" : "") << "]";
    if (s.comm != kWorldComm) os << (s.comm == kIntraComm ? " [intra]" : " [inter]");
    if (s.depCount > 0) {
      os << " after";
      for (std::uint32_t d = 0; d < s.depCount; ++d) os << " " << deps_[s.depBegin + d];
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace boostcomm::executor
