#include "executor/executor.h"

#include <cstring>

#include "core/check.h"
#include "core/reduce.h"
#include "transport/shared_memory.h"

namespace boostcomm::executor {

void Execution::start(const Schedule& schedule, const Binding& binding, int tagBase, bool blockingNative) {
  schedule_ = &schedule;
  binding_ = binding;
  tagBase_ = tagBase;
  blockingNative_ = blockingNative;
  const std::size_t n = schedule.steps().size();
  state_.assign(n, State::kPending);
  requests_.assign(n, transport::Request{});
  firstPending_ = 0;
  remaining_ = n;
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

transport::Transport& Execution::transportFor(const Step& step, transport::Transport& world) const {
  if (step.comm == kWorldComm) return world;
  transport::Transport* sub = binding_.subTransports[step.comm];
  BC_INTERNAL(sub != nullptr, schedule_->algorithm() << ": step on communicator " << int(step.comm)
                                                     << " but no such sub-communicator is bound");
  return *sub;
}

void Execution::runNative(const Step& step, transport::Transport& transport, transport::Request* req) {
  const NativeCall& call = step.native;
  const std::size_t offsetBytes = call.elementOffset * schedule_->elementSize();
  const char* send = static_cast<const char*>(resolve(step.src));
  char* recv = static_cast<char*>(resolve(step.dst));
  // kAvg is finished by a kDivide step of the schedule; the backend sums.
  const ReduceOp op = schedule_->op() == ReduceOp::kAvg ? ReduceOp::kSum : schedule_->op();
  switch (call.collective) {
    case Collective::kAllreduce:
      transport.nativeAllreduce(send + offsetBytes, recv + offsetBytes, call.count, schedule_->dtype(), op, req);
      break;
    case Collective::kAllgather:
      transport.nativeAllgatherv(send, call.count, recv, binding_.nativeCounts, binding_.nativeDispls,
                                 schedule_->dtype(), req);
      break;
    case Collective::kBroadcast:
      transport.nativeBroadcast(recv + offsetBytes, call.count, schedule_->dtype(), call.root, req);
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

void Execution::startShm(const Step& step, transport::Transport& transport, transport::Request& req) {
  transport::SharedMemoryCall call;
  call.collective = step.native.collective;
  call.send = resolve(step.src);
  call.recv = resolve(step.dst);
  call.count = step.native.count;
  if (call.collective == Collective::kAllgather) {
    call.counts = binding_.nativeCounts;
    call.displs = binding_.nativeDispls;
  }
  call.dtype = schedule_->dtype();
  call.op = schedule_->op();
  call.avgDivisor = step.divisor;
  call.root = step.native.root;
  engineOf(transport).start(call, req);
}

bool Execution::startStep(std::size_t index, transport::Transport& world) {
  const Step& s = schedule_->steps()[index];
  transport::Transport& transport = transportFor(s, world);
  transport::Request& req = requests_[index];
  switch (s.kind) {
    case StepKind::kSend:
      transport.isend(resolve(s.src), s.bytes, s.peer, tagBase_ + s.tag, req);
      return transport.test(req);
    case StepKind::kRecv:
      transport.irecv(resolve(s.dst), s.bytes, s.peer, tagBase_ + s.tag, req);
      return transport.test(req);
    case StepKind::kReduce:
      if (s.count > 0) core::reduce(resolve(s.dst), resolve(s.src), resolve(s.src2), s.count, schedule_->dtype(),
                                    schedule_->op());
      return true;
    case StepKind::kCopy: {
      void* dst = resolve(s.dst);
      const void* src = resolve(s.src);
      if (s.bytes > 0 && dst != src) std::memcpy(dst, src, s.bytes);
      return true;
    }
    case StepKind::kDivide:
      if (s.count > 0) core::divideBy(resolve(s.dst), s.count, schedule_->dtype(), s.divisor);
      return true;
    case StepKind::kNative:
      if (blockingNative_) {
        runNative(s, transport, nullptr);
        return true;
      }
      runNative(s, transport, &req);
      return transport.test(req);
    case StepKind::kShm:
      startShm(s, transport, req);
      return engineOf(transport).test(req);
  }
  return true;
}

bool Execution::progress(transport::Transport& transport, bool* anyAdvance) {
  const auto& steps = schedule_->steps();
  bool advanced = true;
  bool any = false;
  // Local steps finish at once and may unblock later ones: sweep until a pass
  // changes nothing. Steps are in dependency order, so one pass usually does it.
  while (advanced && remaining_ > 0) {
    advanced = false;
    for (std::size_t i = firstPending_; i < steps.size(); ++i) {
      State& st = state_[i];
      if (st == State::kDone) continue;
      bool finished = false;
      if (st == State::kRunning) {
        transport::Transport& t = transportFor(steps[i], transport);
        finished = steps[i].kind == StepKind::kShm ? engineOf(t).test(requests_[i]) : t.test(requests_[i]);
      } else if (ready(steps[i])) {
        st = State::kRunning;
        any = true;
        finished = startStep(i, transport);
      }
      if (finished) {
        st = State::kDone;
        --remaining_;
        advanced = true;
        any = true;
      }
    }
    while (firstPending_ < steps.size() && state_[firstPending_] == State::kDone) ++firstPending_;
  }
  if (anyAdvance != nullptr && any) *anyAdvance = true;
  return remaining_ == 0;
}

}  // namespace boostcomm::executor
