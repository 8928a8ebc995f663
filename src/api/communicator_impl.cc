// CommunicatorImpl's construction, call path (validate -> route -> execute;
// the engine route here, the direct and small ones in communicator_local.cc)
// and finalisation. Declared in communicator_impl.h.
#include "api/communicator_impl.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "api/agreement.h"
#include "core/clock.h"
#include "watch/control_channel.h"
#include "watch/watchdog.h"
#include "core/check.h"
#include "core/tunables.h"
#include "shm/attach.h"
#include "topology/layout.h"
#include "transport/shared_memory.h"

namespace boostcomm::detail {

namespace {

// Tag windows the transport's tag range is cut into at least: with MPI_TAG_UB
// at the standard's minimum (32767) that is 8 windows of 4096 tags, enough
// for a flat ring over 2048 ranks (2(n-1) tags per chunk) or 12 hierarchical
// phases of 341 tags; Open MPI's 2^31-1 gives 32768 windows of kMaxStepTag.
constexpr long long kMinTagWindows = 8;

// A call that asks for a 16-bit wire format. The direct and small paths
// carry none, so such a call goes through the selection (resolveWire); an
// explicit kOff asks for what those paths do anyway.
bool wireAsked(const CallOptions& options) { return options.wire.value_or(WireFormat::kOff) != WireFormat::kOff; }

}  // namespace

using algorithms::AlgorithmInfo;
using algorithms::CollectiveSpec;

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<transport::Transport> transport, std::function<void()> onFinalize)
    : transport_(std::move(transport)), onFinalize_(std::move(onFinalize)) {
  rank_ = transport_->rank();
  size_ = transport_->size();
  engine_ = std::make_unique<executor::ProgressEngine>(*transport_, mutex_);
  // The shm algorithms exist only with an engine (every rank on one node);
  // the built-in table picks them only then.
  sharedMemory_ = transport_->sharedMemory() != nullptr;
  if (sharedMemory_) {
    const std::int64_t small = core::tunableInt(core::kTunableShmSmallBytes);
    const transport::SharedMemoryEngine& shm = *transport_->sharedMemory();
    smallAllreduceBytes_ = small < 0 ? shm.smallAllreduceAutoBytes()
                                     : std::min(static_cast<std::size_t>(small), shm.smallAllreduceBytes());
  }
  table_ = algorithms::SelectionTable::builtIn(sharedMemory_, transport_->name());
  core::checkEnvironmentNames();  // a retired BOOSTCOMM_* name is an error, an unknown one a warning
  userSelection_.applyOverride(core::tunableString(core::kTunableSelectionTable));
  algoOverride_ = algorithms::parseAlgoOverride(core::tunableString(core::kTunableAlgo));
  defaultTimeout_ = std::chrono::milliseconds(core::tunableInt(core::kTunableTimeoutMs));
  explicitTimeout_ = core::tunableIsSet(core::kTunableTimeoutMs) && defaultTimeout_.count() > 0;
  // The stall inspector reads the node's peers through the shm segment.
  core::CallStatus* status = &localStatus_;
  std::vector<core::CallStatus*> peers;
  if (transport::SharedMemoryEngine* shm = transport_->sharedMemory(); shm && shm->callStatus(rank_)) {
    status = shm->callStatus(rank_);
    for (int r = 0; r < size_; ++r) peers.push_back(shm->callStatus(r));
  }
  status->pid.store(static_cast<std::uint32_t>(getpid()), std::memory_order_relaxed);
  inspector_ = std::make_unique<StallInspector>(rank_, status, peers, core::tunableInt(core::kTunableStallWarnMs),
                                                defaultTimeout_.count());
  inspector_->setJobEnd([transport = transport_.get()] { transport->abortJob(); });
  record_.configure(rank_, status, std::move(peers), inspector_.get(), engine_.get(),
                    core::tunableBool(core::kTunableFingerprints));
  // Ranks it cannot see through shared memory (other nodes, or shm off):
  // the control channel, a collective dup, so every rank decides alike (the
  // shm attachment was agreed; the thread level is the job's).
  if (size_ > 1 && transport_->sharedMemory() == nullptr) {
    inspector_->attachChannel(ControlChannel::create(*transport_), size_);
  }
  engine_->setWaitMonitor(inspector_.get());
  engine_->setCallStatus(status);
  chunkBytes_ = core::tunableBytes(core::kTunableRingChunkBytes);
  maxChunks_ = static_cast<int>(core::tunableInt(core::kTunableMaxChunksPerSegment));
  hierMaxPieces_ = static_cast<int>(core::tunableInt(core::kTunableHierMaxPieces));
  cache_ = ScheduleCache(static_cast<std::size_t>(core::tunableInt(core::kTunableScheduleCacheSize)));
  checkConsistency_ = core::tunableBool(core::kTunableCheckConsistency);
  inlineHeaders_ = transport_->acceptsShorterMessages();
  hierMinBytes_ = core::tunableBytes(core::kTunableHierMinBytes);
  CommStrategy strategy;
  strategy.strategy = *parseStrategy(core::tunableEnum(core::kTunableStrategy));
  strategy.interAlgorithm = core::tunableEnum(core::kTunableHierInterAlgo);
  strategy.intraAlgorithm = core::tunableEnum(core::kTunableHierIntraAlgo);
  wire_ = *parseWireFormat(core::tunableEnum(core::kTunableWireDtype));
  configureStrategy(strategy);
  // Node layout: declared (tests, emulation), one node where a shared-memory
  // engine is attached (only ever to groups on one node: no collective call,
  // and none that creates a communicator), or detected (collective call).
  if (auto declared = topology::layoutOverrideFromEnv(size_, rank_)) {
    layout_ = algorithms::layoutFromSizes(declared->ranksPerNode);
    layoutDeclared_ = true;
  } else if (sharedMemory_) {
    layout_ = algorithms::layoutFromSizes({size_});
  } else {
    layout_ = algorithms::layoutFromNodeIds(transport_->nodeIdOfEachRank());
  }
  links_.configure(layout_, rank_);
  // BOOSTCOMM_TUNING_CACHE and the link probe happen at the first collective
  // call: both are collective, and in-process groups construct their ranks
  // on one thread. Until then a multi-node model uses its default link.
  tuningFromEnvPending_ = !core::tunableString(core::kTunableTuningCache).empty();
  linkFactsPending_ = layout_.nodes() > 1;
  online_ = tuning::OnlineSelection(core::tunableBool(core::kTunableSelectionTrials), core::tunableBool(core::kTunableLogSelection),
                                    transport_->repeatsNativeTimes() ? -tuning::OnlineSelection::kNativeKeepPercent
                                                                      : tuning::OnlineSelection::kNativeWinPercent);
  // Tags: call number q uses window q % tagWindows_, i.e. tags
  // [w * tagSpan_, (w + 1) * tagSpan_), all <= maxTag since
  // tagWindows_ * tagSpan_ <= maxTag + 1; its schedule keeps its step tags
  // below tagSpan_ (CollectiveSpec::tagSpan, checked by Schedule::validate).
  // launch() starts call q only after call q - tagWindows_ finished here
  // (the progress engine's in-flight cap), so
  // in-flight calls never share a window, and a peer's message of a later
  // call with the same tag is sent after its message of the earlier call
  // (the peer too finished the earlier call first): point-to-point order
  // (transport.h) matches each receive with the message of its own call.
  const long long tags = static_cast<long long>(transport_->maxTag()) + 1;
  tagSpan_ = static_cast<int>(std::min<long long>(executor::kMaxStepTag, tags / kMinTagWindows));
  BC_INTERNAL(tagSpan_ > 0, "transport '" << transport_->name() << "' allows only " << tags << " tags");
  tagWindows_ = static_cast<int>(std::min<long long>(tags / tagSpan_, INT_MAX));
  engine_->setMaxInFlight(static_cast<std::size_t>(tagWindows_));
  rebuildSelection();  // now that the layout is known
  progressMode_ = *parseProgressMode(core::tunableEnum(core::kTunableProgress));
  if (progressMode_ == ProgressMode::kThread) engine_->setThreadEnabled(true);
  // Last: a constructor that throws (a bad BOOSTCOMM_* value above) runs no
  // destructor, so an inspector registered earlier stayed with the watchdog
  // after it was freed, and the next tick crashed (unit.hierarchical's bad
  // NODE_LAYOUT cases, about 1 run in 20).
  watch(inspector_.get());
}

CommunicatorImpl::~CommunicatorImpl() {
  try {
    finalize();
  } catch (...) {
    // Destructors must not throw; finalize() errors were reported to waiters.
  }
  if (inspector_) unwatch(inspector_.get());
}

void CommunicatorImpl::abort() {
  // Any thread, any time: a caller waiting in the engine leaves at its next
  // check; the lock is then free (or was) and the engine fails every
  // operation in flight, so their Works complete with the error. A caller
  // inside a blocking backend call cannot be interrupted: after 1 s abort()
  // returns without the lock, and that call ends at its deadline.
  inspector_->abort();
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::unique_lock lock(mutex_, std::defer_lock);
  while (!lock.try_lock()) {
    if (std::chrono::steady_clock::now() > giveUp) return;
    std::this_thread::yield();
  }
  if (!finalized_)
    engine_->fail(std::make_exception_ptr(
        Error(ErrorCategory::kAborted, rank_, "communicator aborted (Communicator::abort) before this operation completed")));
  std::vector<executor::ProgressEngine::Due> due;
  engine_->takeCallbacks(due);
  lock.unlock();
  if (!due.empty()) executor::ProgressEngine::runCallbacks(due);
}

void CommunicatorImpl::setTimeout(std::optional<std::chrono::milliseconds> timeout) {
  std::lock_guard lock(mutex_);
  BC_INVALID(!timeout || timeout->count() >= 0, rank_, "setTimeout: timeout is negative (" << timeout->count() << " ms)");
  defaultTimeout_ = timeout.value_or(std::chrono::milliseconds(0));
  explicitTimeout_ = defaultTimeout_.count() > 0;
  inspector_->setDeadlineMs(defaultTimeout_.count());
}

void CommunicatorImpl::raiseUnusable() const {
  BC_CHECK(!finalized_, ErrorCategory::kFinalized, rank_, "communicator used after finalize()");
  // Set after a timeout or transport error, on whichever thread saw it: the
  // communicator is unusable.
  if (std::exception_ptr failure = engine_->failure()) {
    try {
      std::rethrow_exception(failure);
    } catch (const Error& e) {
      core::raise(e.category(), rank_, "communicator unusable after an earlier failure: " + e.detail());
    }
  }
  BC_CHECK(!inspector_->aborted(), ErrorCategory::kAborted, rank_, "communicator used after abort()");
  if (inspector_->poisoned()) core::raise(ErrorCategory::kMismatch, rank_, inspector_->poisonMessage());
  if (inspector_->peerExited()) core::raise(ErrorCategory::kTransport, rank_, inspector_->peerExitedMessage());
  BC_INTERNAL(false, "raiseUnusable on a usable communicator");
}

std::optional<std::chrono::milliseconds> CommunicatorImpl::deadlineFor(const CallOptions& options) const {
  if (options.timeout) return options.timeout;
  if (defaultTimeout_.count() > 0) return defaultTimeout_;
  return std::nullopt;
}

void CommunicatorImpl::ensureSubCommunicators() {
  if (intra_) return;
  // The splits are blocking collectives over the world: finish our work in
  // flight first. A peer may be waiting for our next step of it, and from
  // inside MPI_Comm_split we would never post it (a 2 x 2 DDP job hung here
  // when online selection tried hier while an earlier bucket was in flight).
  engine_->drain(deadlineFor({}), "split", rank_);
  const int node = layout_.nodeOfRank[static_cast<std::size_t>(rank_)];
  const int local = layout_.localRankOf[static_cast<std::size_t>(rank_)];
  intra_ = transport_->split(node, rank_);
  inter_ = transport_->split(local, node);
  // The node's ranks share memory: give the intra-node level the shm engine
  // (collective over the node; every member decides the same).
  if (intra_) shm::attachSharedMemory(*intra_);
  intraSharedMemory_ = intra_->sharedMemory() != nullptr;
  BC_INTERNAL(intra_ && inter_ && intra_->size() == layout_.ranksPerNode() && inter_->size() == layout_.nodes(),
              "sub-communicators do not match the node layout " << layout_.describe());
  // Their completions wake the progress thread (where they signal them):
  // a hierarchical call waiting on the slow link then sleeps, not polls.
  engine_->signalFrom(*intra_);
  engine_->signalFrom(*inter_);
}

std::shared_ptr<const executor::Schedule> CommunicatorImpl::schedule(const AlgorithmInfo& algo,
                                                                     const CollectiveSpec& spec) {
  if (auto cached = cache_.find(algo, spec)) return cached;
  auto built = std::make_shared<executor::Schedule>(spec.collective, spec.dtype, spec.op, algo.name);
  // Zero elements everywhere (counts agree across ranks): nothing to move.
  if (spec.payloadBytes() > 0 || spec.collective == Collective::kBarrier) algo.build(spec, *built);
  built->validate(size_, tagSpan_ - 1);
  cache_.insert(built);
  return built;
}

inline std::size_t CommunicatorImpl::validate(const CallArgs& args) {
  try {
    return validateAndDescribe(args, rank_, size_, spec_);
  } catch (const Error& e) {
    // Peers that entered this call wait for us: say in our call status that
    // it was rejected here, so they report it instead of waiting out the
    // deadline (node peers, after a grace: core/call_status.h).
    if (e.category() == ErrorCategory::kInvalidArgument) {  // engine lock held (run / submit)
      record_.rejected(sequence_, core::Fingerprint::of(args.collective, args.recv.dtype, args.op, args.root,
                                                        args.recv.count));
    }
    throw;
  }
}

const AlgorithmInfo& CommunicatorImpl::prepare(const CallArgs& args, const CallOptions& options) {
  CollectiveSpec& spec = spec_;
  auto describe = [&] {
    spec.chunkBytes = chunkBytes_;
    spec.maxChunks = maxChunks_;
    spec.hierMaxPieces = hierMaxPieces_;
    spec.sharedMemory = sharedMemory_;
    spec.layout = &layout_;
    spec.interAlgorithm = interAlgorithm_.c_str();
    spec.tagSpan = tagSpan_ - 1;  // the last tag carries the fingerprint header (executor.h)
  };
  describe();
  // The first call's collective setup (configuration agreement, tuning
  // cache, link facts) comes after every local check (an explicit algorithm
  // or wire format this call cannot use): a bad argument on one rank throws
  // before anything is exchanged, so its peers are not left waiting. Until
  // it ran, the route table settles no call (rebuildSelection): every call
  // gets here.
  if (firstCallPending()) [[unlikely]] {
    (void)resolveWire(spec, choose(spec, options), options);
    firstCallSetup(deadlineFor(options));
    describe();  // the tuned cache may bring its own chunk size
  }
  const AlgorithmInfo* tried = onlineChoice(spec, options);
  const AlgorithmInfo& algo = tried != nullptr ? *tried : choose(spec, options);
  if (algorithms::isHierarchical(algo)) {
    ensureSubCommunicators();
    // A segment list's intra-node phases run as rings (the shm engine
    // addresses lists in allreduce only).
    spec.intraSharedMemory = intraSharedMemory_ && intraAlgorithm_ != "ring" && !args.listed();
  } else {
    spec.intraSharedMemory = false;
  }
  spec.wire = resolveWire(spec, algo, options);
  if (checkConsistency_) checkConsistency(spec);
  return algo;
}

void CommunicatorImpl::reportRejectedCall(Collective collective) {
  executor::EngineLock lock(*engine_);
  record_.rejected(sequence_, core::Fingerprint::of(collective, DataType::kFloat32, ReduceOp::kSum, 0, 0));
}

bool CommunicatorImpl::takesSmall(const CallArgs& args, std::size_t bytes, const CallOptions& options) const {
  // A small blocking collective on one node runs through the shm engine's
  // slots instead of the backend or the engine's chunked path
  // (shm/small_collective.cc): faster, and its fingerprint check travels with
  // the data. Only where the selection chose native or shm: an explicit
  // algorithm (the call's option or BOOSTCOMM_ALGO) is run as named. The
  // slot holds the payload (allgather: each rank's block, equal blocks only).
  if (size_ < 2 || smallAllreduceBytes_ == 0 || args.listed() || args.collective == Collective::kBarrier) return false;
  if (!options.algorithm.empty() || !algoOverride_[static_cast<std::size_t>(args.collective)].empty()) return false;
  if (args.op == ReduceOp::kAvg && args.collective != Collective::kBroadcast && args.collective != Collective::kAllgather)
    return false;
  if (args.collective == Collective::kAllgather && args.varying) return false;
  const std::size_t slot = args.collective == Collective::kAllgather ? bytes / static_cast<std::size_t>(size_) : bytes;
  return slot <= smallAllreduceBytes_;
}

inline Route CommunicatorImpl::routeOf(algorithms::AlgorithmKind kind, const CallArgs& args, const CallOptions& options,
                                std::size_t bytes) const {
  // Latency-bound calls (a few hundred ns here) cannot afford a schedule:
  // where one blocking backend call, or the shm engine's small collective,
  // is the whole job, make it straight away. The small collectives take a
  // deadline themselves (they poll it), so they run with or without one:
  // ranks whose deadlines differ still meet in one protocol. The backend's
  // blocking call takes no deadline (it cannot time out), no avg (the
  // executor divides) and an int count; allgather and reduce_scatter have
  // no direct form (their fingerprint is the schedule's: fingerprintOf).
  using algorithms::AlgorithmKind;
  if ((kind != AlgorithmKind::kBackend && kind != AlgorithmKind::kSharedMemory) || args.listed()) return Route::kEngine;
  if (takesSmall(args, bytes, options)) return Route::kSmall;
  const Collective c = args.collective;
  const bool direct = kind == AlgorithmKind::kBackend &&
                      (c == Collective::kAllreduce || c == Collective::kBroadcast || c == Collective::kBarrier) &&
                      !interruptible(options) && args.op != ReduceOp::kAvg &&
                      spec_.count <= static_cast<std::size_t>(INT_MAX);
  return direct ? Route::kDirect : Route::kEngine;
}

std::uint64_t CommunicatorImpl::launch(const AlgorithmInfo& algo, const CallArgs& args, const CallOptions& options,
                                       bool blocking, std::shared_ptr<WorkState> work) {
  record_.beforeCall(sequence_);
  const CollectiveSpec& spec = spec_;
  std::shared_ptr<const executor::Schedule> sched = schedule(algo, spec);

  std::unique_ptr<executor::Execution> exec = engine_->acquireExecution();
  executor::Binding binding;
  binding.send = args.send.data;
  binding.recv = args.recv.data;
  binding.subTransports[executor::kIntraComm] = intra_.get();
  binding.subTransports[executor::kInterComm] = inter_.get();
  binding.meter = links_.meter();
  if (args.listed()) {
    // Owned by the execution: async callers need not keep the lists.
    exec->recvList = *args.recvList;
    binding.recvList = &exec->recvList;
    if (args.sendList == args.recvList) {
      binding.sendList = &exec->recvList;
    } else {
      exec->sendList = *args.sendList;
      binding.sendList = &exec->sendList;
    }
  }
  if (spec.collective == Collective::kAllgather && (algo.kind == algorithms::AlgorithmKind::kBackend ||
                                                    algo.kind == algorithms::AlgorithmKind::kSharedMemory)) {
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
  const std::uint64_t sequence = sequence_++;
  const int tagBase = static_cast<int>(sequence % static_cast<std::uint64_t>(tagWindows_)) * tagSpan_;
  // Blocking calls without a deadline use the backend's blocking collective
  // (run() drained earlier work first); asynchronous calls and calls with a
  // deadline use its non-blocking form. The choice depends only on how the
  // call was made, which every rank must match (as in MPI, blocking and
  // non-blocking collectives do not match each other).
  // A blocking call inside a larger schedule (e.g. the inter-node phase of
  // hier) would stall the schedule's other steps, so only native-only
  // schedules use it; the schedule's shape is the same on every rank.
  const bool blockingNative = blocking && !interruptible(options) && sched->nativeOnly();
  const core::Fingerprint fingerprint = fingerprintOf(spec);
  if (record_.fingerprints()) {
    binding.header.rank = rank_;
    binding.header.sequence = sequence;
    binding.header.word = fingerprint.word();
    binding.header.count = fingerprint.count;
    binding.header.wire = static_cast<std::uint32_t>(spec.wire);
    binding.headerTag = tagBase + tagSpan_ - 1;
    if (!record_.nodeStatus().empty()) binding.peerStatus = &record_.nodeStatus();
    binding.inlineHeaders = inlineHeaders_;
  }
  // Ended by the progress engine when the schedule completes; the blocking
  // flag is cleared by runOnEngine's guard.
  record_.start(sequence, fingerprint, algo.name, static_cast<std::uint32_t>(spec.wire), blockingNative);
  if (work) {
    work->algorithm = algo.name;
    work->wire = spec.wire;
    if (const auto d = deadlineFor(options)) work->deadlineMs = d->count();  // the progress thread's check
  }
  // A failure while the in-flight cap progresses older operations fails the
  // engine itself (as every engine progress does).
  return engine_->launch(std::move(exec), std::move(sched), binding, sequence, tagBase, blockingNative,
                         std::move(work));
}

inline CommunicatorImpl::Routed CommunicatorImpl::route(const CallArgs& args, const CallOptions& options,
                                                 std::size_t bytes) {
  // Where the map's default is the backend's or shm's collective and the
  // call names no algorithm or wire format of its own, the route table
  // settles it; an explicit kOff wire asks for what these routes do anyway.
  if (options.algorithm.empty() && !wireAsked(options)) {
    if (const auto kind = routes_.settledKind(args.collective, bytes)) {
      if (const Route r = routeOf(*kind, args, options, bytes); r != Route::kEngine) {
        trial_ = {};
        return {r, nullptr};
      }
    }
  }
  const AlgorithmInfo& algo = prepare(args, options);
  return {routeOf(algo.kind, args, options, bytes), &algo};
}

inline void CommunicatorImpl::runLocal(Route route, const CallArgs& args, const CallOptions& options) {
  if (!trial_.timed() && engine_->idle()) [[likely]] {
    runWithoutSchedule(route, args, options);
    return;
  }
  // A timed trial, or earlier asynchronous work to finish first: a peer may
  // be waiting for our part of it, and we could not progress it from inside
  // the blocking call. The small collective's deadline is what the drain
  // left of it.
  const tuning::OnlineSelection::Trial trial = trial_;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = deadlineFor(options);
  engine_->drain(deadline, "drain before a blocking call", rank_);
  CallOptions left = options;
  if (route == Route::kSmall && interruptible(options) && deadline) {
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    left.timeout = std::max(std::chrono::milliseconds(1), *deadline - spent);
  }
  runWithoutSchedule(route, args, left);
  if (trial.timed()) online_.recordTime(trial, start, core::Clock::now());
}

// validate -> route -> execute.
void CommunicatorImpl::run(const CallArgs& args, const CallOptions& options) {
  executor::EngineLock lock(*engine_);
  checkUsable();
  const std::size_t bytes = validate(args);
  const Routed routed = route(args, options, bytes);
  if (routed.route != Route::kEngine) [[likely]] {
    runLocal(routed.route, args, options);
  } else {
    runOnEngine(*routed.algorithm, args, options);
  }
}

void CommunicatorImpl::runOnEngine(const AlgorithmInfo& algo, const CallArgs& args, const CallOptions& options) {
  const tuning::OnlineSelection::Trial trial = trial_;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = deadlineFor(options);
  const bool backend = algo.kind == algorithms::AlgorithmKind::kBackend;
  // Without a deadline a native-only schedule makes the backend's blocking
  // call (launch): finish earlier asynchronous work first, as runLocal does.
  if (backend && !interruptible(options)) engine_->drain(deadline, "drain before a blocking call", rank_);
  const CallRecord::Blocking blocking = record_.blockingGuard();
  const std::uint64_t sequence = sequence_;  // launch() takes it
  // The post-return check below reads the node peers' entries of this call:
  // start fetching them now, so the line transfers overlap the call.
  if (backend) record_.prefetch(sequence);
  const std::uint64_t id = launch(algo, args, options, /*blocking=*/true, nullptr);
  engine_->driveUntilDone(id, deadline, toString(args.collective).data(), rank_);
  // A native call (blocking or, with a deadline, nonblocking) carries no
  // fingerprint in its data: check the node peers' before returning.
  if (backend) record_.verifyReturned(sequence);
  if (trial.timed()) online_.recordTime(trial, start, core::Clock::now());
}

Work CommunicatorImpl::submit(const CallArgs& args, const CallOptions& options) {
  executor::EngineLock lock(*engine_);
  auto work = std::make_shared<WorkState>();
  work->comm = this;
  checkUsable();
  validate(args);
  const AlgorithmInfo& algo = prepare(args, options);
  const tuning::OnlineSelection::Trial trial = trial_;
  // Without a progress thread the engine sees completion only inside the
  // caller's test/wait, which would time the caller's own work too.
  const bool timed = trial.timed() && engine_->threadEnabled();
  if (timed) engine_->enableShareClock();  // a trial is timed by its share (see there)
  const core::Clock::time_point launched = timed ? core::Clock::now() : core::Clock::time_point{};
  launch(algo, args, options, /*blocking=*/false, work);
  if (timed) online_.recordLaunch(trial, work, launched);
  engine_->progress();  // post the first steps now so peers can start
  return Work(work);
}

void* CommunicatorImpl::allocateBuffer(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  checkUsable();
  BC_INVALID(bytes > 0, rank_, "allocateBuffer: bytes is 0");
  // Registration is collective: compare every rank's size first, so a rank
  // asking for a different size is an error on every rank, not a hang or a
  // peer reading past the end of its buffer.
  const long long mine = static_cast<long long>(bytes);
  const std::vector<long long> all = gatherWords(*transport_, &mine, 1);
  const int r = firstDifferentRank(all, &mine, 1);
  BC_CHECK(r < 0, ErrorCategory::kMismatch, rank_,
           "allocateBuffer: ranks disagree on the size: rank " << rank_ << " asked for " << mine << " bytes, rank " << r
                                                               << " for " << all[static_cast<std::size_t>(r)]);
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

std::shared_ptr<void> CommunicatorImpl::allocateOwnedBuffer(std::size_t bytes) {
  executor::EngineLock lock(*engine_);
  checkUsable();
  BC_INVALID(bytes > 0, rank_, "allocateOwnedBuffer: bytes is 0");
  transport::SharedMemoryEngine* engine = transport_->sharedMemory();
  if (engine == nullptr) return nullptr;  // every rank decides alike: the engine is collective
  // Collective: finish our work in flight first (a peer inside the
  // exchange could not progress its part of it, and the engine takes new
  // registrations only between collectives).
  const std::optional<std::chrono::milliseconds> deadline = deadlineFor({});
  engine_->drain(deadline, "allocateOwnedBuffer", rank_);
  // Under the group's deadline: a rank that never asks (DDP on a rank whose
  // DDP_DISABLE_COMM_MEM differs) is reported, not waited for.
  const long long mine = static_cast<long long>(bytes);
  const std::vector<long long> all =
      gatherWithin(&mine, 1, deadline, "allocateOwnedBuffer",
                   "some rank did not ask for a buffer (DDP asks the backend for its buckets only where "
                   "DDP_DISABLE_COMM_MEM=0: it must be alike on every rank)");
  const int r = firstDifferentRank(all, &mine, 1);
  BC_CHECK(r < 0, ErrorCategory::kMismatch, rank_,
           "allocateOwnedBuffer: ranks disagree on the size: rank " << rank_ << " asked for " << mine << " bytes, rank "
                                                                    << r << " for " << all[static_cast<std::size_t>(r)]);
  try {
    return engine->allocateOwned(bytes);
  } catch (const Error& e) {
    // A segment that cannot be made (a /dev/shm too small: Docker's default
    // is 64 MiB) is agreed: every rank raises the same (posix_segment.h), so
    // every rank returns null together and ordinary memory serves.
    if (e.category() != ErrorCategory::kTransport) throw;
    if (rank_ == 0) std::fprintf(stderr, "boostcomm: warning: no shared memory for a %zu-byte buffer: %s\n", bytes, e.what());
    return nullptr;
  }
}

void CommunicatorImpl::freeBuffer(void* buffer) {
  std::lock_guard lock(mutex_);
  // finalize() already released every registered buffer.
  if (buffer == nullptr || finalized_) return;
  BC_INVALID(engine_->idle(), rank_, "freeBuffer: collectives are still in flight (wait for them first)");
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
  // The thread takes the lock: stop it before finalising under the lock.
  engine_->setThreadEnabled(false);
  executor::EngineLock lock(*engine_);
  if (finalized_) return;
  finalized_ = true;
  std::exception_ptr pending;
  if (!engine_->failure()) {
    try {
      try {
        record_.finish(sequence_);
      } catch (const Error& e) {
        // Also said here: a finalize run by the destructor cannot raise.
        std::fprintf(stderr, "boostcomm: error: rank %d: %s\n", rank_, e.detail().c_str());
        throw;
      }
      engine_->drain(deadlineFor({}), "finalize", rank_);
    } catch (...) {
      pending = std::current_exception();
    }
  }
  engine_->abandon(std::make_exception_ptr(
      Error(ErrorCategory::kFinalized, rank_, "communicator finalized before this operation completed")));
  // After a failure the backend may still write into leased memory: keep it.
  if (!engine_->failure()) engine_->releaseMemory();
  cache_.clear();
  if (engine_->failure() || inspector_->unusable()) {
    // Peers' messages of this failed communicator may still arrive: keep
    // the backend communicators so they cannot land in a later one that
    // reuses a freed context id (transport.h). One context id per failed
    // communicator. (Found as the hang of test_mpi_crossnode on the
    // emulated cluster, where TCP delivers late.)
    for (transport::Transport* t : {transport_.get(), intra_.get(), inter_.get(), p2p_.get()}) {
      if (t != nullptr) t->keepBackendOnClose();
    }
  }
  engine_->stopCompletionSignals();  // before the splits that signal go
  intra_.reset();
  inter_.reset();
  p2p_.reset();
  for (void* p : heapBuffers_) std::free(p);
  heapBuffers_.clear();
  // The call status may live in the shared segment: stop reading it first.
  unwatch(inspector_.get());
  engine_->setCallStatus(nullptr);
  engine_->setWaitMonitor(nullptr);
  inspector_->closeChannel();  // tells the others of a mismatch seen here; before MPI goes
  transport_.reset();  // releases the shared segment and registered buffers
  if (onFinalize_) onFinalize_();
  if (pending) std::rethrow_exception(pending);
}

}  // namespace boostcomm::detail
