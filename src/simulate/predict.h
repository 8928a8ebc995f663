// Predictions from the simulator: one collective's time under each candidate
// algorithm, and the best of them ("tuned": what a measured autotuning sweep
// on that cluster would pick, if the model is right).
#pragma once

#include <string>
#include <vector>

#include "simulate/simulator.h"

namespace boostcomm::simulate {

struct Prediction {
  std::string algorithm;     // registry name ("native", "ring", "hier", ...)
  std::string ranAlgorithm;  // "native(rhd)" for the modelled backend, else the name
  double seconds = 0;        // one call, from the first rank's start to the last rank's finish
  SimResult detail;
};

// Registry algorithms of `collective` that can run `request` on `cluster`
// in the simulator, native first ("shm" never: no shared-memory engine is
// modelled).
std::vector<std::string> simulatedAlgorithms(const simulate::ClusterSpec& cluster,
                                             const algorithms::CollectiveSpec& request);

// Simulates `request` once per algorithm (timing only). Unknown or
// inapplicable names throw Error{kInvalidArgument} with the registry's reason.
std::vector<Prediction> predictAll(const simulate::ClusterSpec& cluster, const algorithms::CollectiveSpec& request,
                                   const std::vector<std::string>& algorithms);

// The fastest of `predictions` (the first on ties, so native wins a tie).
const Prediction& fastest(const std::vector<Prediction>& predictions);

}  // namespace boostcomm::simulate
