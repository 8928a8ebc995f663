#include "simulate/predict.h"

#include "algorithms/registry.h"
#include "boostcomm/error.h"
#include "core/check.h"

namespace boostcomm::simulate {

std::vector<std::string> simulatedAlgorithms(const simulate::ClusterSpec& cluster,
                                             const algorithms::CollectiveSpec& request) {
  std::vector<std::string> out;
  for (const std::string& name : algorithms::algorithmNames(request.collective)) {
    if (name == "shm") continue;
    Simulation probe(cluster);
    JobSpec job;
    job.request = request;
    job.algorithm = name;
    try {
      probe.add(job);
    } catch (const Error&) {
      continue;  // inapplicable here (e.g. hier on one node, rd allgather on 6 ranks)
    }
    out.push_back(name);
  }
  return out;
}

std::vector<Prediction> predictAll(const simulate::ClusterSpec& cluster, const algorithms::CollectiveSpec& request,
                                   const std::vector<std::string>& algorithms) {
  std::vector<Prediction> out;
  for (const std::string& name : algorithms) {
    Simulation sim(cluster);
    JobSpec job;
    job.request = request;
    job.algorithm = name;
    sim.add(job);
    Prediction p;
    p.algorithm = name;
    p.ranAlgorithm = sim.ranAlgorithm(job);
    p.detail = sim.run();
    p.seconds = p.detail.seconds;
    out.push_back(std::move(p));
  }
  return out;
}

const Prediction& fastest(const std::vector<Prediction>& predictions) {
  BC_INTERNAL(!predictions.empty(), "fastest: no predictions");
  const Prediction* best = &predictions.front();
  for (const Prediction& p : predictions) {
    if (p.seconds < best->seconds) best = &p;
  }
  return *best;
}

}  // namespace boostcomm::simulate
