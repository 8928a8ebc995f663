// CollectiveFusion (include/boostcomm/collective_fusion.h).
//
// Packed layouts (the planner's "unit" is what one rank contributes per slot;
// member i of a group sits at offsets[i] inside every unit, U = unitCount):
//   allreduce      one unit, reduced in place;
//   broadcast      one unit, packed on the root, unpacked elsewhere;
//   allgather      send: one unit; recv: worldSize units, rank-major, so
//                  request i's block from rank j is at j*U + offsets[i];
//   reduce-scatter send: worldSize units, block-major (block j of every
//                  member, then block j+1 ...); recv: one unit.
// Launch order is the plan's order on every rank (collectives must be called
// in the same order everywhere); a group first waits for the groups it
// depends on, so independent groups overlap and dependent ones never do.
#include "boostcomm/collective_fusion.h"

#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include "api/agreement.h"
#include "core/check.h"
#include "core/hash.h"
#include "fusion/copy_pieces.h"
#include "planner/fusion_plan.h"

namespace boostcomm {
namespace detail {

class CollectiveFusionImpl {
 public:
  CollectiveFusionImpl(Communicator& comm, CollectiveFusionOptions options) : comm_(comm), options_(options) {}
  ~CollectiveFusionImpl();

  std::size_t add(planner::RequestInfo info, ConstView send, View recv, std::string error);
  void dependsOn(std::size_t later, std::size_t earlier);
  void execute();
  std::string describe();
  CollectiveFusionStats stats();
  void clear();

 private:
  struct Request {
    planner::RequestInfo info;
    ConstView send;
    View recv;
    std::string error;  // local registration error, reported at execute on every rank
  };
  // Packed buffers live in registered memory (allocateBuffer): on one node
  // the shm algorithm then reads and writes them in place, so packing
  // replaces its copy into the staging ring instead of adding to it.
  struct GroupState {
    std::span<std::byte> sendBuffer;  // packed input (allgather, reduce-scatter)
    std::span<std::byte> recvBuffer;  // packed result (and input, for allreduce and broadcast)
    Work work;
    bool unpacked = true;
  };

  // Plans if needed; returns the local error ("" on success).
  std::string planLocally();
  void allocateBuffers();
  void releaseBuffers();
  void pack(std::size_t g);
  void launch(std::size_t g);
  void finish(std::size_t g);
  std::size_t es(std::size_t g) const { return dataTypeSize(plan_->groups[g].dtype); }
  bool direct(std::size_t g) const { return plan_->groups[g].requests.size() == 1; }

  Communicator& comm_;
  CollectiveFusionOptions options_;
  std::vector<Request> requests_;
  std::vector<planner::Dependency> dependencies_;
  std::optional<planner::FusionPlan> plan_;
  std::string planError_;
  bool agreed_ = false;
  std::vector<GroupState> groups_;
  Progress progress_ = [this] {
    for (GroupState& s : groups_)
      if (!s.unpacked && s.work.valid() && !s.work.test()) return;  // one pending test() progresses all
  };
};

std::size_t CollectiveFusionImpl::add(planner::RequestInfo info, ConstView send, View recv, std::string error) {
  info.sendAddress = reinterpret_cast<std::uintptr_t>(send.data);
  info.recvAddress = reinterpret_cast<std::uintptr_t>(recv.data);
  const std::size_t id = requests_.size();
  if (error.empty() && send.dtype != recv.dtype)
    error = "request " + std::to_string(id) + ": send dtype " + std::string(toString(send.dtype)) +
            " differs from recv dtype " + std::string(toString(recv.dtype));
  if (error.empty() && ((send.data == nullptr && send.count > 0) || (recv.data == nullptr && recv.count > 0)))
    error = "request " + std::to_string(id) + ": null buffer with a non-zero count";
  requests_.push_back({info, send, recv, std::move(error)});
  plan_.reset();
  return id;
}

void CollectiveFusionImpl::dependsOn(std::size_t later, std::size_t earlier) {
  dependencies_.push_back({earlier, later});
  plan_.reset();
}

CollectiveFusionImpl::~CollectiveFusionImpl() {
  try {
    releaseBuffers();  // execute() always completes its groups, so none is in flight
  } catch (...) {
    // A destructor must not throw; the communicator reports the failure on its next call.
  }
}

void CollectiveFusionImpl::allocateBuffers() {
  // Collective (allocateBuffer): called right after the agreement, so every
  // rank holds the same plan and asks for the same sizes in the same order.
  groups_.assign(plan_->groups.size(), GroupState{});
  const std::size_t world = static_cast<std::size_t>(comm_.size());
  const auto allocate = [this](std::size_t bytes) {
    return std::span<std::byte>(bytes ? static_cast<std::byte*>(comm_.allocateBuffer(bytes)) : nullptr, bytes);
  };
  for (std::size_t g = 0; g < plan_->groups.size(); ++g) {
    if (direct(g)) continue;
    const planner::FusionGroup& group = plan_->groups[g];
    const std::size_t unitBytes = group.unitCount * es(g);
    const bool gather = group.kind == Collective::kAllgather;
    const bool scatter = group.kind == Collective::kReduceScatter;
    groups_[g].sendBuffer = allocate(gather ? unitBytes : scatter ? unitBytes * world : 0);
    groups_[g].recvBuffer = allocate(gather ? unitBytes * world : unitBytes);
  }
}

void CollectiveFusionImpl::releaseBuffers() {
  for (GroupState& s : groups_) {
    if (!s.sendBuffer.empty()) comm_.freeBuffer(s.sendBuffer.data());
    if (!s.recvBuffer.empty()) comm_.freeBuffer(s.recvBuffer.data());
  }
  groups_.clear();
}

void CollectiveFusionImpl::clear() {
  requests_.clear();
  dependencies_.clear();
  plan_.reset();
}

std::string CollectiveFusionImpl::planLocally() {
  if (plan_) return planError_;
  agreed_ = false;
  planError_.clear();
  std::vector<planner::RequestInfo> infos;
  for (const Request& r : requests_) {
    if (planError_.empty() && !r.error.empty()) planError_ = r.error;
    infos.push_back(r.info);
  }
  planner::FusionOptions fusionOptions;
  fusionOptions.fuse = options_.fuse;
  fusionOptions.maxGroupBytes = options_.maxGroupBytes;
  try {
    if (!planError_.empty()) throw std::runtime_error(planError_);
    plan_ = planner::planFusion(infos, dependencies_, comm_.size(), fusionOptions, comm_.rank());
  } catch (const Error& e) {
    planError_ = e.detail();
    plan_ = planner::FusionPlan{};
  } catch (const std::exception& e) {
    planError_ = e.what();
    plan_ = planner::FusionPlan{};
  }
  return planError_;
}

void CollectiveFusionImpl::pack(std::size_t g) {
  const planner::FusionGroup& group = plan_->groups[g];
  GroupState& s = groups_[g];
  const std::size_t e = es(g);
  const std::size_t world = static_cast<std::size_t>(comm_.size());
  const std::size_t unitBytes = group.unitCount * e;
  for (std::size_t m = 0; m < group.requests.size(); ++m) {
    const Request& r = requests_[group.requests[m]];
    const std::size_t unit = planner::unitCountOf(r.info, comm_.size()) * e;
    const std::size_t offset = group.offsets[m] * e;
    switch (group.kind) {
      case Collective::kAllreduce:
        copyWithProgress(s.recvBuffer.data() + offset, r.send.data, unit, progress_);
        break;
      case Collective::kBroadcast:
        if (comm_.rank() == group.root) copyWithProgress(s.recvBuffer.data() + offset, r.recv.data, unit, progress_);
        break;
      case Collective::kAllgather:
        copyWithProgress(s.sendBuffer.data() + offset, r.send.data, unit, progress_);
        break;
      case Collective::kReduceScatter:  // block j of member m -> unit j at offset
        copyBlocks(s.sendBuffer.data() + offset, unitBytes, r.send.data, unit, world, unit, progress_);
        break;
      default: break;
    }
  }
}

void CollectiveFusionImpl::launch(std::size_t g) {
  const planner::FusionGroup& group = plan_->groups[g];
  GroupState& s = groups_[g];
  const CallOptions& call = options_.call;
  s.unpacked = false;
  if (direct(g)) {
    const Request& r = requests_[group.requests[0]];
    const std::size_t result = planner::resultCount(r.info, comm_.size());
    const View recv(r.recv.data, result, r.recv.dtype);
    switch (group.kind) {
      case Collective::kAllreduce: s.work = comm_.allreduceAsync(r.send, recv, group.op, call); break;
      case Collective::kBroadcast: s.work = comm_.broadcastAsync(recv, group.root, call); break;
      case Collective::kAllgather: s.work = comm_.allgatherAsync(r.send, recv, call); break;
      case Collective::kReduceScatter: s.work = comm_.reduceScatterAsync(r.send, recv, group.op, call); break;
      default: break;
    }
    return;
  }
  pack(g);
  const View packed(s.recvBuffer.data(), s.recvBuffer.size() / es(g), group.dtype);
  const ConstView input(s.sendBuffer.data(), s.sendBuffer.size() / es(g), group.dtype);
  switch (group.kind) {
    case Collective::kAllreduce: s.work = comm_.allreduceAsync(packed, packed, group.op, call); break;
    case Collective::kBroadcast: s.work = comm_.broadcastAsync(packed, group.root, call); break;
    case Collective::kAllgather: s.work = comm_.allgatherAsync(input, packed, call); break;
    case Collective::kReduceScatter: s.work = comm_.reduceScatterAsync(input, packed, group.op, call); break;
    default: break;
  }
}

void CollectiveFusionImpl::finish(std::size_t g) {
  GroupState& s = groups_[g];
  if (s.unpacked) return;
  s.work.wait(options_.call.timeout);
  s.unpacked = true;
  if (direct(g)) return;
  const planner::FusionGroup& group = plan_->groups[g];
  if (group.kind == Collective::kBroadcast && comm_.rank() == group.root) return;
  const std::size_t e = es(g);
  const std::size_t world = static_cast<std::size_t>(comm_.size());
  const std::size_t unitBytes = group.unitCount * e;
  for (std::size_t m = 0; m < group.requests.size(); ++m) {
    const Request& r = requests_[group.requests[m]];
    const std::size_t unit = planner::unitCountOf(r.info, comm_.size()) * e;
    const std::byte* from = s.recvBuffer.data() + group.offsets[m] * e;
    if (group.kind == Collective::kAllgather)  // unit j of the result -> block j of member m
      copyBlocks(r.recv.data, unit, from, unitBytes, world, unit, progress_);
    else
      copyWithProgress(r.recv.data, from, unit, progress_);
  }
}

void CollectiveFusionImpl::execute() {
  const std::string error = planLocally();
  if (!agreed_) {
    std::vector<planner::RequestInfo> infos;
    for (const Request& r : requests_) infos.push_back(r.info);
    std::uint64_t signature = planner::requestListSignature(infos, dependencies_);
    signature = core::fnvWord(signature, (options_.fuse ? 1u : 0u) | options_.maxGroupBytes << 1);
    agreeAcrossRanks(comm_, signature, error, "CollectiveFusion");
    agreed_ = true;
    // Packed buffers are allocated once per plan and reused by every execute.
    releaseBuffers();
    allocateBuffers();
  }
  try {
    for (std::size_t g = 0; g < plan_->groups.size(); ++g) {
      for (std::size_t d : plan_->groups[g].dependsOn) finish(d);
      launch(g);
    }
    for (std::size_t g = 0; g < plan_->groups.size(); ++g) finish(g);
  } catch (...) {
    for (GroupState& s : groups_) s.unpacked = true;
    throw;
  }
}

std::string CollectiveFusionImpl::describe() {
  const std::string error = planLocally();
  if (!error.empty()) return "fusion plan: invalid: " + error + "\n";
  std::vector<planner::RequestInfo> infos;
  for (const Request& r : requests_) infos.push_back(r.info);
  return planner::describeFusionPlan(*plan_, infos);
}

CollectiveFusionStats CollectiveFusionImpl::stats() {
  CollectiveFusionStats st;
  st.requests = requests_.size();
  if (!planLocally().empty()) return st;
  st.launchesBefore = plan_->launchesBefore;
  st.launchesAfter = plan_->launchesAfter;
  for (std::size_t g = 0; g < plan_->groups.size(); ++g) {
    if (plan_->groups[g].requests.size() == 1) continue;
    const std::size_t unitBytes = plan_->groups[g].unitCount * es(g);
    const std::size_t world = static_cast<std::size_t>(comm_.size());
    const Collective kind = plan_->groups[g].kind;
    st.packedBytes += kind == Collective::kAllgather || kind == Collective::kReduceScatter ? unitBytes * (world + 1)
                                                                                           : 2 * unitBytes;
  }
  return st;
}

}  // namespace detail

namespace {
planner::RequestInfo info(Collective kind, DataType dtype, ReduceOp op, int root, std::size_t sendCount,
                          std::size_t recvCapacity) {
  planner::RequestInfo r;
  r.kind = kind;
  r.dtype = dtype;
  r.op = op;
  r.root = root;
  r.sendCount = sendCount;
  r.recvCapacity = recvCapacity;
  return r;
}
}  // namespace

CollectiveFusion::CollectiveFusion(Communicator& comm, CollectiveFusionOptions options)
    : impl_(std::make_unique<detail::CollectiveFusionImpl>(comm, std::move(options))) {}
CollectiveFusion::~CollectiveFusion() = default;

CollectiveFusion::RequestId CollectiveFusion::allreduce(ConstView send, View recv, ReduceOp op) {
  return impl_->add(info(Collective::kAllreduce, recv.dtype, op, 0, send.count, recv.count), send, recv, "");
}
CollectiveFusion::RequestId CollectiveFusion::allgather(ConstView send, View recv) {
  return impl_->add(info(Collective::kAllgather, recv.dtype, ReduceOp::kSum, 0, send.count, recv.count), send, recv,
                    "");
}
CollectiveFusion::RequestId CollectiveFusion::broadcast(View buffer, int root) {
  return impl_->add(info(Collective::kBroadcast, buffer.dtype, ReduceOp::kSum, root, buffer.count, buffer.count),
                    buffer, buffer, "");
}
CollectiveFusion::RequestId CollectiveFusion::reduceScatter(ConstView send, View recv, ReduceOp op) {
  return impl_->add(info(Collective::kReduceScatter, recv.dtype, op, 0, send.count, recv.count), send, recv, "");
}
void CollectiveFusion::dependsOn(RequestId later, RequestId earlier) { impl_->dependsOn(later, earlier); }
void CollectiveFusion::execute() { impl_->execute(); }
std::string CollectiveFusion::describePlan() { return impl_->describe(); }
CollectiveFusionStats CollectiveFusion::stats() { return impl_->stats(); }
void CollectiveFusion::clear() { impl_->clear(); }

}  // namespace boostcomm
