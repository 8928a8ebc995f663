#include "api/communicator_impl.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/tunables.h"
#include "shm/attach.h"
#include "topology/layout.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/shared_memory.h"

namespace boostcomm::detail {

namespace {
// Polls without progress before yielding the core: short enough to keep
// oversubscribed runs moving, long enough not to add latency when a message
// is a few microseconds away.
constexpr std::uint32_t kIdlePollsBeforeYield = 64;
}  // namespace

using algorithms::AlgorithmInfo;
using algorithms::CollectiveSpec;

std::size_t CommunicatorImpl::CacheKeyHash::operator()(const CacheKey& k) const {
  std::size_t h = std::hash<const void*>()(k.algorithm);
  auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::size_t>(k.collective));
  mix(static_cast<std::size_t>(k.dtype));
  mix(static_cast<std::size_t>(k.op));
  mix(static_cast<std::size_t>(k.root));
  mix(k.count);
  mix(k.countsHash);
  return h;
}

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<transport::Transport> transport, std::function<void()> onFinalize)
    : transport_(std::move(transport)), onFinalize_(std::move(onFinalize)) {
  rank_ = transport_->rank();
  size_ = transport_->size();
  // The shm algorithms exist only with an engine (every rank on one node);
  // the built-in table picks them only then.
  sharedMemory_ = transport_->sharedMemory() != nullptr;
  table_ = algorithms::SelectionTable::builtIn(sharedMemory_);
  table_.applyOverride(core::tunableValue(core::kTunableSelectionTable));
  algoOverride_ = algorithms::parseAlgoOverride(core::tunableValue(core::kTunableAlgo));
  defaultTimeout_ = std::chrono::milliseconds(core::tunableInt(core::kTunableTimeoutMs));
  chunkBytes_ = static_cast<std::size_t>(std::max<std::int64_t>(1, core::tunableInt(core::kTunableRingChunkBytes)));
  maxChunks_ = static_cast<int>(std::clamp<std::int64_t>(core::tunableInt(core::kTunableMaxChunksPerSegment), 1, 4096));
  cacheLimit_ = static_cast<std::size_t>(std::max<std::int64_t>(0, core::tunableInt(core::kTunableScheduleCacheSize)));
  checkConsistency_ = core::tunableInt(core::kTunableCheckConsistency) != 0;
  hierMinBytes_ = static_cast<std::size_t>(std::max<std::int64_t>(0, core::tunableInt(core::kTunableHierMinBytes)));
  CommStrategy strategy;
  const std::string strategyName = core::tunableValue(core::kTunableStrategy);
  BC_INVALID(parseStrategy(strategyName).has_value(), rank_,
             "BOOSTCOMM_STRATEGY='" << strategyName << "' is unknown (valid: flat, topology_aware, auto)");
  strategy.strategy = *parseStrategy(strategyName);
  strategy.interAlgorithm = core::tunableValue(core::kTunableHierInterAlgo);
  strategy.intraAlgorithm = core::tunableValue(core::kTunableHierIntraAlgo);
  configureStrategy(strategy);
  // Node layout: declared (tests, emulation) or detected (collective call).
  if (auto declared = topology::layoutOverrideFromEnv(size_, rank_)) {
    layout_ = algorithms::layoutFromSizes(declared->ranksPerNode);
  } else {
    layout_ = algorithms::layoutFromNodeIds(transport_->nodeIdOfEachRank());
  }
  // BOOSTCOMM_TUNING_CACHE is read at the first collective call: reading it
  // is collective, and in-process groups construct their ranks on one thread.
  tuningFromEnvPending_ = !core::tunableValue(core::kTunableTuningCache).empty();
  updateFastPath();
  // Every call gets its own tag window of kMaxStepTag tags, so messages of
  // concurrent calls can never match each other.
  tagWindow_ =
      std::max(1, static_cast<int>((static_cast<long long>(transport_->maxTag()) + 1) / executor::kMaxStepTag));
  inFlight_.reserve(64);
  retired_.reserve(64);
}

CommunicatorImpl::~CommunicatorImpl() {
  try {
    finalize();
  } catch (...) {
    // Destructors must not throw; finalize() errors were reported to waiters.
  }
}

void CommunicatorImpl::checkUsable() const {
  BC_CHECK(!finalized_, ErrorCategory::kFinalized, rank_, "communicator used after finalize()");
  if (failure_) {
    try {
      std::rethrow_exception(failure_);
    } catch (const Error& e) {
      core::raise(e.category(), rank_, "communicator unusable after an earlier failure: " + e.detail());
    }
  }
}

std::optional<std::chrono::milliseconds> CommunicatorImpl::deadlineFor(const CallOptions& options) const {
  if (options.timeout) return options.timeout;
  if (defaultTimeout_.count() > 0) return defaultTimeout_;
  return std::nullopt;
}

void CommunicatorImpl::ensureSubCommunicators() {
  if (intra_) return;
  const int node = layout_.nodeOfRank[static_cast<std::size_t>(rank_)];
  const int local = layout_.localRankOf[static_cast<std::size_t>(rank_)];
  intra_ = transport_->split(node, rank_);
  inter_ = transport_->split(local, node);
  // The node's ranks share memory: give the intra-node level the shm engine
  // (collective over the node; every member decides the same).
  if (auto* mpi = dynamic_cast<transport::MpiTransport*>(intra_.get())) shm::attachSharedMemory(*mpi);
  intraSharedMemory_ = intra_->sharedMemory() != nullptr;
  BC_INTERNAL(intra_ && inter_ && intra_->size() == layout_.ranksPerNode() && inter_->size() == layout_.nodes(),
              "sub-communicators do not match the node layout " << layout_.describe());
}

std::shared_ptr<const executor::Schedule> CommunicatorImpl::schedule(const AlgorithmInfo& algo,
                                                                     const CollectiveSpec& spec) {
  std::size_t countsHash = spec.counts.size();
  for (std::size_t c : spec.counts) countsHash = countsHash * 1000003u ^ c;
  const CacheKey key{&algo, spec.collective, spec.dtype, spec.op, spec.root, spec.count, countsHash};
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  auto built = std::make_shared<executor::Schedule>(spec.collective, spec.dtype, spec.op, algo.name);
  // Zero elements everywhere (counts agree across ranks): nothing to move.
  if (spec.payloadBytes() > 0 || spec.collective == Collective::kBarrier) algo.build(spec, *built);
  built->validate(size_);
  if (cacheLimit_ > 0) {
    if (cache_.size() >= cacheLimit_) cache_.clear();  // in-flight users hold their own reference
    cache_.emplace(key, built);
  }
  return built;
}

void CommunicatorImpl::checkConsistency(const CollectiveSpec& spec) {
  // (collective, dtype, op, root, count) from every rank, compared everywhere:
  // a mismatch becomes an error on all ranks instead of a hang.
  constexpr int kFields = 5;
  const long long mine[kFields] = {static_cast<int>(spec.collective), static_cast<int>(spec.dtype),
                                   static_cast<int>(spec.op), spec.root, static_cast<long long>(spec.count)};
  std::vector<long long> all(static_cast<std::size_t>(kFields * size_));
  std::vector<int> counts(static_cast<std::size_t>(size_), kFields);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int i = 0; i < size_; ++i) displs[static_cast<std::size_t>(i)] = i * kFields;
  transport_->nativeAllgatherv(mine, kFields, all.data(), counts.data(), displs.data(), DataType::kInt64, nullptr);
  static const char* kNames[kFields] = {"collective", "dtype", "op", "root", "count"};
  for (int r = 0; r < size_; ++r) {
    for (int f = 0; f < kFields; ++f) {
      if (f == 3 && spec.collective != Collective::kBroadcast) continue;
      const long long theirs = all[static_cast<std::size_t>(r * kFields + f)];
      BC_CHECK(theirs == mine[f], ErrorCategory::kMismatch, rank_,
               toString(spec.collective) << ": ranks disagree on " << kNames[f] << ": rank " << rank_ << " passed "
                                         << mine[f] << ", rank " << r << " passed " << theirs);
    }
  }
}

const AlgorithmInfo& CommunicatorImpl::prepare(const CallArgs& args, const CallOptions& options) {
  checkUsable();
  CollectiveSpec& spec = spec_;
  validateAndDescribe(args, rank_, size_, spec);
  spec.chunkBytes = chunkBytes_;
  spec.maxChunks = maxChunks_;
  spec.sharedMemory = sharedMemory_;
  spec.layout = &layout_;
  spec.interAlgorithm = interAlgorithm_.c_str();
  const AlgorithmInfo& algo = choose(spec, options);
  if (algorithms::isHierarchical(algo)) {
    ensureSubCommunicators();
    spec.intraSharedMemory = intraSharedMemory_ && intraAlgorithm_ != "ring";
  } else {
    spec.intraSharedMemory = false;
  }
  if (checkConsistency_) checkConsistency(spec);
  return algo;
}

bool CommunicatorImpl::runNativeDirectly(const AlgorithmInfo& algo, const CallArgs& args) {
  // Latency-bound calls (a few hundred ns here) cannot afford a schedule: when
  // one blocking backend call is the whole job (no chunking, no avg divide),
  // make it straight away. Every rank advances the tag sequence the same way.
  const CollectiveSpec& spec = spec_;
  if (algo.build != algorithms::buildNative || spec.op == ReduceOp::kAvg ||
      spec.count > static_cast<std::size_t>(INT_MAX)) {
    return false;
  }
  try {
    switch (spec.collective) {
      case Collective::kAllreduce:
        transport_->nativeAllreduce(args.send.data, args.recv.data, spec.count, spec.dtype, spec.op, nullptr);
        break;
      case Collective::kBroadcast:
        transport_->nativeBroadcast(args.recv.data, spec.count, spec.dtype, spec.root, nullptr);
        break;
      case Collective::kBarrier:
        transport_->nativeBarrier(nullptr);
        break;
      default:
        return false;
    }
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  ++sequence_;
  return true;
}

std::uint64_t CommunicatorImpl::launch(const AlgorithmInfo& algo, const CallArgs& args, const CallOptions& options,
                                       bool blocking, std::shared_ptr<WorkState> work) {
  const CollectiveSpec& spec = spec_;
  std::shared_ptr<const executor::Schedule> sched = schedule(algo, spec);

  std::unique_ptr<executor::Execution> exec;
  if (!freeExecutions_.empty()) {
    exec = std::move(freeExecutions_.back());
    freeExecutions_.pop_back();
  } else {
    exec = std::make_unique<executor::Execution>();
  }
  executor::Binding binding;
  binding.send = args.send.data;
  binding.recv = args.recv.data;
  binding.scratch = scratch_.acquire(sched->scratchBytes());
  binding.subTransports[executor::kIntraComm] = intra_.get();
  binding.subTransports[executor::kInterComm] = inter_.get();
  if (spec.collective == Collective::kAllgather &&
      (algo.build == algorithms::buildNative || algo.build == algorithms::buildShm)) {
    exec->nativeCounts.resize(static_cast<std::size_t>(size_));
    exec->nativeDispls.resize(static_cast<std::size_t>(size_));
    const std::vector<algorithms::Range> blocks = algorithms::blockLayout(spec);
    for (int i = 0; i < size_; ++i) {
      exec->nativeCounts[static_cast<std::size_t>(i)] = static_cast<int>(blocks[static_cast<std::size_t>(i)].count);
      exec->nativeDispls[static_cast<std::size_t>(i)] = static_cast<int>(blocks[static_cast<std::size_t>(i)].offset);
    }
    binding.nativeCounts = exec->nativeCounts.data();
    binding.nativeDispls = exec->nativeDispls.data();
  }
  const int tagBase = static_cast<int>(sequence_++ % static_cast<std::uint64_t>(tagWindow_)) * executor::kMaxStepTag;
  // Blocking calls without a deadline use the backend's blocking collective
  // (run() drained earlier work first); asynchronous calls and calls with a
  // deadline use its non-blocking form. The choice depends only on how the
  // call was made, which every rank must match (as in MPI, blocking and
  // non-blocking collectives do not match each other).
  // A blocking call inside a larger schedule (e.g. the inter-node phase of
  // hier) would stall the schedule's other steps, so only native-only
  // schedules use it; the schedule's shape is the same on every rank.
  const bool blockingNative = blocking && !deadlineFor(options).has_value() && sched->nativeOnly();
  exec->start(*sched, binding, tagBase, blockingNative);

  InFlight f;
  f.execution = exec.release();
  f.schedule = std::move(sched);
  f.scratch = binding.scratch;
  f.work = std::move(work);
  f.id = nextId_++;
  if (f.work) {
    f.work->id = f.id;
    f.work->algorithm = algo.name;
  }
  inFlight_.push_back(std::move(f));
  return inFlight_.back().id;
}

bool CommunicatorImpl::progressAll() {
  bool advanced = false;
  try {
    for (InFlight& f : inFlight_) {
      if (f.execution->progress(*transport_, &advanced)) {
        retired_.push_back(f);
        f.execution = nullptr;
      }
    }
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  if (retired_.empty()) return advanced;
  std::erase_if(inFlight_, [](const InFlight& f) { return f.execution == nullptr; });
  for (InFlight& f : retired_) {
    scratch_.release(f.scratch);
    freeExecutions_.emplace_back(f.execution);
    if (f.work) f.work->done = true;
  }
  retired_.clear();
  return true;
}

bool CommunicatorImpl::isDone(std::uint64_t id) const {
  for (const InFlight& f : inFlight_) {
    if (f.id == id) return false;
  }
  return true;
}

void CommunicatorImpl::fail(std::exception_ptr error) {
  failure_ = error;
  for (InFlight& f : inFlight_) {
    if (f.work && !f.work->done) {
      f.work->error = error;
      f.work->done = true;
    }
  }
  // Executions may still be referenced by the backend (MPI cannot cancel a
  // collective): they, and their scratch, are deliberately leaked.
  inFlight_.clear();
  scratch_.abandon();
}

void CommunicatorImpl::driveUntilDone(std::uint64_t id, std::optional<std::chrono::milliseconds> timeout,
                                      const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::uint32_t spins = 0;
  std::uint32_t idle = 0;
  while (true) {
    idle = progressAll() ? 0 : idle + 1;
    if (isDone(id)) return;
    // Oversubscribed ranks (more ranks than cores, or threads of the
    // in-process transport) must let the peer they wait for run.
    if (idle >= kIdlePollsBeforeYield) std::this_thread::yield();
    // Reading the clock costs ~20 ns; check it every 256 polls.
    if (timeout && (++spins & 0xff) == 0 && Clock::now() - start > *timeout) {
      std::ostringstream os;
      os << what << " did not complete within " << timeout->count()
         << " ms (another rank may not have called it, or called it with different arguments)";
      auto error = std::make_exception_ptr(Error(ErrorCategory::kTimeout, rank_, os.str()));
      fail(error);
      std::rethrow_exception(error);
    }
  }
}

bool CommunicatorImpl::tryFastAllreduce(const CallArgs& args, const CallOptions& options) {
  const ConstView& send = args.send;
  const View& recv = args.recv;
  const unsigned dtype = static_cast<unsigned>(recv.dtype);
  const unsigned op = static_cast<unsigned>(args.op);
  if (args.collective != Collective::kAllreduce || dtype >= kNumDataTypes || op >= kNumReduceOps ||
      args.op == ReduceOp::kAvg || send.dtype != recv.dtype || send.count != recv.count || recv.count == 0 ||
      send.data == nullptr || recv.data == nullptr || !options.algorithm.empty() || options.timeout.has_value() ||
      finalized_ || failure_ || !inFlight_.empty()) {
    return false;
  }
  const std::size_t bytes = recv.count * dataTypeSize(recv.dtype);
  if (bytes > fastNativeMaxBytes_) return false;
  const auto s = reinterpret_cast<std::uintptr_t>(send.data);
  const auto r = reinterpret_cast<std::uintptr_t>(recv.data);
  if (s != r && s < r + bytes && r < s + bytes) return false;  // partial overlap: let validation report it
  try {
    transport_->nativeAllreduce(send.data, recv.data, recv.count, recv.dtype, args.op, nullptr);
  } catch (...) {
    fail(std::current_exception());
    throw;
  }
  ++sequence_;
  return true;
}

void CommunicatorImpl::run(const CallArgs& args, const CallOptions& options) {
  std::lock_guard lock(mutex_);
  if (tuningFromEnvPending_) [[unlikely]] loadTuningFromEnv();
  if (fastNativeMaxBytes_ > 0 && tryFastAllreduce(args, options)) return;
  const AlgorithmInfo& algo = prepare(args, options);
  const auto deadline = deadlineFor(options);
  if (algo.build == algorithms::buildNative && !deadline) {
    // The backend's blocking collective. Finish earlier asynchronous work
    // first: a peer may be waiting for our part of it, and we could not
    // progress it from inside the blocking call.
    while (!inFlight_.empty()) progressAll();
    if (runNativeDirectly(algo, args)) return;
  }
  const std::uint64_t id = launch(algo, args, options, /*blocking=*/true, nullptr);
  driveUntilDone(id, deadline, toString(args.collective).data());
}

Work CommunicatorImpl::submit(const CallArgs& args, const CallOptions& options) {
  std::lock_guard lock(mutex_);
  if (tuningFromEnvPending_) [[unlikely]] loadTuningFromEnv();
  auto work = std::make_shared<WorkState>();
  work->comm = this;
  launch(prepare(args, options), args, options, /*blocking=*/false, work);
  progressAll();  // post the first steps now so peers can start
  return Work(work);
}

bool CommunicatorImpl::test(WorkState& work) {
  std::lock_guard lock(mutex_);
  if (!work.done) {
    checkUsable();
    progressAll();
  }
  if (work.error) std::rethrow_exception(work.error);
  return work.done;
}

void CommunicatorImpl::wait(WorkState& work, std::optional<std::chrono::milliseconds> timeout) {
  std::lock_guard lock(mutex_);
  if (!work.done) {
    checkUsable();
    driveUntilDone(work.id,
                   timeout ? timeout : (defaultTimeout_.count() > 0 ? std::optional(defaultTimeout_) : std::nullopt),
                   "Work::wait");
  }
  if (work.error) std::rethrow_exception(work.error);
}

void* CommunicatorImpl::allocateBuffer(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  checkUsable();
  BC_INVALID(bytes > 0, rank_, "allocateBuffer: bytes is 0");
  // Registration is collective: compare every rank's size first, so a rank
  // asking for a different size is an error on every rank, not a hang or a
  // peer reading past the end of its buffer.
  const long long mine = static_cast<long long>(bytes);
  std::vector<long long> all(static_cast<std::size_t>(size_));
  std::vector<int> counts(static_cast<std::size_t>(size_), 1);
  std::vector<int> displs(static_cast<std::size_t>(size_));
  for (int i = 0; i < size_; ++i) displs[static_cast<std::size_t>(i)] = i;
  transport_->nativeAllgatherv(&mine, 1, all.data(), counts.data(), displs.data(), DataType::kInt64, nullptr);
  for (int r = 0; r < size_; ++r) {
    BC_CHECK(all[static_cast<std::size_t>(r)] == mine, ErrorCategory::kMismatch, rank_,
             "allocateBuffer: ranks disagree on the size: rank " << rank_ << " asked for " << mine << " bytes, rank "
                                                                 << r << " for " << all[static_cast<std::size_t>(r)]);
  }
  if (transport::SharedMemoryEngine* engine = transport_->sharedMemory()) return engine->allocate(bytes);
  // No shared segment here: ordinary page-aligned, zeroed memory, so code
  // written for registered buffers runs everywhere (without the zero-copy).
  constexpr std::size_t kPageBytes = 4096;
  void* p = std::aligned_alloc(kPageBytes, (bytes + kPageBytes - 1) / kPageBytes * kPageBytes);
  BC_CHECK(p != nullptr, ErrorCategory::kInvalidArgument, rank_,
           "allocateBuffer: out of memory for " << bytes << " bytes");
  std::memset(p, 0, bytes);
  heapBuffers_.push_back(p);
  return p;
}

void CommunicatorImpl::freeBuffer(void* buffer) {
  std::lock_guard lock(mutex_);
  // finalize() already released every registered buffer.
  if (buffer == nullptr || finalized_) return;
  BC_INVALID(inFlight_.empty(), rank_, "freeBuffer: collectives are still in flight (wait for them first)");
  if (auto it = std::find(heapBuffers_.begin(), heapBuffers_.end(), buffer); it != heapBuffers_.end()) {
    std::free(buffer);
    heapBuffers_.erase(it);
    return;
  }
  transport::SharedMemoryEngine* engine = transport_ ? transport_->sharedMemory() : nullptr;
  BC_INVALID(engine != nullptr, rank_, "freeBuffer: pointer was not returned by allocateBuffer");
  engine->release(buffer);
}

void CommunicatorImpl::finalize() {
  std::lock_guard lock(mutex_);
  if (finalized_) return;
  finalized_ = true;
  std::exception_ptr pending;
  if (!failure_) {
    try {
      while (!inFlight_.empty()) progressAll();
    } catch (...) {
      pending = std::current_exception();
    }
  }
  for (InFlight& f : inFlight_) {
    if (f.work && !f.work->done) {
      f.work->error = std::make_exception_ptr(
          Error(ErrorCategory::kFinalized, rank_, "communicator finalized before this operation completed"));
      f.work->done = true;
    }
  }
  if (!failure_) {
    inFlight_.clear();
    scratch_.clear();
  }
  cache_.clear();
  intra_.reset();
  inter_.reset();
  for (void* p : heapBuffers_) std::free(p);
  heapBuffers_.clear();
  transport_.reset();  // releases the shared segment and registered buffers
  if (onFinalize_) onFinalize_();
  if (pending) std::rethrow_exception(pending);
}

}  // namespace boostcomm::detail
