// CommunicatorImpl, algorithm selection (declared in communicator_impl.h).
//
// Which algorithm a call runs, in order: the call's CallOptions::algorithm,
// BOOSTCOMM_ALGO or a forced strategy collectiveAlgorithm; else the tuned
// selection (measured winners and the cost model, src/tuning); else the
// strategy's hierarchical size rule; else the selection table; else the
// first algorithm that can run the call. Also here: the strategy and tuning
// settings that feed that order, and the size up to which blocking
// allreduces skip it altogether (the native fast path). The call path itself
// (validate, schedule, launch, progress) is in communicator_impl.cc.
#include <algorithm>
#include <climits>
#include <initializer_list>

#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/tunables.h"
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
  updateFastPath();
}

const AlgorithmInfo* CommunicatorImpl::strategyChoice(const CollectiveSpec& spec) const {
  if (strategy_ == Strategy::kFlat || !spec.layout || spec.layout->nodes() < 2) return nullptr;
  if (strategy_ == Strategy::kAuto && spec.payloadBytes() < hierMinBytes_) return nullptr;
  for (const AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective == spec.collective && algorithms::isHierarchical(a) && a.unsupportedReason(spec).empty())
      return &a;
  }
  return nullptr;
}

const AlgorithmInfo& CommunicatorImpl::choose(const CollectiveSpec& spec, const CallOptions& options) const {
  const std::string& forced =
      !options.algorithm.empty() ? options.algorithm : algoOverride_[static_cast<int>(spec.collective)];
  auto validNames = [&] {
    std::string names;
    for (const std::string& n : algorithms::algorithmNames(spec.collective)) names += (names.empty() ? "" : ", ") + n;
    return names;
  };
  if (!forced.empty()) {
    const AlgorithmInfo* algo = algorithms::findAlgorithm(spec.collective, forced);
    BC_INVALID(algo != nullptr, rank_,
               toString(spec.collective) << ": unknown algorithm '" << forced << "' (valid: " << validNames() << ")");
    const std::string why = algo->unsupportedReason(spec);
    BC_INVALID(why.empty(), rank_,
               toString(spec.collective) << ": algorithm '" << forced << "' cannot run this call: " << why);
    return *algo;
  }
  // Tuned choice (measured or modelled); it replaces the strategy's size
  // rule, except that strategy flat still forbids hierarchical algorithms.
  if (tuned_) {
    const AlgorithmInfo* t = tuned_->pick(spec.collective, spec.payloadBytes());
    if (t != nullptr && t->unsupportedReason(spec).empty() &&
        !(strategy_ == Strategy::kFlat && algorithms::isHierarchical(*t))) {
      return *t;
    }
  }
  if (const AlgorithmInfo* hier = strategyChoice(spec)) return *hier;
  const AlgorithmInfo* algo = table_.pickAlgorithm(spec.collective, spec.payloadBytes());
  if (algo != nullptr && algo->unsupportedReason(spec).empty()) return *algo;
  // The table's choice cannot run this call: first applicable algorithm, native first.
  for (const AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective == spec.collective && a.unsupportedReason(spec).empty()) return a;
  }
  core::raise(ErrorCategory::kInternal, rank_, "no algorithm can run this " + std::string(toString(spec.collective)));
}

void CommunicatorImpl::updateFastPath() {
  fastNativeMaxBytes_ = 0;
  if (!algoOverride_[static_cast<int>(Collective::kAllreduce)].empty() || checkConsistency_ ||
      defaultTimeout_.count() > 0) {
    return;
  }
  const auto& rules = table_.rules(Collective::kAllreduce);
  // The first rule must start at 0 and be native; hierarchical choices start
  // at hierMinBytes_ under strategy auto, and at 0 under topology_aware.
  if (rules.empty() || rules.front().minBytes != 0 || rules.front().resolved == nullptr ||
      rules.front().resolved->build != algorithms::buildNative) {
    return;
  }
  std::size_t limit = rules.front().maxBytes;
  const bool hierPossible = strategy_ != Strategy::kFlat && layout_.nodes() >= 2;
  if (hierPossible) {
    if (strategy_ == Strategy::kTopologyAware || hierMinBytes_ == 0) return;
    limit = std::min(limit, hierMinBytes_ - 1);
  }
  // A tuned selection may pick another algorithm for small allreduces.
  if (tuned_) limit = std::min(limit, tuned_->nativeOrUntunedUpToBytes(Collective::kAllreduce));
  fastNativeMaxBytes_ = std::min<std::size_t>(limit, static_cast<std::size_t>(INT_MAX));
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
  const std::string& forced = algoOverride_[static_cast<int>(coll)];
  if (!forced.empty()) return forced;
  CollectiveSpec probe = describeSelf();
  probe.collective = coll;
  probe.count = bytes;  // as uint8 elements: payloadBytes() == bytes for allreduce/broadcast
  probe.dtype = DataType::kUInt8;
  if (coll == Collective::kAllgather || coll == Collective::kReduceScatter)
    probe.count = bytes / static_cast<std::size_t>(size_);
  if (const AlgorithmInfo* hier = strategyChoice(probe)) return hier->name;
  return table_.pick(coll, bytes);
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
  tuned_ = std::move(tuned);
  const std::int64_t envChunk = std::max<std::int64_t>(1, core::tunableInt(core::kTunableRingChunkBytes));
  chunkBytes_ = tuned_ && tuned_->chunkBytes() > 0 ? tuned_->chunkBytes() : static_cast<std::size_t>(envChunk);
  cache_.clear();  // schedules depend on the chunk size
  updateFastPath();
}

std::shared_ptr<const tuning::TunedSelection> CommunicatorImpl::tunedSelection() {
  std::lock_guard lock(mutex_);
  if (tuningFromEnvPending_) loadTuningFromEnv();
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
  return probe;
}

}  // namespace boostcomm::detail
