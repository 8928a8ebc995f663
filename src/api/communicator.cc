#include "boostcomm/communicator.h"

#include "api/communicator_impl.h"
#include "core/check.h"
#include "shm/attach.h"
#include "transport/mpi/mpi_transport.h"

namespace boostcomm {

using detail::CallArgs;

std::shared_ptr<Communicator> Communicator::createMpiWorld() {
  std::unique_ptr<transport::MpiTransport> world = transport::MpiTransport::createWorld();
  shm::attachSharedMemory(*world);  // collective: every rank decides the same
  auto impl = std::make_unique<detail::CommunicatorImpl>(std::move(world), [] { transport::finalizeMpiIfOwned(); });
  return std::make_shared<Communicator>(std::move(impl));
}

Communicator::Communicator(std::unique_ptr<detail::CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank(); }
int Communicator::size() const { return impl_->size(); }

namespace {

CallArgs reduceArgs(Collective coll, ConstView send, View recv, ReduceOp op) {
  CallArgs a;
  a.collective = coll;
  a.send = send;
  a.recv = recv;
  a.op = op;
  return a;
}

CallArgs gatherArgs(ConstView send, View recv, std::span<const std::size_t> counts, bool varying) {
  CallArgs a;
  a.collective = Collective::kAllgather;
  a.send = send;
  a.recv = recv;
  a.recvCounts = counts;
  a.varying = varying;
  return a;
}

CallArgs broadcastArgs(View buffer, int root) {
  CallArgs a;
  a.collective = Collective::kBroadcast;
  a.send = buffer;
  a.recv = buffer;
  a.root = root;
  return a;
}

CallArgs barrierArgs() {
  CallArgs a;
  a.collective = Collective::kBarrier;
  return a;
}

}  // namespace

void Communicator::allreduce(ConstView send, View recv, ReduceOp op, const CallOptions& o) {
  impl_->run(reduceArgs(Collective::kAllreduce, send, recv, op), o);
}
Work Communicator::allreduceAsync(ConstView send, View recv, ReduceOp op, const CallOptions& o) {
  return impl_->submit(reduceArgs(Collective::kAllreduce, send, recv, op), o);
}
void Communicator::allgather(ConstView send, View recv, const CallOptions& o) {
  impl_->run(gatherArgs(send, recv, {}, false), o);
}
Work Communicator::allgatherAsync(ConstView send, View recv, const CallOptions& o) {
  return impl_->submit(gatherArgs(send, recv, {}, false), o);
}
void Communicator::allgatherv(ConstView send, View recv, std::span<const std::size_t> counts, const CallOptions& o) {
  impl_->run(gatherArgs(send, recv, counts, true), o);
}
Work Communicator::allgathervAsync(ConstView send, View recv, std::span<const std::size_t> counts,
                                   const CallOptions& o) {
  return impl_->submit(gatherArgs(send, recv, counts, true), o);
}
void Communicator::broadcast(View buffer, int root, const CallOptions& o) {
  impl_->run(broadcastArgs(buffer, root), o);
}
Work Communicator::broadcastAsync(View buffer, int root, const CallOptions& o) {
  return impl_->submit(broadcastArgs(buffer, root), o);
}
void Communicator::reduceScatter(ConstView send, View recv, ReduceOp op, const CallOptions& o) {
  impl_->run(reduceArgs(Collective::kReduceScatter, send, recv, op), o);
}
Work Communicator::reduceScatterAsync(ConstView send, View recv, ReduceOp op, const CallOptions& o) {
  return impl_->submit(reduceArgs(Collective::kReduceScatter, send, recv, op), o);
}
void Communicator::barrier(const CallOptions& o) { impl_->run(barrierArgs(), o); }
Work Communicator::barrierAsync(const CallOptions& o) { return impl_->submit(barrierArgs(), o); }

std::vector<std::string> Communicator::algorithms(Collective coll) const { return impl_->algorithms(coll); }
std::string Communicator::selectedAlgorithm(Collective coll, std::size_t bytes) const {
  return impl_->selectedAlgorithm(coll, bytes);
}
void Communicator::configureCommStrategy(const CommStrategy& strategy) { impl_->configureStrategy(strategy); }

void Communicator::setTimeout(std::optional<std::chrono::milliseconds> timeout) { impl_->setTimeout(timeout); }

void Communicator::abort() { impl_->abort(); }

void Communicator::reportRejectedCall(Collective collective) { impl_->reportRejectedCall(collective); }

void Communicator::enablePointToPoint() { impl_->enablePointToPoint(); }
Work Communicator::sendAsync(ConstView buffer, int peer, int tag) {
  return impl_->postMessage(true, const_cast<void*>(buffer.data), buffer.count, buffer.dtype, peer, tag);
}
Work Communicator::recvAsync(View buffer, int peer, int tag) {
  return impl_->postMessage(false, buffer.data, buffer.count, buffer.dtype, peer, tag);
}

std::string Communicator::flightRecord() const { return impl_->flightRecord(); }
void Communicator::setWireFormat(WireFormat wire) { impl_->setWireFormat(wire); }
WireFormat Communicator::wireFormat() const { return impl_->wireFormat(); }
WireFormat Communicator::wireFormatOf(std::size_t bytes, DataType dtype, const CallOptions& options) const {
  return impl_->wireFormatOf(bytes, dtype, options);
}
std::string Communicator::nodeLayout() const { return impl_->layout().describe(); }

std::optional<Strategy> parseStrategy(std::string_view name) {
  if (name == "flat") return Strategy::kFlat;
  if (name == "topology_aware" || name == "topology-aware") return Strategy::kTopologyAware;
  if (name == "auto") return Strategy::kAuto;
  return std::nullopt;
}

std::optional<ProgressMode> parseProgressMode(std::string_view name) {
  if (name == "auto") return ProgressMode::kAuto;
  if (name == "caller") return ProgressMode::kCaller;
  if (name == "thread") return ProgressMode::kThread;
  return std::nullopt;
}

void Communicator::setProgressThread(bool on) { impl_->setProgressThread(on); }
bool Communicator::progressThread() const { return impl_->progressThread(); }
void Communicator::useProgressThread() { impl_->useProgressThread(); }
void Communicator::progress() { impl_->progressOnce(); }

void* Communicator::allocateBuffer(std::size_t bytes) { return impl_->allocateBuffer(bytes); }
std::shared_ptr<void> Communicator::allocateOwnedBuffer(std::size_t bytes) { return impl_->allocateOwnedBuffer(bytes); }
void Communicator::freeBuffer(void* buffer) { impl_->freeBuffer(buffer); }
void Communicator::finalize() { impl_->finalize(); }
bool Communicator::finalized() const { return impl_->finalized(); }
bool Communicator::hasSharedMemory() const { return impl_->hasSharedMemory(); }

// --- Work ---

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

bool Work::test() {
  BC_CHECK(state_ != nullptr, ErrorCategory::kInvalidArgument, -1, "Work::test on an empty Work");
  if (state_->isDone()) {
    if (state_->error()) std::rethrow_exception(state_->error());
    return true;
  }
  return state_->comm->test(*state_);
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  BC_CHECK(state_ != nullptr, ErrorCategory::kInvalidArgument, -1, "Work::wait on an empty Work");
  if (state_->isDone()) {
    if (state_->error()) std::rethrow_exception(state_->error());
    return;
  }
  state_->comm->wait(*state_, timeout);
}

void Work::onComplete(std::function<void(std::exception_ptr)> callback) {
  BC_CHECK(state_ != nullptr, ErrorCategory::kInvalidArgument, -1, "Work::onComplete on an empty Work");
  BC_CHECK(callback != nullptr, ErrorCategory::kInvalidArgument, -1, "Work::onComplete: callback is empty");
  state_->comm->onComplete(*state_, std::move(callback));
}

const char* Work::algorithm() const { return state_ ? state_->algorithm : ""; }
int Work::source() const { return state_ && state_->isDone() ? state_->source : -1; }
WireFormat Work::wireFormat() const { return state_ ? state_->wire : WireFormat::kOff; }

}  // namespace boostcomm
