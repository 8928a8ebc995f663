#include "tuning/model_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithms/selection.h"

namespace boostcomm::tuning {
namespace {

constexpr double kModelStep = 1.189207115;  // 2^(1/4)
constexpr double kModelTopBytes = 1099511627776.0;
// The model is coarse: it moves away from native only when it predicts a
// gain above 10% (the same margin as the tuned selection's model fallback).
constexpr double kNativeMargin = 0.10;

}  // namespace

std::vector<std::string> runnableAlgorithms(const algorithms::CollectiveSpec& probe, Collective coll) {
  algorithms::CollectiveSpec spec = probe;
  spec.collective = coll;
  spec.count = 1;
  std::vector<std::string> names;
  for (const algorithms::AlgorithmInfo& a : algorithms::allAlgorithms()) {
    if (a.collective == coll && a.unsupportedReason(spec).empty()) names.emplace_back(a.name);
  }
  return names;
}

void sampleModel(const CostParams& params, Collective coll, const std::vector<std::string>& candidates,
                 std::size_t lo, std::size_t hi, double nativeMargin,
                 const std::function<void(std::size_t, std::size_t, const algorithms::AlgorithmInfo*)>& emit) {
  if (lo > hi) return;
  const algorithms::AlgorithmInfo* current = nullptr;
  std::size_t currentLo = lo;
  std::size_t at = lo;
  while (true) {
    const double next = std::max(static_cast<double>(at) * kModelStep, static_cast<double>(at) + 1.0);
    const std::size_t end = next > kModelTopBytes ? hi : std::min(hi, static_cast<std::size_t>(next) - 1);
    const Prediction best = predictBest(params, coll, std::max<std::size_t>(at, 1), candidates, nativeMargin);
    const algorithms::AlgorithmInfo* algo = algorithms::findAlgorithm(coll, best.algorithm);
    if (algo != current && at > lo) {
      emit(currentLo, at - 1, current);
      currentLo = at;
    }
    current = algo;
    if (end == hi) break;
    at = end + 1;
  }
  emit(currentLo, hi, current);
}

ModelSelection::ModelSelection(const CostParams& params, const algorithms::CollectiveSpec& probe, bool hierarchical)
    : params_(params) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    std::vector<std::string>& names = candidates_[static_cast<std::size_t>(c)];
    names = runnableAlgorithms(probe, coll);
    if (!hierarchical) {
      std::erase_if(names, [coll](const std::string& n) {
        const algorithms::AlgorithmInfo* a = algorithms::findAlgorithm(coll, n);
        return a != nullptr && algorithms::isHierarchical(*a);
      });
    }
    if (coll == Collective::kBarrier) continue;
    std::vector<ModelRule>& rules = rules_[static_cast<std::size_t>(c)];
    sampleModel(params_, coll, candidates_[static_cast<std::size_t>(c)], 0, algorithms::kOpenEnd, kNativeMargin,
                [&rules](std::size_t lo, std::size_t hi, const algorithms::AlgorithmInfo* algo) {
                  rules.push_back({lo, hi, algo});
                });
  }
}

double ModelSelection::predictWith(Collective coll, const std::string& name, std::size_t bytes, WireFormat wire) const {
  const std::size_t at = std::max<std::size_t>(bytes, 1);
  const double plain = predictUs(params_, coll, name, at);
  if (wire == WireFormat::kOff) return plain;
  // kAuto sends 16-bit where that is predicted faster: the better of both.
  // (predictUs with a wire is the plain time where the collective or the
  // algorithm cannot carry it.)
  const double packed = predictUs(params_, coll, name, at, wire == WireFormat::kAuto ? WireFormat::kBf16 : wire);
  return wire == WireFormat::kAuto ? std::min(plain, packed) : packed;
}

double ModelSelection::bestPredictedUs(Collective coll, std::size_t bytes, WireFormat wire) const {
  double best = std::numeric_limits<double>::infinity();
  for (const std::string& name : candidates_[static_cast<int>(coll)]) {
    best = std::min(best, predictWith(coll, name, bytes, wire));
  }
  return best;
}

std::vector<const algorithms::AlgorithmInfo*> ModelSelection::trialCandidates(Collective coll, std::size_t bytes,
                                                                              WireFormat wire) const {
  if (!algorithms::wireCollective(coll)) wire = WireFormat::kOff;
  std::vector<std::pair<double, const algorithms::AlgorithmInfo*>> ranked;
  for (const std::string& name : candidates_[static_cast<int>(coll)]) {
    const double t = predictWith(coll, name, bytes, wire);
    if (std::isfinite(t)) ranked.emplace_back(t, algorithms::findAlgorithm(coll, name));
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<const algorithms::AlgorithmInfo*> out;
  const algorithms::AlgorithmInfo* native = algorithms::findAlgorithm(coll, "native");
  // Native is the baseline the selection must never lose to, so it is always
  // tried, except where a wire puts it beyond kTrialSpread of the best.
  const bool nativeTried =
      native != nullptr &&
      (wire == WireFormat::kOff || ranked.empty() ||
       predictUs(params_, coll, "native", std::max<std::size_t>(bytes, 1)) <= ranked.front().first * kTrialSpread);
  if (nativeTried) out.push_back(native);
  for (const auto& [t, algo] : ranked) {
    if (static_cast<int>(out.size()) >= kMaxTrialCandidates || t > ranked.front().first * kTrialSpread) break;
    if (algo != native) out.push_back(algo);
  }
  if (out.size() < 2) out.clear();
  return out;
}

}  // namespace boostcomm::tuning
