// Autotuning: measure the algorithms of a collective on the running job,
// keep the winners in a tuning cache (boostcomm/tuning_cache.h), and let
// `collectiveAlgorithm = "auto"` use them (docs/TUNING.md).
//
// Every measurement counts the slowest rank (a max-allreduce of the per-rank
// times), so every rank sees the same numbers and picks the same winner.
// Native is always measured, and another algorithm replaces it only when it
// is faster by more than the noise margin (BOOSTCOMM_TUNE_MARGIN): a tuned
// choice is never slower than native by more than that noise.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "boostcomm/tuning_cache.h"
#include "boostcomm/types.h"

namespace boostcomm {

// Collective: the running job's signature (layout detection, no probes).
TuningSignature currentSignature(Communicator& comm);

// Collective: from now on, calls of `comm` whose strategy's collectiveAlgorithm
// is "auto" (the default) take the cache's winner for the nearest measured
// size, the cost model's choice for sizes the cache does not cover (unless
// BOOSTCOMM_TUNING_MODEL=0), and the selection table otherwise. Explicit
// algorithms (CallOptions, BOOSTCOMM_ALGO) still win. A cache whose signature
// differs from the job's is ignored; returns whether it was applied.
// Setting BOOSTCOMM_TUNING_CACHE=FILE does this at the communicator's first collective call.
bool applyTuningCache(Communicator& comm, const TuningCache& cache);
// Collective: rank 0 reads `path` and every rank gets the same result.
TuningCache::LoadResult loadTuningCache(Communicator& comm, const std::string& path, TuningCache& out);
// The cache `comm` uses (applied, or loaded from BOOSTCOMM_TUNING_CACHE); null when untuned.
// Collective while BOOSTCOMM_TUNING_CACHE has not been read yet (the first collective call reads it).
std::shared_ptr<const TuningCache> tuningCacheOf(Communicator& comm);
// Its tuned fusion bucket size; 0 when not tuned (GradientGroup then uses BOOSTCOMM_BUCKET_BYTES).
std::size_t tunedBucketBytes(Communicator& comm);

struct TuneOptions {
  // Untimed calls per candidate. With 2-5, shm's batch-sizing call at 256 KiB
  // (2 ranks) was still slow, its batches came out tiny and its samples
  // measured 580-815 us per call (32-42 us after 10-20 warm-up calls), so the
  // tuner rejected shm where it is the fastest (docs/TUNING.md).
  int warmup = 20;
  int samples = 0;         // timed calls per candidate; 0: BOOSTCOMM_TUNE_SAMPLES
  double margin = -1.0;    // noise margin; < 0: BOOSTCOMM_TUNE_MARGIN
  bool hierarchical = true;  // include topology-aware (hier) candidates
  bool probeLinks = true;    // measure the links for the cost model's predictions (detectTopology probes)
};

// Measures every candidate of one collective call on comm (collective).
class Tuner {
 public:
  Tuner(Communicator& comm, TuneOptions options = {});
  Communicator& communicator() { return comm_; }
  const TuneOptions& options() const { return options_; }
  const Topology& topology() const { return topology_; }

  // Candidates of `coll` here (native first).
  std::vector<std::string> candidates(Collective coll) const;
  // Times every candidate on the given buffers (they hold the last candidate's
  // result afterwards) and decides. ReduceOp is ignored by allgather/broadcast.
  TuningEntry tune(Collective coll, ConstView send, View recv, ReduceOp op);
  // The same on scratch buffers of `bytes` payload.
  TuningEntry tune(Collective coll, DataType dtype, std::size_t bytes);
  // Fusion bucket size: one GradientGroup step over float32 tensors of
  // `tensorCounts` elements (e.g. a model's gradients) for each candidate
  // bucket size; the bucket allreduces use the auto selection. Returns the best.
  std::size_t tuneBucketBytes(const std::vector<std::size_t>& tensorCounts,
                              const std::vector<std::size_t>& candidatesBytes,
                              std::map<std::size_t, double>* timesUs = nullptr);
  // Pipelining chunk size (ring and hier pieces), on an allreduce of `bytes`
  // with the auto-selected algorithm. Returns the best.
  std::size_t tuneChunkBytes(std::size_t bytes, const std::vector<std::size_t>& candidatesBytes,
                             std::map<std::size_t, double>* timesUs = nullptr);

 private:
  Communicator& comm_;
  TuneOptions options_;
  Topology topology_;
};

struct AutotuneResult {
  std::string selectedAlgorithm;
  std::string defaultAlgorithm;
  double speedup = 1.0;  // default's time / selected's time
  bool fromCache = false;  // decided by an earlier measurement, nothing re-timed
  TuningEntry entry;
};

// Performs the collective into `output` with the best algorithm for this
// call, measuring the candidates first unless the communicator's tuning
// cache already covers the size; the decision is then used by later "auto"
// calls of the same size class. autoStrategy: also consider topology-aware
// (hierarchical) algorithms; false: flat algorithms only.
AutotuneResult allreduceAutotune(Communicator& comm, ConstView input, View output, ReduceOp op,
                                 bool autoStrategy = true);
AutotuneResult allgatherAutotune(Communicator& comm, ConstView input, View output, bool autoStrategy = true);
AutotuneResult reduceScatterAutotune(Communicator& comm, ConstView input, View output, ReduceOp op,
                                     bool autoStrategy = true);

}  // namespace boostcomm
