// The replay itself: gradient buffers from a model profile, the emulated
// backward, calibration and the three modes. Reporting is in replay_cmd.cc.
//
// Measurement rules (docs/PERF_REPLAY.md): every mode runs in the same job,
// interleaved step by step, after `warmup` untimed rounds; ranks start each
// step together (a barrier outside the timed window); a step's time is the
// slowest rank's; each metric is the median over steps.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <memory>
#include <thread>

#include "cli_internal.h"
#include "boostcomm/error.h"
#include "boostcomm/topology.h"
#include "cli_util.h"
#include "replay.h"

namespace boostcomm::tools {

namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Timeline threads of the replay's own events (the engine uses 1, 2, 10+).
constexpr int kComputeTid = 0;
constexpr int kStepTid = 3;
constexpr int kBaselineTid = 4;

struct Model {
  workloads::ModelProfile profile;
  std::vector<std::vector<unsigned char>> storage;
  std::vector<GradientTensor> tensors;  // declaration order
  std::vector<double> readyOffsetSeconds;  // per backward position: compute deadline from step start
  std::size_t bytes = 0;
  std::size_t largestBytes = 0;

  void setCompute(double computeSeconds) {
    // Layer by layer, last layer first, each taking its share of the FLOPs.
    double total = 0;
    for (const auto& t : profile.tensors) total += t.backwardFlops;
    readyOffsetSeconds.clear();
    double at = 0;
    for (std::size_t p = 0; p < tensors.size(); ++p) {
      const auto& t = profile.tensors[tensors.size() - 1 - p];
      at += total > 0 ? computeSeconds * t.backwardFlops / total : computeSeconds / static_cast<double>(tensors.size());
      readyOffsetSeconds.push_back(at);
    }
  }
};

Model loadModel(const std::string& nameOrPath) {
  Model m;
  m.profile = workloads::loadProfile(nameOrPath);
  m.storage.resize(m.profile.tensors.size());
  for (std::size_t i = 0; i < m.profile.tensors.size(); ++i) {
    const workloads::TensorProfile& t = m.profile.tensors[i];
    // Zeros: the reduction's speed does not depend on the values (no
    // denormals, NaNs or overflow arise from averaging zeros).
    m.storage[i].assign(std::max<std::size_t>(1, t.bytes()), 0);
    m.tensors.push_back({t.name, View(m.storage[i].data(), t.count(), t.dtype)});
    m.bytes += t.bytes();
    m.largestBytes = std::max(m.largestBytes, t.bytes());
  }
  return m;
}

// One step's numbers on this rank.
struct StepSample {
  double step = 0;
  double compute = 0;
  double sync = 0;
  double exposed = 0;
  // Link rows of the step (the same on every rank; see linkRowsOf).
  executor::LinkRows links;
  double interBytesPerNode = 0;
  double intraBytesPerNode = 0;
  double modelledShare = 0;
};

class Replayer {
 public:
  Replayer(Communicator& comm, const ReplayOptions& options, Model& model)
      : comm_(comm), options_(options), model_(model) {
    if (!options_.timelinePath.empty()) {
      telemetry::TimelineOptions to;
      to.path = telemetry::rankTimelinePath(options_.timelinePath, comm.rank(), comm.size());
      if (to.path == options_.timelinePath && comm.size() > 1) to.path += ".rank" + std::to_string(comm.rank());
      to.pid = comm.rank();
      timeline_ = std::make_shared<telemetry::Timeline>(to);
      timeline_->nameProcess("rank " + std::to_string(comm.rank()));
      timeline_->labelProcess(telemetry::currentRunInfo());
      timeline_->nameThread(kComputeTid, "caller (emulated backward)");
      timeline_->nameThread(kStepTid, "steps");
      timeline_->nameThread(kBaselineTid, "baseline per-tensor allreduce");
    }
  }

  // Emulated backward: gradient p (in backward order) is ready at its
  // deadline; onReady(tensor) runs then. Deadlines are absolute, so a late
  // wake-up does not push the later layers back (as on an accelerator, whose
  // kernels were queued ahead of time).
  template <typename OnReady>
  void backward(Clock::time_point start, OnReady&& onReady) {
    const std::size_t n = model_.tensors.size();
    double previousUs = telemetry::nowUs();
    for (std::size_t p = 0; p < n; ++p) {
      const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(model_.readyOffsetSeconds[p]));
      if (options_.compute == ComputeEmulation::kSleep) {
        std::this_thread::sleep_until(deadline);
      } else {
        while (Clock::now() < deadline) {
        }
      }
      const std::size_t tensor = n - 1 - p;
      if (timeline_) {
        const double nowUs = telemetry::nowUs();
        timeline_->complete("backward " + model_.tensors[tensor].name, "compute", kComputeTid, previousUs,
                            nowUs - previousUs, {{"bytes", model_.profile.tensors[tensor].bytes()}});
        previousUs = nowUs;
      }
      onReady(tensor);
    }
  }

  StepSample baselineStep(bool withCompute) {
    comm_.barrier();
    comm_.linkStats(true);  // the step's traffic only
    const auto start = Clock::now();
    if (withCompute) backward(start, [](std::size_t) {});
    const auto computed = Clock::now();
    const std::size_t n = model_.tensors.size();
    for (std::size_t p = 0; p < n; ++p) {
      View& v = model_.tensors[n - 1 - p].data;
      const double t0 = timeline_ ? telemetry::nowUs() : 0;
      comm_.allreduce(v, v, ReduceOp::kAvg);
      if (timeline_) timeline_->complete("allreduce " + model_.tensors[n - 1 - p].name, "collective", kBaselineTid, t0,
                                         telemetry::nowUs() - t0, {{"bytes", v.count * dataTypeSize(v.dtype)}});
    }
    const auto end = Clock::now();
    links_ = comm_.linkStats(false);
    StepSample s;
    s.step = secondsBetween(start, end);
    s.compute = secondsBetween(start, computed);
    s.sync = s.exposed = secondsBetween(computed, end);
    return s;
  }

  StepSample engineStep(OverlapEngine& engine) {
    comm_.barrier();
    comm_.linkStats(true);
    const auto start = Clock::now();
    engine.beginBackward();
    backward(start, [&](std::size_t tensor) { engine.markReady(tensor); });
    const auto computed = Clock::now();
    engine.finishBackward();
    const auto end = Clock::now();
    links_ = comm_.linkStats(false);
    const OverlapStats stats = engine.getOverlapStats();
    StepSample s;
    s.step = secondsBetween(start, end);
    s.compute = secondsBetween(start, computed);
    s.sync = stats.last.commSeconds;
    s.exposed = secondsBetween(computed, end);
    return s;
  }

  // Slowest rank per metric (a step is as slow as its slowest rank).
  StepSample slowest(StepSample s) {
    double v[4] = {s.step, s.compute, s.sync, s.exposed};
    comm_.allreduce(ConstView(v, 4, DataType::kFloat64), View(v, 4, DataType::kFloat64), ReduceOp::kMax);
    s.step = v[0];
    s.compute = v[1];
    s.sync = v[2];
    s.exposed = v[3];
    return s;
  }

  // The step's link rows from every rank's snapshot (collective), over the
  // step's communication phase s.sync (the slowest rank's).
  void addLinkRows(StepSample& s) {
    const std::vector<NodeLinkStats> nodes = mergeNodeLinkStats(comm_, links_);
    std::vector<executor::NodeLinkSample> samples;
    double modelled = 0, all = 0;
    double dropped = static_cast<double>(links_.droppedIntervals);
    comm_.allreduce(ConstView(&dropped, 1, DataType::kFloat64), View(&dropped, 1, DataType::kFloat64), ReduceOp::kSum);
    droppedIntervals_ += static_cast<std::uint64_t>(dropped);
    for (const NodeLinkStats& n : nodes) {
      executor::NodeLinkSample x;
      x.ranks = n.ranks;
      x.intraBytes = static_cast<double>(n.intraNode.bytes);
      x.interBytes = static_cast<double>(n.interNode.bytes);
      x.interBusySeconds = n.interNode.busySeconds;
      x.interCongestedSeconds = n.interCongestedSeconds;
      samples.push_back(x);
      s.interBytesPerNode += x.interBytes / static_cast<double>(nodes.size());
      s.intraBytesPerNode += x.intraBytes / static_cast<double>(nodes.size());
      modelled += static_cast<double>(n.intraNode.modelledBytes + n.interNode.modelledBytes);
      all += x.intraBytes + x.interBytes;
    }
    s.modelledShare = all > 0 ? modelled / all : 0;
    s.links = executor::linkRows(samples, intraBytesPerSecond_, interBytesPerSecond_, s.sync);
    if (timeline_) {
      const double now = telemetry::nowUs();
      timeline_->counter("link bytes (this rank)", now,
                         {{"intra", links_.intraNode.bytes}, {"inter", links_.interNode.bytes}});
      timeline_->counter("link utilisation %", now,
                         {{"intra", 100 * s.links.intraUtilisation}, {"inter", 100 * s.links.interUtilisation},
                          {"inter congestion", 100 * s.links.interCongestion}});
    }
  }

  double calibrate() {
    for (int i = 0; i < options_.warmup; ++i) baselineStep(false);
    std::vector<double> sync;
    for (int i = 0; i < std::max(1, options_.calibrationSteps); ++i) sync.push_back(slowest(baselineStep(false)).sync);
    return median(sync);
  }

  // The allreduce of the gradient that backward produces last (declaration
  // index 0), alone and as the baseline runs it: the slowest rank's median.
  double tailAllreduce() {
    View& v = model_.tensors.front().data;
    std::vector<double> t;
    for (int i = 0; i < options_.warmup + std::max(1, options_.calibrationSteps); ++i) {
      comm_.barrier();
      const auto start = Clock::now();
      comm_.allreduce(v, v, ReduceOp::kAvg);
      StepSample s;
      s.sync = secondsBetween(start, Clock::now());
      if (i >= options_.warmup) t.push_back(slowest(s).sync);
    }
    return median(t);
  }

  // Strategy per mode. On one node the topology-aware strategy selects what
  // the flat one does (hierarchical algorithms need several nodes), so the
  // switch - which clears the schedule cache - is skipped there.
  void useStrategy(Strategy strategy) {
    if (singleNode_) return;
    comm_.configureCommStrategy({.strategy = strategy});
  }

  // Runs every mode, interleaved step by step (baseline, fused, boosted,
  // baseline, ...), so that all modes sample the same machine load: on a
  // shared machine, running the modes one after the other lets a burst of
  // someone else's load land on one mode only.
  std::vector<ModeResult> runModes(const std::vector<std::string>& modes) {
    singleNode_ = comm_.nodeLayout().rfind("1x", 0) == 0;
    std::vector<std::unique_ptr<OverlapEngine>> engines(modes.size());
    for (std::size_t m = 0; m < modes.size(); ++m) {
      if (modes[m] == "baseline") continue;
      OverlapOptions o = options_.overlap;
      o.enable = modes[m] == "boosted";
      o.average = true;
      o.timelinePath.clear();
      o.logSteps = false;
      // Bucket view: the emulated backward's gradients live in the engine's
      // buckets (the model's own buffers only give shapes), as DDP with
      // gradient_as_bucket_view=True; the baseline keeps its per-tensor buffers.
      o.bucketView = options_.bucketView;
      engines[m] = std::make_unique<OverlapEngine>(comm_, model_.tensors, o);
      if (timeline_) overlap::attachTimeline(*engines[m], timeline_);
    }
    std::vector<std::vector<StepSample>> samples(modes.size());
    std::vector<std::vector<double>> offSteps(modes.size());
    for (int round = 0; round < options_.warmup + options_.steps; ++round) {
      for (std::size_t m = 0; m < modes.size(); ++m) {
        useStrategy(modes[m] == "boosted" ? Strategy::kTopologyAware : Strategy::kFlat);
        if (options_.linkOverhead) {
          // The same step with accounting off, before or after the measured
          // one (alternating by round, so neither always comes first).
          auto off = [&] {
            detail::setLinkAccounting(comm_, false);
            const StepSample o = slowest(engines[m] ? engineStep(*engines[m]) : baselineStep(true));
            detail::setLinkAccounting(comm_, true);
            if (round >= options_.warmup) offSteps[m].push_back(o.step);
          };
          if (round % 2 == 0) off();
          roundOff_ = round % 2 != 0 ? off : std::function<void()>{};
        }
        const double t0 = telemetry::nowUs();
        StepSample s = slowest(engines[m] ? engineStep(*engines[m]) : baselineStep(true));
        addLinkRows(s);
        if (roundOff_) {
          roundOff_();
          roundOff_ = {};
        }
        if (round < options_.warmup) continue;
        samples[m].push_back(s);
        if (timeline_) {
          timeline_->complete(modes[m] + " step " + std::to_string(round - options_.warmup), "step", kStepTid, t0,
                              telemetry::nowUs() - t0);
        }
      }
    }
    std::vector<ModeResult> results;
    for (std::size_t m = 0; m < modes.size(); ++m) {
      ModeResult r = summarise(modes[m], samples[m]);
      r.stepSamplesAccountingOff = offSteps[m];
      r.stepSecondsAccountingOff = median(offSteps[m]);
      useStrategy(modes[m] == "boosted" ? Strategy::kTopologyAware : Strategy::kFlat);
      r.collectivesPerStep = engines[m] ? engines[m]->bucketCount() : model_.tensors.size();
      const std::size_t largest = engines[m] ? std::max(options_.overlap.bucketBytes, model_.largestBytes) : model_.largestBytes;
      r.algorithm = comm_.selectedAlgorithm(Collective::kAllreduce, largest);
      results.push_back(std::move(r));
    }
    return results;
  }

  ModeResult summarise(const std::string& mode, const std::vector<StepSample>& samples) const {
    ModeResult r;
    r.mode = mode;
    std::vector<double> step, compute, sync, exposed;
    for (const StepSample& s : samples) {
      step.push_back(s.step);
      compute.push_back(s.compute);
      sync.push_back(s.sync);
      exposed.push_back(s.exposed);
    }
    std::vector<double> inter, intra, congestion, interBytes, intraBytes, modelled;
    for (const StepSample& s : samples) {
      inter.push_back(s.links.interUtilisation);
      intra.push_back(s.links.intraUtilisation);
      congestion.push_back(s.links.interCongestion);
      interBytes.push_back(s.interBytesPerNode);
      intraBytes.push_back(s.intraBytesPerNode);
      modelled.push_back(s.modelledShare);
    }
    r.interUtilisation = median(inter);
    r.intraUtilisation = median(intra);
    r.interCongestion = median(congestion);
    r.interBytesPerNode = median(interBytes);
    r.intraBytesPerNode = median(intraBytes);
    r.modelledShare = median(modelled);
    r.stepSamples = step;
    r.stepSeconds = median(step);
    r.computeSeconds = median(compute);
    r.syncSeconds = median(sync);
    r.exposedSeconds = median(exposed);
    r.overlapEfficiency = r.syncSeconds > 0 ? std::clamp((r.syncSeconds - r.exposedSeconds) / r.syncSeconds, 0.0, 1.0) : 0;
    r.commShare = r.stepSeconds > 0 ? r.exposedSeconds / r.stepSeconds : 0;
    r.throughput = r.stepSeconds > 0 ? options_.batchPerRank * comm_.size() / r.stepSeconds : 0;
    const double n = comm_.size();
    r.syncSecondsPerEpoch = r.syncSeconds * options_.epochSamples / (static_cast<double>(options_.batchPerRank) * n);
    if (r.syncSeconds > 0 && n > 1) r.busBandwidthGBs = static_cast<double>(model_.bytes) / r.syncSeconds * 2 * (n - 1) / n / 1e9;
    return r;
  }

  void setBandwidths(double intraBytesPerSecond, double interBytesPerSecond) {
    intraBytesPerSecond_ = intraBytesPerSecond;
    interBytesPerSecond_ = interBytesPerSecond;
  }

  void finishTimeline() {
    if (!timeline_) return;
    const std::string mine = timeline_->path();
    timeline_->close();
    timeline_.reset();
    comm_.barrier();  // every rank's file is complete
    if (comm_.rank() == 0 && mine != options_.timelinePath) {
      std::vector<std::string> inputs;
      for (int r = 0; r < comm_.size(); ++r) {
        std::string p = telemetry::rankTimelinePath(options_.timelinePath, r, comm_.size());
        if (p == options_.timelinePath) p += ".rank" + std::to_string(r);
        inputs.push_back(p);
      }
      telemetry::mergeTraces(inputs, options_.timelinePath);
    }
  }

 private:
  Communicator& comm_;
  const ReplayOptions& options_;
  Model& model_;
  std::shared_ptr<telemetry::Timeline> timeline_;
  bool singleNode_ = true;
  double intraBytesPerSecond_ = 0;
  double interBytesPerSecond_ = 0;
  LinkStats links_;                 // this rank's, of the last step
 public:
  std::uint64_t droppedIntervals_ = 0;  // summed over nodes and steps (the same on every rank)
 private:
  std::function<void()> roundOff_;  // linkOverhead: the off step still to run this round
};

}  // namespace

ReplayReport runReplay(Communicator& comm, const ReplayOptions& options) {
  for (const std::string& m : options.modes) {
    if (m != "baseline" && m != "fused" && m != "boosted") throw UsageError("--modes: '" + m + "' is unknown (valid: baseline, fused, boosted)");
  }
  if (options.commShare < 0 || options.commShare >= 1) throw UsageError("--comm-share must be in [0, 1)");
  if (options.commShare == 0 && options.computeSeconds <= 0) throw UsageError("give --comm-share or --compute-seconds");
  Model model = loadModel(options.model);
  ReplayReport report;
  report.model = model.profile.name;
  report.tensors = model.tensors.size();
  report.gradientBytes = model.bytes;
  report.ranks = comm.size();
  report.commShareTarget = options.commShare;

  // Link bandwidths for the link rows: a `boostcomm topo` file, or probed now.
  Topology topo;
  if (!options.topologyPath.empty()) {
    std::ifstream in(options.topologyPath);
    if (!in) throw UsageError("--topology: cannot read '" + options.topologyPath + "'");
    std::stringstream text;
    text << in.rdbuf();
    topo = topologyFromJson(text.str());
    report.bandwidthSource = options.topologyPath;
  } else {
    topo = detectTopology(comm);
    report.bandwidthSource = "probed";
  }
  // The rates a stream of messages sees, read from the probes as the
  // simulator reads them (simulate::clusterFromTopology): a token-bucket
  // link's fitted bandwidth is its burst rate, several times its real one.
  const simulate::ClusterSpec links = simulate::clusterFromTopology(topo, report.bandwidthSource);
  report.intraBytesPerSecond = topo.intraNode.measured ? links.intra.bytesPerSecond : 0;
  report.interBytesPerSecond = topo.interNode.measured ? links.inter.bytesPerSecond : 0;

  Replayer replayer(comm, options, model);
  replayer.setBandwidths(report.intraBytesPerSecond, report.interBytesPerSecond);
  report.computeSeconds = options.computeSeconds;
  if (options.commShare > 0) {
    report.calibratedSyncSeconds = replayer.calibrate();
    report.computeSeconds = report.calibratedSyncSeconds * (1 - options.commShare) / options.commShare;
  }
  if (!model.tensors.empty()) {
    report.tailTensor = model.tensors.front().name;
    report.tailBytes = model.profile.tensors.front().bytes();
    report.tailSeconds = replayer.tailAllreduce();
  }
  model.setCompute(report.computeSeconds);
  report.modes = replayer.runModes(options.modes);
  const ModeResult* baseline = nullptr;
  for (const ModeResult& m : report.modes) {
    if (m.mode == "baseline") baseline = &m;
  }
  for (ModeResult& m : report.modes) m.speedup = baseline && m.stepSeconds > 0 ? baseline->stepSeconds / m.stepSeconds : 0;
  replayer.finishTimeline();
  report.droppedIntervals = replayer.droppedIntervals_;
  return report;
}

}  // namespace boostcomm::tools
