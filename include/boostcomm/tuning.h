// Tuning: measure the algorithms of a collective on the running job, keep
// the winners in a persistent cache, and let `collectiveAlgorithm = "auto"`
// use them (docs/TUNING.md).
//
// Terms: a *candidate* is an algorithm that can run the call here
// (Communicator::algorithms(), native always among them); a *size class* is
// the payload size a measurement was taken at (calls of other sizes use the
// nearest measured size within a factor of two, in log scale); the *default*
// is what the selection table would pick without tuning; the *margin* is how
// much faster the winner was than the runner-up (1.05 = 5%).
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
#include <optional>
#include <string>
#include <vector>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"
#include "boostcomm/topology.h"
#include "boostcomm/types.h"

namespace boostcomm {

// One measured candidate: median over samples of the slowest rank's time.
struct CandidateTime {
  std::string algorithm;
  double timeUs = 0.0;
  double predictedUs = 0.0;  // the cost model's estimate (0: no estimate)
};

// The tuning decision of one (collective, dtype, size class).
struct TuningEntry {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  std::size_t bytes = 0;            // payload (nccl-tests convention, as in bench)
  std::string winner;               // the algorithm "auto" uses
  std::string defaultAlgorithm;     // the selection table's choice
  std::string modelChoice;          // the cost model's choice
  double margin = 1.0;              // runner-up time / winner time
  std::vector<CandidateTime> candidates;  // native first

  const CandidateTime* find(const std::string& algorithm) const;
  double winnerUs() const;
  // Time of native / of the default divided by the winner's (> 1: tuning helps).
  double speedupOverNative() const;
  double speedupOverDefault() const;
};

// Where a tuning cache is valid: the same job layout on the same hosts with
// the same library version. A cache from anything else is ignored.
struct TuningSignature {
  int worldSize = 0;
  std::vector<int> ranksPerNode;
  std::string hostsHash;  // FNV-1a of the nodes' hostnames, hex
  std::string version;    // versionString()

  std::string describe() const;  // "2 ranks, 1 node (2), hosts 5e1c..., boostcomm 0.1.0"
  bool operator==(const TuningSignature&) const = default;
};
// Collective: the running job's signature (layout detection, no probes).
TuningSignature currentSignature(Communicator& comm);
TuningSignature signatureOf(const Topology& topo);

class TuningCache {
 public:
  enum class LoadStatus { kLoaded, kMissing, kMismatch, kCorrupt };
  struct LoadResult {
    LoadStatus status = LoadStatus::kMissing;
    std::string notice;  // one line for the user ("" when loaded)
  };

  TuningCache() = default;
  explicit TuningCache(TuningSignature signature) : signature_(std::move(signature)) {}

  const TuningSignature& signature() const { return signature_; }
  // Link parameters the entries were measured with (feed the cost model for
  // sizes the cache does not cover).
  LinkModel intraNode;
  LinkModel interNode;
  int coresPerNode = 0;
  // Tuned knobs; 0 = not tuned.
  std::size_t bucketBytes = 0;  // fusion bucket size (GradientGroup / planBuckets)
  std::size_t chunkBytes = 0;   // pipelining chunk (BOOSTCOMM_RING_CHUNK_BYTES; hier pieces use it too)
  std::map<std::size_t, double> bucketTimesUs;  // candidate bucket size -> time
  std::map<std::size_t, double> chunkTimesUs;   // candidate chunk size -> time
  // Who wrote the file ("command", "hostname", "date", set by `boostcomm tune`),
  // kept as the JSON's "meta" object: informational (charts title with it),
  // not part of the signature.
  std::map<std::string, std::string> meta;

  // Replaces the entry of the same (collective, dtype, bytes).
  void upsert(TuningEntry entry);
  const std::vector<TuningEntry>& entries() const { return entries_; }
  // The entry measured closest (in log scale, within 2x) to `bytes`, preferring
  // the same dtype, then the same element size; null when none is close.
  const TuningEntry* lookup(Collective coll, DataType dtype, std::size_t bytes) const;

  std::string toJson() const;
  // Throws Error{kInvalidArgument} naming what is wrong.
  static TuningCache fromJson(const std::string& text);
  void save(const std::string& path) const;
  // Reads `path`; accepts it only when its signature equals `expected`.
  // Never throws for a missing, foreign or corrupt file: the result says why.
  static LoadResult load(const std::string& path, const TuningSignature& expected, TuningCache& out);
  static LoadResult parse(const std::string& text, const std::string& path, const TuningSignature& expected,
                          TuningCache& out);

 private:
  TuningSignature signature_;
  std::vector<TuningEntry> entries_;
};

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
