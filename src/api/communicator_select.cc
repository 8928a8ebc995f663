// CommunicatorImpl, algorithm selection (declared in communicator_impl.h).
//
// Which algorithm a call runs: the call's CallOptions::algorithm, else one
// lookup in the selection map (algorithms/selection_map.h), merged here from
// the settings, highest layer first: BOOSTCOMM_ALGO or a forced strategy
// collectiveAlgorithm; the tuned selection (measured winners and the cost
// model, src/tuning); the strategy's hierarchical size rule; the selection
// table (built-in or BOOSTCOMM_SELECTION); else the first algorithm that can
// run the call. The map is rebuilt whenever a setting changes
// (configureStrategy, setTunedSelection, BOOSTCOMM_TUNING_CACHE) with the
// route table derived from it (api/route.h); choose() and selectedAlgorithm()
// only query it. The call path itself (validate, route, execute) is in
// communicator_impl.cc.
#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/tunables.h"
#include "topology/detect.h"
#include "tuning/tuned_selection.h"

namespace boostcomm::detail {

using algorithms::AlgorithmInfo;
using algorithms::CollectiveSpec;

void CommunicatorImpl::configureStrategy(const CommStrategy& strategy) {
  auto names = [](std::initializer_list<const char*> list) {
    std::string out;
    for (const char* n : list) out += (out.empty() ? "" : ", ") + std::string(n);
    return out;
  };
  BC_INVALID(strategy.intraAlgorithm == "auto" || strategy.intraAlgorithm == "shm" || strategy.intraAlgorithm == "ring",
             rank_,
             "configureCommStrategy: intra algorithm '"
                 << strategy.intraAlgorithm << "' is unknown (valid: " << names({"auto", "shm", "ring"}) << ")");
  const std::string inter = strategy.interAlgorithm == "auto" ? "ring" : strategy.interAlgorithm;
  BC_INVALID(inter == "ring" || inter == "rhd" || inter == "native", rank_,
             "configureCommStrategy: inter algorithm '" << strategy.interAlgorithm << "' is unknown (valid: "
                                                        << names({"auto", "ring", "rhd", "native"}) << ")");
  std::array<std::string, kNumCollectives> forced;
  if (strategy.collectiveAlgorithm != "auto") forced = algorithms::parseAlgoOverride(strategy.collectiveAlgorithm);
  std::lock_guard lock(mutex_);
  strategy_ = strategy.strategy;
  interAlgorithm_ = inter;
  intraAlgorithm_ = strategy.intraAlgorithm;
  if (strategy.collectiveAlgorithm != "auto") {
    algoOverride_ = forced;
  }
  cache_.clear();  // schedules depend on the inter-node algorithm
  rebuildSelection();
}

const AlgorithmInfo* CommunicatorImpl::hierarchicalFor(const CollectiveSpec& probe) {
  for (const AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective == probe.collective && algorithms::isHierarchical(a) && a.unsupportedReason(probe).empty())
      return &a;
  }
  return nullptr;
}

void CommunicatorImpl::rebuildSelection() {
  model_.reset();
  if (layout_.nodes() > 1) {
    tuning::CostParams params = tuning::paramsFor(size_, layout_.nodeSizes(), linkFacts_.coresPerNode, sharedMemory_,
                                                  LinkModel{}, linkFacts_.inter);
    params.chunkBytes = chunkBytes_;
    modelParams_ = params;
    model_ = std::make_shared<tuning::ModelSelection>(params, describeSelf(), strategy_ != Strategy::kFlat);
  }
  selection_ = selectionWith(tuned_.get());

  // The route table: payloads whose default is the backend's or shm's
  // collective route without choosing, except those online selection may
  // still try (they must reach onlineChoice), and every call while the first
  // call's setup is pending or the consistency check compares each call
  // (both in prepare).
  const std::size_t trialFloor =
      model_ && online_.enabled() ? tuning::OnlineSelection::kMinBytes - 1 : algorithms::kAnyBytes;
  routes_ = RouteTable(selection_, trialFloor, !checkConsistency_ && !configAgreementPending_);
}

algorithms::SelectionMap CommunicatorImpl::selectionWith(const tuning::TunedSelection* tuned) const {
  using algorithms::kAnyBytes;
  using algorithms::SelectionLayer;
  algorithms::SelectionMap map;
  CollectiveSpec probe = describeSelf();
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    probe.collective = coll;
    // Table: native where no rule matches, else the first matching rule
    // (laid down last to first, so earlier rules overwrite later ones).
    map.set(coll, SelectionLayer::kTable, 0, kAnyBytes, algorithms::findAlgorithm(coll, "native"));
    const std::vector<algorithms::SelectionRule>& rules = table_.rules(coll);
    for (auto r = rules.rbegin(); r != rules.rend(); ++r)
      map.set(coll, SelectionLayer::kTable, r->minBytes, r->maxBytes, r->resolved);
    // Model (several nodes): the cost model over every size, refined by the
    // winners of online selection.
    if (model_) {
      for (const tuning::ModelRule& r : model_->rules(coll))
        map.set(coll, SelectionLayer::kModel, r.minBytes, r.maxBytes, r.algorithm);
      for (const tuning::OnlineSelection::Winner& w : online_.winners()) {
        if (w.collective == coll) map.set(coll, SelectionLayer::kModel, w.minBytes, w.maxBytes, w.algorithm);
      }
    }
    // Strategy: hierarchical at every size (topology_aware) or from
    // BOOSTCOMM_HIER_MIN_BYTES > 0 up (auto), where this layout can run it
    // at all; otherwise, under auto, the model decides.
    if (strategy_ == Strategy::kTopologyAware || (strategy_ == Strategy::kAuto && hierMinBytes_ > 0)) {
      if (const AlgorithmInfo* hier = hierarchicalFor(probe)) {
        map.set(coll, SelectionLayer::kStrategy, strategy_ == Strategy::kAuto ? hierMinBytes_ : 0, kAnyBytes, hier);
      }
    }
    // Tuned: above the strategy's size rule, except that strategy flat
    // still forbids hierarchical algorithms.
    if (tuned != nullptr) {
      for (const tuning::TunedSelection::Rule& r : tuned->rules(coll)) {
        if (r.algorithm == nullptr || (strategy_ == Strategy::kFlat && algorithms::isHierarchical(*r.algorithm)))
          continue;
        map.set(coll, SelectionLayer::kTuned, r.minBytes, r.maxBytes, r.algorithm);
      }
    }
    // BOOSTCOMM_SELECTION: its ranges, above the tuned cache (first rule wins).
    const std::vector<algorithms::SelectionRule>& user = userSelection_.rules(coll);
    for (auto r = user.rbegin(); r != user.rend(); ++r)
      map.set(coll, SelectionLayer::kSelection, r->minBytes, r->maxBytes, r->resolved);
    if (const std::string& forced = algoOverride_[static_cast<std::size_t>(c)]; !forced.empty())
      map.set(coll, SelectionLayer::kForced, 0, kAnyBytes, algorithms::findAlgorithm(coll, forced));
  }
  return map;
}

const AlgorithmInfo* CommunicatorImpl::onlineChoice(const CollectiveSpec& spec, const CallOptions& options) {
  trial_ = {};
  if (!model_ || !online_.enabled() || !options.algorithm.empty()) return nullptr;
  if (selection_.at(spec.collective, spec.payloadBytes()).topLayer() != algorithms::SelectionLayer::kModel)
    return nullptr;
  const AlgorithmInfo* candidate = nullptr;
  // The communicator's wire format (BOOSTCOMM_WIRE_DTYPE, setWireFormat: the
  // same on every rank), where this call could carry it. Not a call's own
  // CallOptions::wire: a class's winner serves all its calls.
  const bool wireApplies = algorithms::wireCollective(spec.collective) && spec.dtype == DataType::kFloat32;
  const WireFormat wire = wireApplies ? wire_ : WireFormat::kOff;
  if (online_.next(spec, *model_, wire, candidate, trial_)) {
    // Every rank reaches this call with its trials issued; finish them (a
    // peer may wait for our part) and agree.
    engine_->drain(deadlineFor(options), "online selection", rank_);
    online_.decide(spec.collective, *transport_);
    rebuildSelection();
    online_.next(spec, *model_, wire, candidate, trial_);  // this call opens the next epoch
  }
  return candidate;
}

void CommunicatorImpl::firstCallSetup(std::optional<std::chrono::milliseconds> deadline) {
  // Before the tuning cache: its broadcast from rank 0 is itself collective,
  // and only ranks with BOOSTCOMM_TUNING_CACHE set would enter it.
  if (configAgreementPending_) agreeOnConfiguration(deadline);
  if (tuningFromEnvPending_) loadTuningFromEnv();
  if (linkFactsPending_) {
    linkFactsPending_ = false;
    linkFacts_ = tuning::learnLinkFacts(*transport_, layout_);
    if (online_.logging() && rank_ == 0) {
      std::fprintf(stderr, "[boostcomm] link facts (%s nodes): inter-node %s %.1f us, %.3f GB/s; %d cores per node; "
                   "probe took %.1f ms\n", layout_.describe().c_str(), linkFacts_.inter.measured ? "measured" : "default",
                   linkFacts_.inter.latencyUs, linkFacts_.inter.bandwidthGBps, linkFacts_.coresPerNode,
                   linkFacts_.probeMs);
    }
    rebuildSelection();
  }
}

const AlgorithmInfo& CommunicatorImpl::choose(const CollectiveSpec& spec, const CallOptions& options) const {
  if (!options.algorithm.empty()) return algorithms::explicitAlgorithm(spec, options.algorithm);
  return selection_.choose(spec);
}

std::vector<std::string> CommunicatorImpl::algorithms(Collective coll) const {
  // Those that can run here: a small payload on this world size (the limits
  // that depend on the payload, such as native's int counts, are checked per call).
  CollectiveSpec probe = describeSelf();
  probe.collective = coll;
  std::vector<std::string> names;
  for (const AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective == coll && a.unsupportedReason(probe).empty()) names.emplace_back(a.name);
  }
  return names;
}

std::string CommunicatorImpl::selectedAlgorithm(Collective coll, std::size_t bytes) const {
  std::lock_guard lock(mutex_);
  CollectiveSpec probe = describeSelf();
  probe.collective = coll;
  probe.dtype = DataType::kUInt8;  // payloadBytes() == bytes (allgather/reduce_scatter: rounded to whole blocks)
  probe.count = bytes;
  if (coll == Collective::kAllgather || coll == Collective::kReduceScatter)
    probe.count = bytes / static_cast<std::size_t>(size_);
  // BOOSTCOMM_TUNING_CACHE is read (collectively: rank 0 reads the file) at
  // the first collective call; before it, what that read will install where
  // this rank can tell alone: one detected node, whose signature it knows
  // (every rank on this host), and the same file (read once, here).
  if (tuningFromEnvPending_ && layout_.nodes() == 1 && !layoutDeclared_) {
    if (!tuningPreview_) {
      Topology self;
      self.worldSize = size_;
      self.nodes = 1;
      self.ranksPerNode = {size_};
      self.hostnames = {topology::thisHostname()};
      tuningPreview_ = tuning::tunedSelectionPreview(signatureOf(self), describeSelf());
    }
    if (*tuningPreview_) return selectionWith(tuningPreview_->get()).choose(probe).name;
  }
  return selection_.choose(probe).name;
}

std::optional<std::size_t> CommunicatorImpl::backendUpTo(Collective coll) const {
  std::lock_guard lock(mutex_);
  return routes_.backendUpTo(coll);
}

void CommunicatorImpl::setTunedSelection(std::shared_ptr<const tuning::TunedSelection> tuned) {
  std::lock_guard lock(mutex_);
  installTuned(std::move(tuned));
}

void CommunicatorImpl::loadTuningFromEnv() {
  checkUsable();
  installTuned(tuning::tunedSelectionFromEnv(*transport_, describeSelf()));
}

void CommunicatorImpl::installTuned(std::shared_ptr<const tuning::TunedSelection> tuned) {
  tuningFromEnvPending_ = false;  // an explicit selection replaces the env's
  tuningPreview_.reset();         // selectedAlgorithm reads the real one from now on
  tuned_ = std::move(tuned);
  const std::int64_t envChunk = core::tunableInt(core::kTunableRingChunkBytes);
  chunkBytes_ = tuned_ && tuned_->chunkBytes() > 0 ? tuned_->chunkBytes() : static_cast<std::size_t>(envChunk);
  cache_.clear();  // schedules depend on the chunk size
  rebuildSelection();
}

std::shared_ptr<const tuning::TunedSelection> CommunicatorImpl::tunedSelection() {
  std::lock_guard lock(mutex_);
  // Collective only where it was before the configuration agreement (a
  // cache or link facts to read): callers may ask on one rank.
  if (tuningFromEnvPending_ || linkFactsPending_) firstCallSetup(deadlineFor({}));
  return tuned_;
}

CollectiveSpec CommunicatorImpl::describeSelf() const {
  CollectiveSpec probe;
  probe.rank = rank_;
  probe.size = size_;
  probe.sharedMemory = sharedMemory_;
  probe.layout = &layout_;
  probe.chunkBytes = chunkBytes_;
  probe.maxChunks = maxChunks_;
  probe.tagSpan = tagSpan_ - 1;  // as prepare(): the last tag is the fingerprint header's
  return probe;
}

}  // namespace boostcomm::detail
