// The tuning cache: what `boostcomm tune` and the *Autotune entry points
// measured on a job, kept as a JSON file (BOOSTCOMM_TUNING_CACHE) that
// `collectiveAlgorithm = "auto"` then uses (docs/TUNING.md). This header is
// the schema only; what measures and applies it on a communicator is
// boostcomm/autotune.h.
//
// Terms: a *candidate* is an algorithm that can run the call here
// (Communicator::algorithms(), native always among them); a *size class* is
// the payload size a measurement was taken at (calls of other sizes use the
// nearest measured size within a factor of two, in log scale); the *default*
// is what the selection table would pick without tuning; the *margin* is how
// much faster the winner was than the runner-up (1.05 = 5%).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

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

}  // namespace boostcomm
