// CommunicatorImpl: the control plane of one communicator.
//
// A blocking call: validate -> route -> execute (run). The route (api/route.h)
// is direct (the backend's blocking collective), small (the shm engine's
// slots) or engine: choose an algorithm (call option, else a lookup in the
// selection map) -> fetch the Schedule from the cache (built once per
// shape) -> lease scratch -> bind an Execution -> progress every in-flight
// execution, in issue order, until this one is done. An asynchronous call
// (submit) always takes the engine route and returns a Work. After warm-up
// the blocking path performs no heap allocation. The call path is in
// communicator_impl.cc; the selection map (merged from table, strategy,
// tuned selection and overrides) and the route table derived from it in
// communicator_select.cc.
#pragma once

#include <array>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithms/node_layout.h"
#include "algorithms/registry.h"
#include "algorithms/selection.h"
#include "algorithms/selection_map.h"
#include "api/call.h"
#include "api/link_accounting.h"
#include "api/route.h"
#include "api/schedule_cache.h"
#include "boostcomm/communicator.h"
#include "boostcomm/tuning_cache.h"
#include "core/spin_mutex.h"
#include "executor/executor.h"
#include "executor/progress_engine.h"
#include "transport/transport.h"
#include "tuning/link_facts.h"
#include "tuning/model_selection.h"
#include "tuning/online_selection.h"
#include "watch/call_record.h"
#include "watch/stall_inspector.h"

namespace boostcomm::tuning {
class TunedSelection;
}

namespace boostcomm::detail {

class WorkState;

class CommunicatorImpl {
 public:
  // onFinalize runs after the transport is released (e.g. MPI_Finalize).
  CommunicatorImpl(std::unique_ptr<transport::Transport> transport, std::function<void()> onFinalize);
  ~CommunicatorImpl();

  int rank() const { return rank_; }
  int size() const { return size_; }

  void run(const CallArgs& args, const CallOptions& options);
  Work submit(const CallArgs& args, const CallOptions& options);

  bool test(WorkState& work);
  void wait(WorkState& work, std::optional<std::chrono::milliseconds> timeout);
  // Runs `callback` when `work` completes (see Work::onComplete).
  void onComplete(WorkState& work, std::function<void(std::exception_ptr)> callback);
  // One progress sweep, for clients that copy data between polls.
  void progressOnce();
  // Background progress (Communicator::setProgressThread).
  void setProgressThread(bool on);
  bool progressThread() const;
  // Clients that need background progress call this: starts the thread
  // unless BOOSTCOMM_PROGRESS is "caller" or MPI lacks MPI_THREAD_MULTIPLE
  // (then it warns once and progress stays caller-driven).
  void useProgressThread();

  // Point-to-point messages (communicator_p2p.cc).
  void enablePointToPoint();
  bool pointToPointEnabled() const;
  Work postMessage(bool isSend, void* data, std::size_t count, DataType dtype, int peer, int tag);

  void configureStrategy(const CommStrategy& strategy);
  // Communicator::abort(): not collective, any thread, returns within ~1 s.
  void abort();
  // The next call (sequence_) was rejected by this rank's own checks.
  void reportRejectedCall(Collective collective);
  // This communicator's deadline (Communicator::setTimeout); empty: none.
  void setTimeout(std::optional<std::chrono::milliseconds> timeout);
  // The flight recorder of this rank as JSON (Communicator::flightRecord).
  std::string flightRecord() const { return inspector_->flightJson(); }
  // Wire formats (communicator_wire.cc).
  void setWireFormat(WireFormat wire);
  WireFormat wireFormat() const;
  WireFormat wireFormatOf(std::size_t bytes, DataType dtype, const CallOptions& options) const;
  const algorithms::NodeLayout& layout() const { return layout_; }
  // Link accounting (boostcomm/link_stats.h); call with the lock held.
  LinkAccounting& links() { return links_; }
  LinkStats linkStats(bool reset);
  void setLinkAccounting(bool on);  // local; what replay's on/off comparison toggles
  std::vector<std::string> algorithms(Collective coll) const;
  // What a call of `bytes` without CallOptions::algorithm runs (a lookup in
  // the selection map; throws as the call would for a forced algorithm that
  // cannot run it). With BOOSTCOMM_TUNING_CACHE set, the cache is read at
  // the first collective call; before it, the answer is untuned.
  std::string selectedAlgorithm(Collective coll, std::size_t bytes) const;
  // RouteTable::backendUpTo of the current selection.
  std::optional<std::size_t> backendUpTo(Collective coll) const;
  // Executions that may be in flight at once: one per tag window. A call is
  // launched only when the oldest one in flight is fewer than this many
  // calls back, so no two in-flight calls share a window.
  std::size_t maxInFlight() const { return static_cast<std::size_t>(tagWindows_); }
  // Tags one call's schedule may use (CollectiveSpec::tagSpan).
  int tagSpan() const { return tagSpan_; }
  // Registered buffers (collective; see Communicator::allocateBuffer).
  void* allocateBuffer(std::size_t bytes);
  std::shared_ptr<void> allocateOwnedBuffer(std::size_t bytes);
  void freeBuffer(void* buffer);
  void finalize();
  bool finalized() const { return finalized_; }
  bool hasSharedMemory() const { return sharedMemory_; }
  transport::Transport& transport() { return *transport_; }

  // Tuned selection (src/tuning, docs/TUNING.md): measured winners and the
  // cost model, consulted for collectiveAlgorithm "auto" after explicit
  // algorithms and before the strategy's size rule and the table; it may also
  // carry a tuned chunk size. Not collective, but every rank must install the
  // same one (applyTuningCache, communicator_tuning.cc, does). Null removes it.
  void setTunedSelection(std::shared_ptr<const tuning::TunedSelection> tuned);
  // setTunedSelection of `cache` on this communicator (its layout, the cost
  // model from the cache's links; communicator_tuning.cc). No signature check.
  void installTuningCache(std::shared_ptr<const TuningCache> cache);
  // Collective while BOOSTCOMM_TUNING_CACHE is still unread (it reads it).
  std::shared_ptr<const tuning::TunedSelection> tunedSelection();
  // This communicator as a request without payload (rank, size, layout,
  // shared memory, chunk): what tuning checks applicability against.
  algorithms::CollectiveSpec describeSelf() const;

 private:
  // Raises the error that makes this communicator unusable (finalized,
  // failed, aborted, poisoned by a mismatch, a peer gone); inline: every
  // call asks it.
  void checkUsable() const {
    if (!finalized_ && !engine_->failed() && !inspector_->unusable()) [[likely]] return;
    raiseUnusable();
  }
  [[noreturn]] void raiseUnusable() const;
  const algorithms::AlgorithmInfo& choose(const algorithms::CollectiveSpec& spec, const CallOptions& options) const;
  std::shared_ptr<const executor::Schedule> schedule(const algorithms::AlgorithmInfo& algo,
                                                     const algorithms::CollectiveSpec& spec);
  void checkConsistency(const algorithms::CollectiveSpec& spec);
  // The full choice for a validated call (spec_): the first call's setup,
  // online selection's trials, the explicit or selected algorithm, the
  // sub-communicators of a hierarchical one, the wire format and the
  // consistency check.
  const algorithms::AlgorithmInfo& prepare(const CallArgs& args, const CallOptions& options);
  // The route of the validated call (spec_) and, for kEngine, its algorithm:
  // the route table where it settles the call, else prepare().
  struct Routed {
    Route route = Route::kEngine;
    const algorithms::AlgorithmInfo* algorithm = nullptr;  // kEngine only
  };
  [[gnu::always_inline]] inline Routed route(const CallArgs& args, const CallOptions& options, std::size_t bytes);
  // The one decision from an algorithm kind and the call's asks to a route.
  // `bytes`: spec_.payloadBytes().
  [[gnu::always_inline]] inline Route routeOf(algorithms::AlgorithmKind kind, const CallArgs& args, const CallOptions& options,
                std::size_t bytes) const;
  // validateAndDescribe into spec_ (returns its payload bytes); a call it
  // rejects is recorded as such in this rank's call status before the
  // error propagates.
  [[gnu::always_inline]] inline std::size_t validate(const CallArgs& args);
  // Merges the selection layers into selection_ and derives the route
  // table from it; after every change of a setting.
  void rebuildSelection();
  // The selection map of every layer, with `tuned` as the tuned layer (rebuildSelection: tuned_).
  algorithms::SelectionMap selectionWith(const tuning::TunedSelection* tuned) const;
  // Execution of the kDirect and kSmall routes: earlier asynchronous work
  // drained first, then runWithoutSchedule.
  [[gnu::always_inline]] inline void runLocal(Route route, const CallArgs& args, const CallOptions& options);
  // The kEngine route: the schedule launched and driven to completion.
  void runOnEngine(const algorithms::AlgorithmInfo& algo, const CallArgs& args, const CallOptions& options);
  // The validated call (spec_) on the kDirect or kSmall route, with nothing
  // in flight: recorded, fingerprinted and run.
  void runWithoutSchedule(Route route, const CallArgs& args, const CallOptions& options);
  // Whether a blocking call (`bytes`: its payload) may take the small
  // collectives (one node, slot payload at most smallAllreduceBytes_, no
  // explicit algorithm).
  bool takesSmall(const CallArgs& args, std::size_t bytes, const CallOptions& options) const;
  // The kSmall route's call on one node: the shm engine's
  // slots (throws kMismatch naming both sides when a peer's fingerprint
  // differs).
  void runSmall(const CallArgs& args, std::size_t count, const core::Fingerprint& fingerprint,
                const CallOptions& options);
  // The kDirect route's backend call (allreduce, broadcast, barrier).
  void runNativeBlocking(const CallArgs& args, std::size_t count, const core::Fingerprint& fingerprint);
  // The kDirect allreduce where node peers' status is unreadable
  // (several nodes, shm off), at most kCheckedAllreduceMaxBytes: the
  // transport's checked allreduce, the call's stamp in its data (kMismatch
  // naming both sides on every rank). False: not run (fingerprints off,
  // too large, or the transport has none).
  bool runCheckedAllreduce(const CallArgs& args, std::size_t count, const core::Fingerprint& fingerprint);
  // Binds spec_'s schedule to the call's buffers and queues it on the engine.
  std::uint64_t launch(const algorithms::AlgorithmInfo& algo, const CallArgs& args, const CallOptions& options,
                       bool blocking, std::shared_ptr<WorkState> work);
  std::optional<std::chrono::milliseconds> deadlineFor(const CallOptions& options) const;
  // Whether the call's deadline must be able to interrupt it: an explicit
  // one (CallOptions::timeout, BOOSTCOMM_TIMEOUT_MS set, setTimeout). Then
  // native collectives take the nonblocking form and raise Error{kTimeout};
  // under the built-in default the blocking form stays (it is faster) and the
  // watchdog ends the job at the deadline instead (watch/stall_inspector.h).
  bool interruptible(const CallOptions& options) const { return options.timeout.has_value() || explicitTimeout_; }
  // Where the model layer decides and the call's size class is still being
  // tried, the candidate to run (null: the map decides); takes the class's
  // decision when it is due.
  const algorithms::AlgorithmInfo* onlineChoice(const algorithms::CollectiveSpec& spec, const CallOptions& options);
  // The first hierarchical algorithm that can run `probe` (its layout), or null.
  static const algorithms::AlgorithmInfo* hierarchicalFor(const algorithms::CollectiveSpec& probe);
  // BOOSTCOMM_TUNING_CACHE at the first collective (collective); installTuned
  // is setTunedSelection with mutex_ held.
  void loadTuningFromEnv();
  // What the first collective call does before anything else (collective):
  // reads BOOSTCOMM_TUNING_CACHE and learns the link facts of a multi-node
  // layout (tuning/link_facts.h), rebuilding the selection from them.
  void firstCallSetup(std::optional<std::chrono::milliseconds> deadline = std::nullopt);
  bool firstCallPending() const { return configAgreementPending_ || tuningFromEnvPending_ || linkFactsPending_; }
  // First of firstCallSetup (collective): the settings that steer selection,
  // compared across ranks; a difference is Error{kMismatch} on every rank
  // naming the variable (communicator_config.cc).
  void agreeOnConfiguration(std::optional<std::chrono::milliseconds> deadline);
  // Every rank's `fields` words (api/agreement.h, gatherWordsPosted on every
  // rank) within `deadline`: Error{kTimeout} after it ("<what> hit its
  // timeout after N ms: <why>"), and the communicator is unusable (the
  // engine failed). agreeOnConfiguration's and allocateOwnedBuffer's exchanges.
  std::vector<long long> gatherWithin(const long long* mine, int fields,
                                      std::optional<std::chrono::milliseconds> deadline, const char* what,
                                      const char* why);
  std::vector<std::pair<const char*, std::string>> configurationItems() const;
  void installTuned(std::shared_ptr<const tuning::TunedSelection> tuned);
  // The wire format `spec` runs with under `algo` (kOff, kBf16, kFp16);
  // throws kInvalidArgument for an explicit CallOptions::wire it cannot honour.
  WireFormat resolveWire(const algorithms::CollectiveSpec& spec, const algorithms::AlgorithmInfo& algo,
                         const CallOptions& options) const;
  // kAuto: whether the cost model predicts the 16-bit wire faster for `algo`.
  WireFormat autoWire(const algorithms::CollectiveSpec& spec, const algorithms::AlgorithmInfo& algo) const;
  // Compares `wire` across ranks (collective); kMismatch on every rank if they differ.
  void agreeOnWire(WireFormat wire, const char* what);
  // Splits the intra-node and inter-node communicators on first use (collective).
  void ensureSubCommunicators();

  // Guards this whole object; the progress engine's thread takes it too (see
  // the thread-safety contract in include/boostcomm/communicator.h).
  mutable core::SpinMutex mutex_;
  std::unique_ptr<transport::Transport> transport_;
  // The splits of transport_ (see ensureSubCommunicators, enablePointToPoint):
  // declared before engine_, which they signal, so they outlive it.
  std::unique_ptr<transport::Transport> intra_;
  std::unique_ptr<transport::Transport> inter_;
  std::unique_ptr<transport::Transport> p2p_;  // point-to-point messages (enablePointToPoint)
  std::unique_ptr<executor::ProgressEngine> engine_;
  std::function<void()> onFinalize_;
  int rank_ = 0;
  int size_ = 1;
  bool finalized_ = false;

  // Settings read once from the tunables registry.
  algorithms::SelectionTable table_;          // built in (the "table" layer)
  algorithms::SelectionTable userSelection_;  // BOOSTCOMM_SELECTION's rules only (the "selection" layer)
  algorithms::SelectionMap selection_;  // every layer merged (rebuildSelection)
  RouteTable routes_;  // derived from selection_ (rebuildSelection)
  bool layoutDeclared_ = false;  // BOOSTCOMM_NODE_LAYOUT / _RANKS_PER_NODE / a topology file
  // selectedAlgorithm's preview of BOOSTCOMM_TUNING_CACHE before the first
  // collective reads it (read once; null: none applies).
  mutable std::optional<std::shared_ptr<const tuning::TunedSelection>> tuningPreview_;
  // Small-collective payloads up to this take kSmall (the shm engine's slot;
  // BOOSTCOMM_SHM_SMALL_BYTES, capped by the engine; 0 without an engine).
  std::size_t smallAllreduceBytes_ = 0;
  std::array<std::string, kNumCollectives> algoOverride_;
  std::chrono::milliseconds defaultTimeout_{0};
  bool explicitTimeout_ = false;  // a deadline set by the user, > 0 (interruptible())
  // Call status (core/call_status.h): in the shm segment where there is one,
  // so that the node's peers see it; else here, for the watchdog alone.
  core::CallStatus localStatus_;
  std::unique_ptr<StallInspector> inspector_;
  // What every route records of a call and checks around it: this rank's
  // status, the node peers' (read by the executor's header checks too) and
  // BOOSTCOMM_FINGERPRINTS (watch/call_record.h).
  CallRecord record_;
  std::size_t chunkBytes_ = 0;
  int maxChunks_ = 0;
  int hierMaxPieces_ = 16;  // BOOSTCOMM_HIER_MAX_PIECES
  bool checkConsistency_ = false;
  // The transport accepts shorter messages than a receive (MPI, and so its
  // splits): first messages carry the header inline (executor.h).
  bool inlineHeaders_ = false;
  bool sharedMemory_ = false;        // the transport has a shared-memory engine
  std::vector<void*> heapBuffers_;   // allocateBuffer without an engine
  Strategy strategy_ = Strategy::kAuto;
  std::size_t hierMinBytes_ = 0;
  std::string interAlgorithm_ = "ring";
  std::string intraAlgorithm_ = "auto";
  bool intraSharedMemory_ = false;  // the intra-node transport has a shm engine
  std::shared_ptr<const tuning::TunedSelection> tuned_;  // null: untuned
  bool configAgreementPending_ = true;  // settings not yet compared across ranks
  bool tuningFromEnvPending_ = false;  // BOOSTCOMM_TUNING_CACHE not read yet
  bool linkFactsPending_ = false;      // several nodes: the link not probed yet
  tuning::LinkFacts linkFacts_;        // the model's inputs beyond the layout
  WireFormat wire_ = WireFormat::kOff;  // BOOSTCOMM_WIRE_DTYPE or setWireFormat
  tuning::CostParams modelParams_;      // several nodes: what model_ was built from (autoWire)
  // Several nodes: the cost model's choice (the "model" layer), rebuilt with
  // the selection; null on one node.
  std::shared_ptr<const tuning::ModelSelection> model_;
  tuning::OnlineSelection online_{false, false, 0.0};
  tuning::OnlineSelection::Trial trial_;  // set by route() (prepare() or cleared): where this call's time goes

  algorithms::NodeLayout layout_;
  LinkAccounting links_;

  ScheduleCache cache_;
  algorithms::CollectiveSpec spec_;  // reused per call (keeps counts capacity)
  std::uint64_t sequence_ = 0;  // calls issued; every rank counts alike
  int tagSpan_ = executor::kMaxStepTag;  // tags per call
  int tagWindows_ = 1;                   // tag windows of tagSpan_ below the transport's maxTag
  ProgressMode progressMode_ = ProgressMode::kAuto;
};

// What a Work handle shares with the engine: completion (executor::OpState)
// and the communicator that progresses it.
class WorkState : public executor::OpState {
 public:
  CommunicatorImpl* comm = nullptr;
  WireFormat wire = WireFormat::kOff;  // the call's resolved wire format
};

}  // namespace boostcomm::detail
