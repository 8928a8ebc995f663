#include "simulate/replay_sim.h"

#include <algorithm>
#include <map>

#include "core/check.h"
#include "core/intervals.h"
#include "executor/link_meter.h"
#include "planner/bucketing.h"
#include "simulate/predict.h"
#include "simulate/simulator.h"

namespace boostcomm::simulate {
namespace {

// One collective of a mode: its payload and when its data is ready.
struct Sync {
  DataType dtype = DataType::kFloat32;
  std::size_t count = 0;
  double readySeconds = 0;
  double packSeconds = 0;  // copy into the bucket before, and out of it after
};

struct ModeRun {
  double endSeconds = 0;
  double syncSeconds = 0;
  std::vector<simulate::NodeLinkLog> links;
  std::map<std::string, int> algorithms;
};

class Replay {
 public:
  Replay(const simulate::ClusterSpec& cluster, const ReplaySimOptions& options)
      : cluster_(cluster), options_(options) {}

  // Runs the collectives one after another (a single communication stream,
  // as DDP and the OverlapEngine issue them), each no earlier than its data.
  ModeRun run(const std::vector<Sync>& syncs, bool tuned) {
    Simulation sim(cluster_);
    sim.setRecordLinks(true);
    std::vector<std::string> names;
    ModeRun out;
    for (std::size_t i = 0; i < syncs.size(); ++i) {
      JobSpec job;
      job.request = requestOf(syncs[i]);
      job.algorithm = tuned ? bestAlgorithm(job.request) : "native";
      job.releaseSeconds = syncs[i].readySeconds + syncs[i].packSeconds;
      job.afterPrevious = i > 0;
      sim.add(job);
      ++out.algorithms[sim.ranAlgorithm(job)];
    }
    const SimResult r = sim.run();
    double busyUntil = 0;
    for (std::size_t i = 0; i < syncs.size(); ++i) {
      out.endSeconds = std::max(out.endSeconds, r.jobEndSeconds[i] + syncs[i].packSeconds);
      out.syncSeconds += r.jobEndSeconds[i] - std::max(r.jobStartSeconds[i], busyUntil);
      busyUntil = r.jobEndSeconds[i];
    }
    out.links = r.links;
    return out;
  }

 private:
  algorithms::CollectiveSpec requestOf(const Sync& s) const {
    algorithms::CollectiveSpec spec;
    spec.collective = Collective::kAllreduce;
    spec.dtype = s.dtype;
    spec.op = ReduceOp::kSum;
    spec.count = s.count;
    spec.chunkBytes = options_.chunkBytes;
    spec.maxChunks = options_.maxChunks;
    return spec;
  }

  // The fastest simulated candidate for this payload (cached per size).
  std::string bestAlgorithm(const algorithms::CollectiveSpec& request) {
    const std::size_t bytes = request.payloadBytes();
    auto it = best_.find(bytes);
    if (it != best_.end()) return it->second;
    const auto predictions = predictAll(cluster_, request, simulatedAlgorithms(cluster_, request));
    return best_[bytes] = fastest(predictions).algorithm;
  }

  simulate::ClusterSpec cluster_;
  ReplaySimOptions options_;
  std::map<std::size_t, std::string> best_;
};

executor::LinkRows linkRowsOf(const simulate::ClusterSpec& cluster, const ModeRun& run) {
  std::vector<executor::NodeLinkSample> nodes;
  for (const simulate::NodeLinkLog& log : run.links) {
    executor::NodeLinkSample n;
    n.ranks = cluster.ranksPerNode;
    n.intraBytes = static_cast<double>(log.intraBytes);
    n.interBytes = static_cast<double>(log.interBytes);
    const core::Occupancy<double> o = core::occupancy(log.interIntervals);
    n.interBusySeconds = o.busy;
    n.interCongestedSeconds = o.congested;
    nodes.push_back(n);
  }
  return executor::linkRows(nodes, cluster.intra.bytesPerSecond, cluster.inter.bytesPerSecond, run.syncSeconds);
}

std::string describeAlgorithms(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return out;
}

}  // namespace

ReplaySimReport simulateReplay(const simulate::ClusterSpec& cluster, const workloads::ModelProfile& profile,
                               const ReplaySimOptions& options) {
  BC_INVALID(options.batchPerRank > 0, -1, "--batch must be positive (got " << options.batchPerRank << ")");
  BC_INVALID(options.deviceFlopsPerSecond > 0, -1, "--device-tflops must be positive");
  BC_INVALID(options.commShare >= 0 && options.commShare < 1, -1,
             "--comm-share must be in [0, 1) (got " << options.commShare << ")");
  BC_INVALID(!profile.tensors.empty(), -1, "model " << profile.name << " has no tensors");
  ReplaySimReport report;
  report.model = profile.name;
  report.tensors = profile.tensors.size();
  report.gradientBytes = profile.bytes();
  report.ranks = cluster.ranks();

  // Gradients arrive in reverse declaration order: tensor k of `order` is
  // profile tensor (n - 1 - k); its ready time is the backward work so far.
  const std::size_t n = profile.tensors.size();
  std::vector<const workloads::TensorProfile*> order;
  std::vector<double> flopsDone;
  double flops = 0;
  for (std::size_t k = 0; k < n; ++k) {
    order.push_back(&profile.tensors[n - 1 - k]);
    flops += order.back()->backwardFlops * options.batchPerRank;
    flopsDone.push_back(flops);
  }
  Replay replay(cluster, options);
  auto perTensor = [&](double computeSeconds) {
    std::vector<Sync> syncs;
    for (const auto* t : order) syncs.push_back(Sync{t->dtype, t->count(), computeSeconds, 0});
    return syncs;
  };
  double compute = flops / options.deviceFlopsPerSecond;
  if (options.commShare > 0) {
    // Calibrate on the baseline's communication alone (released at time 0).
    const ModeRun alone = replay.run(perTensor(0), false);
    compute = alone.endSeconds * (1 - options.commShare) / options.commShare;
  }
  report.computeSeconds = compute;
  const double secondsPerFlop = flops > 0 ? compute / flops : 0;

  std::vector<planner::TensorInfo> infos;
  for (const auto* t : order) infos.push_back(planner::TensorInfo{t->count(), t->dtype});
  planner::BucketOptions bucketOptions;
  bucketOptions.bucketBytes = options.bucketBytes;
  bucketOptions.firstBucketBytes = options.firstBucketBytes;
  const planner::BucketPlan plan = planner::planBuckets(infos, bucketOptions);
  auto buckets = [&](bool overlap) {
    std::vector<Sync> syncs;
    for (const planner::Bucket& b : plan.buckets) {
      Sync s{b.dtype, b.count, 0, static_cast<double>(b.bytes()) / cluster.memoryBytesPerSecond};
      for (const planner::BucketSlot& slot : b.slots) {
        s.readySeconds = std::max(s.readySeconds, overlap ? flopsDone[slot.tensor] * secondsPerFlop : compute);
      }
      syncs.push_back(s);
    }
    return syncs;
  };

  double baselineStep = 0;
  for (const std::string& mode : options.modes) {
    ModeRun run;
    if (mode == "baseline") run = replay.run(perTensor(compute), false);
    else if (mode == "fused") run = replay.run(buckets(false), false);
    else if (mode == "boosted") run = replay.run(buckets(true), true);
    else BC_INVALID(false, -1, "--modes: unknown mode '" << mode << "' (baseline, fused, boosted)");
    ReplaySimMode m;
    m.mode = mode;
    m.computeSeconds = compute;
    m.stepSeconds = std::max(compute, run.endSeconds);
    m.syncSeconds = run.syncSeconds;
    m.exposedSeconds = m.stepSeconds - compute;
    m.throughput = m.stepSeconds > 0 ? options.batchPerRank * cluster.ranks() / m.stepSeconds : 0;
    m.commShare = m.stepSeconds > 0 ? m.exposedSeconds / m.stepSeconds : 0;
    m.overlapEfficiency = m.syncSeconds > 0 ? std::clamp((m.syncSeconds - m.exposedSeconds) / m.syncSeconds, 0.0, 1.0) : 0;
    const double stepsPerEpoch = options.epochSamples / (static_cast<double>(options.batchPerRank) * cluster.ranks());
    m.syncSecondsPerEpoch = m.syncSeconds * stepsPerEpoch;
    const executor::LinkRows rows = linkRowsOf(cluster, run);
    m.interUtilisation = rows.interUtilisation;
    m.intraUtilisation = rows.intraUtilisation;
    m.interCongestion = rows.interCongestion;
    m.collectives = mode == "baseline" ? n : plan.buckets.size();
    m.algorithms = describeAlgorithms(run.algorithms);
    if (mode == "baseline") baselineStep = m.stepSeconds;
    report.modes.push_back(m);
  }
  for (ReplaySimMode& m : report.modes) m.speedup = baselineStep > 0 && m.stepSeconds > 0 ? baselineStep / m.stepSeconds : 0;
  return report;
}

}  // namespace boostcomm::simulate
