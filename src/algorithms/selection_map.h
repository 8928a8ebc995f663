// The selection map: per collective, byte ranges -> the algorithm each
// selection layer names there. The communicator merges its settings into
// one map whenever a setting changes; choosing the algorithm of a call, the
// route table (api/route.h) and Communicator::selectedAlgorithm are lookups in
// it, so what is reported is what runs.
//
// Layers, lowest first; a higher layer wins wherever it names an algorithm:
//   table      the built-in table (measured on one host; docs/ALGORITHMS.md)
//   model      several nodes without a tuning cache: the cost model fed by the
//              link facts learnt at the first call (tuning/model_selection.h),
//              refined per size class by timing its leading candidates in
//              place (tuning/online_selection.h); empty on one node
//   strategy   the strategy's hierarchical size rule (BOOSTCOMM_STRATEGY, BOOSTCOMM_HIER_MIN_BYTES)
//   tuned      the tuned selection: measured winners and the cost model (src/tuning)
//   selection  BOOSTCOMM_SELECTION, in the byte ranges its rules name (an
//              explicit user rule beats a measurement; outside its ranges the
//              layers below decide)
//   forced     BOOSTCOMM_ALGO, or CommStrategy::collectiveAlgorithm
// CallOptions::algorithm is not a setting but part of the call: it stays
// above the map (explicitAlgorithm below checks it by the forced rule).
//
// Lookup rule (the one fallback): every range keeps each layer's choice, not
// only the winner, because whether an algorithm can run a call depends in
// part on the payload (native's int counts), known only per call. The
// highest layer whose algorithm can run the call wins; a forced algorithm
// that cannot run it is an error (the user asked for exactly it); when no
// layer's algorithm can run it, the first registered one that can (native
// first). Rejected: one merged winner per range (as UCC's score map keeps) —
// each caller then needs its own fallback for a winner that cannot run a
// given payload, which is how three diverging derivations came about.
//
// Every rank must merge the same layers: the choice depends only on the
// collective, the payload and the settings.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/registry.h"

namespace boostcomm::algorithms {

enum class SelectionLayer : std::uint8_t { kTable, kModel, kStrategy, kTuned, kSelection, kForced };
inline constexpr int kNumSelectionLayers = 6;
const char* toString(SelectionLayer layer);

inline constexpr std::size_t kAnyBytes = static_cast<std::size_t>(-1);

struct SelectionRange {
  std::size_t minBytes = 0;
  std::size_t maxBytes = kAnyBytes;  // inclusive
  // Indexed by SelectionLayer; null: the layer names nothing here.
  std::array<const AlgorithmInfo*, kNumSelectionLayers> byLayer{};

  // The highest layer that names an algorithm here (null when none does).
  const AlgorithmInfo* top() const;
  // That layer (kTable when none names one).
  SelectionLayer topLayer() const;
};

class SelectionMap {
 public:
  // Every collective: one range of all payloads that no layer names yet.
  SelectionMap();

  // Within [minBytes, maxBytes] of `coll`, `layer` names `algorithm` (null:
  // nothing), replacing what that layer named there before.
  void set(Collective coll, SelectionLayer layer, std::size_t minBytes, std::size_t maxBytes,
           const AlgorithmInfo* algorithm);
  // The range holding payloads of `bytes`.
  const SelectionRange& at(Collective coll, std::size_t bytes) const;
  const std::vector<SelectionRange>& ranges(Collective coll) const { return ranges_[static_cast<int>(coll)]; }

  // The algorithm for `spec` (at spec.payloadBytes()) by the lookup rule.
  // Throws kInvalidArgument when a forced algorithm cannot run it.
  const AlgorithmInfo& choose(const CollectiveSpec& spec) const;
  // Largest B such that `algorithm` is the top choice for every payload in
  // [0, B] of its collective; 0 when it is not the top choice at 0 bytes.
  std::size_t topChoiceUpTo(const AlgorithmInfo& algorithm) const;
  // The same for a set: every top choice in [0, B] is one of `algorithms`
  // (null entries ignored), all of collective `coll`.
  std::size_t topChoiceUpTo(Collective coll, std::initializer_list<const AlgorithmInfo*> algorithms) const;
  // "allreduce: [0, 4095] native (table); [4096, inf] ring (tuned, table: shm)" ...
  std::string describe() const;

 private:
  std::array<std::vector<SelectionRange>, kNumCollectives> ranges_;
};

// CallOptions::algorithm: the registry entry named `name`, which must run
// `spec`; throws kInvalidArgument naming the valid names or why it cannot.
const AlgorithmInfo& explicitAlgorithm(const CollectiveSpec& spec, std::string_view name);

}  // namespace boostcomm::algorithms
