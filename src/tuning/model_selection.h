// The cost model as a selection: per collective, byte ranges -> the
// algorithm the model predicts fastest for this job's layout and links.
//
// Used (a) as the default on layouts of several nodes when no tuning cache
// is loaded — the built-in table was measured on one host and says nothing
// about a network — and (b) by TunedSelection for the sizes a cache does not
// cover. Sampled once at payloads growing by 2^(1/4) (~19%) up to 2^40
// bytes, so a lookup is a range scan.
//
// Trial candidates: where the model is least sure, the communicator times
// the leading candidates in place (tuning/online_selection.h). For a size the
// candidates are native (the backend's own collective, the baseline the
// selection must never lose to) and the model's best ones predicted within
// kTrialSpread of its best, at most kMaxTrialCandidates in all (on a 2 x 1
// link rd, rhd and ring were within 10% of each other where the model had
// them 1.3x apart: three of them are worth three calls each).
// With a 16-bit wire on the communicator (BOOSTCOMM_WIRE_DTYPE, set_wire) the
// schedules that carry it are predicted with it, and native, which cannot,
// is tried only where it too is predicted within kTrialSpread of the best:
// where the link bounds the call native moves twice the bytes, and its one
// trial of a 25 MiB DDP bucket between two emulated nodes cost 580 ms where
// the winner took 170 (the steps holding the trials ran at 1.33x gloo's
// speed against 1.65x after them).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "tuning/cost_model.h"

namespace boostcomm::tuning {

struct ModelRule {
  std::size_t minBytes = 0;
  std::size_t maxBytes = 0;  // inclusive
  const algorithms::AlgorithmInfo* algorithm = nullptr;
};

// Names of the algorithms of `coll` that can run on the communicator `probe`
// describes (a one-element payload; per-payload limits are checked per call).
std::vector<std::string> runnableAlgorithms(const algorithms::CollectiveSpec& probe, Collective coll);

// The model's choice over [lo, hi] of `coll`, as consecutive ranges passed to
// `emit` (merged where the choice does not change). Native keeps a range
// unless another candidate is predicted faster by more than `nativeMargin`.
void sampleModel(const CostParams& params, Collective coll, const std::vector<std::string>& candidates,
                 std::size_t lo, std::size_t hi, double nativeMargin,
                 const std::function<void(std::size_t, std::size_t, const algorithms::AlgorithmInfo*)>& emit);

class ModelSelection {
 public:
  static constexpr int kMaxTrialCandidates = 4;
  static constexpr double kTrialSpread = 2.0;

  // hierarchical = false: hierarchical algorithms are not candidates
  // (strategy flat).
  ModelSelection(const CostParams& params, const algorithms::CollectiveSpec& probe, bool hierarchical = true);

  const std::vector<ModelRule>& rules(Collective coll) const { return rules_[static_cast<int>(coll)]; }
  const CostParams& params() const { return params_; }
  // Candidates worth timing at `bytes` of `coll`, fastest predicted first
  // (native among them, except where a wire puts it beyond
  // kTrialSpread x the best); fewer than two: nothing to try.
  // `wire`: the communicator's wire format (kOff, kBf16, kFp16, kAuto).
  std::vector<const algorithms::AlgorithmInfo*> trialCandidates(Collective coll, std::size_t bytes,
                                                                WireFormat wire = WireFormat::kOff) const;
  // The model's fastest predicted time at `bytes` of `coll`, in microseconds
  // (`wire`: as for trialCandidates).
  double bestPredictedUs(Collective coll, std::size_t bytes, WireFormat wire = WireFormat::kOff) const;

 private:
  // `name`'s predicted time, with `wire` where the collective carries one.
  double predictWith(Collective coll, const std::string& name, std::size_t bytes, WireFormat wire) const;
  CostParams params_;
  std::array<std::vector<std::string>, kNumCollectives> candidates_;
  std::array<std::vector<ModelRule>, kNumCollectives> rules_;
};

}  // namespace boostcomm::tuning
