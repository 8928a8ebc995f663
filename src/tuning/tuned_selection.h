// The tuned selection a communicator consults for collectiveAlgorithm "auto":
// per collective, byte ranges -> algorithm, built once from a tuning cache
// (measured winners) and the cost model (sizes the cache does not cover).
//
// Ranges: a measured size s covers payloads nearest to it in log scale, i.e.
// up to the geometric mean with the next measured size, and at most a factor
// of two beyond the first and last measured sizes. Outside that, the cost
// model decides when enabled (BOOSTCOMM_TUNING_MODEL=1, the default); a
// range with no algorithm falls through to the strategy and the table.
// The rules are computed once, so the per-call cost is a short range scan.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/node_layout.h"
#include "algorithms/registry.h"
#include "boostcomm/tuning_cache.h"
#include "transport/transport.h"
#include "tuning/cost_model.h"

namespace boostcomm::tuning {

class TunedSelection {
 public:
  struct Rule {
    std::size_t minBytes = 0;
    std::size_t maxBytes = 0;  // inclusive
    const algorithms::AlgorithmInfo* algorithm = nullptr;  // null: not tuned (strategy and table decide)
    bool measured = false;     // from the cache (else from the cost model)
  };

  // `probe` describes the communicator (size, layout, shared memory) for the
  // applicability checks; its collective/count are overwritten.
  TunedSelection(std::shared_ptr<const TuningCache> cache, const CostParams& params,
                 const algorithms::CollectiveSpec& probe, bool modelFallback);

  const TuningCache& cache() const { return *cache_; }
  std::shared_ptr<const TuningCache> sharedCache() const { return cache_; }
  const std::vector<Rule>& rules(Collective coll) const { return rules_[static_cast<int>(coll)]; }
  std::size_t chunkBytes() const { return cache_->chunkBytes; }

 private:
  std::shared_ptr<const TuningCache> cache_;
  std::array<std::vector<Rule>, kNumCollectives> rules_;
};

// The cost-model parameters of a communicator that uses `cache`.
CostParams paramsForCache(const TuningCache& cache, const algorithms::NodeLayout& layout, int worldSize,
                          bool sharedMemory, std::size_t chunkBytes);

// The tuned selection of `cache` for the communicator `probe` describes (its
// layout, size, shared memory, chunk; the cost model from the cache's links,
// as a fallback unless BOOSTCOMM_TUNING_MODEL=0).
std::shared_ptr<const TunedSelection> tunedSelectionOf(std::shared_ptr<const TuningCache> cache,
                                                       const algorithms::CollectiveSpec& probe);

// BOOSTCOMM_TUNING_CACHE, read when a communicator is created. Collective over
// `world`: rank 0 reads the file and broadcasts it, every rank checks it
// against the job's signature, so all ranks decide alike. Prints one notice
// on rank 0 when the file is foreign or corrupt; null when unset or unusable.
std::shared_ptr<const TunedSelection> tunedSelectionFromEnv(transport::Transport& world,
                                                            const algorithms::CollectiveSpec& probe);

// What tunedSelectionFromEnv will return, asked before it ran (local, no
// message): this rank reads BOOSTCOMM_TUNING_CACHE itself and checks it
// against `expected`, the job's signature as this rank knows it. Null when
// unset, unreadable or foreign. Communicator::selectedAlgorithm's answer
// before the first collective call.
std::shared_ptr<const TunedSelection> tunedSelectionPreview(const TuningSignature& expected,
                                                            const algorithms::CollectiveSpec& probe);

// Text of `path` on rank 0, broadcast to every rank of `world` (collective).
// nullopt (on every rank) when rank 0 cannot read it.
std::optional<std::string> readOnRankZero(transport::Transport& world, const std::string& path);

}  // namespace boostcomm::tuning
