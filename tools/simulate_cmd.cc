// `boostcomm simulate`: the library's own schedules on a described cluster,
// in one process, in virtual time (docs/SIMULATOR.md).
//
//   boostcomm simulate --cluster 8x8 --intra 25GBps,2us --inter 3GBps,10us allreduce -b 1K -e 256M -f 4
//       [--algos native,ring,hier,tuned] [--output sim.json]
//   boostcomm simulate --cluster 8x8 --intra 25GBps,2us --inter 3GBps,10us replay --model resnet50
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "cli_internal.h"
#include "boostcomm/error.h"
#include "boostcomm/topology.h"
#include "cli_util.h"
#include "extra_commands.h"
#include "simulate.h"

namespace boostcomm::tools {
namespace {

struct SimulateCli {
  std::string shape = "8x8";
  bool shapeGiven = false;  // --cluster on the command line (overrides the file's shape)
  std::string clusterFile;
  std::string topologyFiles;  // comma-separated
  std::string cache;
  std::string firstTouch;
  std::string intra;
  std::string inter;
  std::string memory;
  std::string nodeBus;
  bool intraCopyOnCpu = false;
  // collective sweep
  std::string collective = "allreduce";
  std::string minText = "1K";
  std::string maxText = "256M";
  std::size_t stepFactor = 4;
  std::string dtype = "float32";
  std::string op = "sum";
  int root = 0;
  std::vector<std::string> algos;
  std::string chunkText = "1M";
  int maxChunks = 64;
  std::string interAlgorithm = "ring";
  std::string wire = "off";
  std::string output;
  // replay
  std::string model = "resnet50";
  simulate::ReplaySimOptions replay;
  double deviceTflops = 100;
  std::string bucketText = "25M";
  std::string firstBucketText = "1M";
  std::string replayOutput;
};

std::size_t bytesOption(const std::string& text, const char* option) {
  const auto v = parseBytes(text);
  if (!v) throw UsageError(std::string(option) + ": '" + text + "' is not a size in bytes (e.g. 4K, 1M)");
  return *v;
}

simulate::ClusterSpec clusterOf(const SimulateCli& a) {
  if (!a.clusterFile.empty() && !a.topologyFiles.empty()) {
    throw UsageError("--cluster-file and --topology both describe the cluster: give one");
  }
  simulate::ClusterSpec c = simulate::parseShape(a.shape);
  if (!a.clusterFile.empty()) c = simulate::loadClusterFile(a.clusterFile);
  if (!a.topologyFiles.empty()) {
    std::vector<simulate::ClusterSpec> measured;
    for (const std::string& file : splitList(a.topologyFiles)) {
      measured.push_back(simulate::clusterFromTopology(loadTopology(file), file));
    }
    c = simulate::medianCluster(measured);
  }
  if ((!a.clusterFile.empty() || !a.topologyFiles.empty()) && a.shapeGiven) c = simulate::parseShape(a.shape, c);
  if (!a.intra.empty()) c.intra = simulate::parseLink(a.intra, "--intra");
  if (!a.inter.empty()) c.inter = simulate::parseLink(a.inter, "--inter");
  if (!a.memory.empty()) c.memoryBytesPerSecond = simulate::parseBandwidth(a.memory, "--memory");
  if (!a.nodeBus.empty()) c.nodeBusBytesPerSecond = simulate::parseBandwidth(a.nodeBus, "--node-bus");
  if (a.intraCopyOnCpu) c.intraCopyOnCpu = true;
  if (!a.cache.empty()) {
    const std::size_t comma = a.cache.find(',');
    if (comma == std::string::npos) throw UsageError("--cache: expected SIZE,SPEEDUP such as 32M,6.7, got '" + a.cache + "'");
    const double size = static_cast<double>(bytesOption(a.cache.substr(0, comma), "--cache"));
    double speedup = 0;
    try {
      speedup = std::stod(a.cache.substr(comma + 1));
    } catch (const std::exception&) {
      throw UsageError("--cache: speed-up '" + a.cache.substr(comma + 1) + "' is not a number");
    }
    // A step: full speed-up up to SIZE, streaming from twice SIZE.
    c.cache = {{size, speedup}, {2 * size, 1.0}};
  }
  if (!a.firstTouch.empty()) {
    // "0": not modelled (e.g. to see a --topology cluster without the backend's page faults).
    c.firstTouchBytesPerSecond = a.firstTouch == "0" ? 0.0 : simulate::parseBandwidth(a.firstTouch, "--first-touch");
  }
  simulate::validateCluster(c);
  return c;
}

SimulateRecord recordOf(const BenchRecord& size, const std::string& algorithm, const simulate::Prediction& p,
                        const SimulateSweep& sweep) {
  SimulateRecord r;
  r.bench = size;
  r.bench.algorithm = algorithm;
  r.bench.ranAlgorithm = p.ranAlgorithm;
  r.bench.timeUs = r.bench.timeUsMin = r.bench.timeUsMax = p.seconds * 1e6;
  r.bench.algbwGBps = p.seconds > 0 ? static_cast<double>(size.bytes) / p.seconds / 1e9 : 0;
  r.bench.busbwGBps = r.bench.algbwGBps * busBandwidthFactor(sweep.options.collective, sweep.cluster.ranks());
  r.bench.check = "skipped";
  r.interBytes = static_cast<double>(p.detail.network.interBytes);
  r.intraBytes = static_cast<double>(p.detail.network.intraBytes);
  return r;
}

int runSweep(const SimulateSweep& sweep) {
  const auto wallStart = std::chrono::steady_clock::now();
  const BenchOptions& o = sweep.options;
  algorithms::CollectiveSpec request;
  request.collective = o.collective;
  request.dtype = o.dtype;
  request.op = o.op;
  request.root = o.root;
  request.chunkBytes = sweep.chunkBytes;
  request.maxChunks = sweep.maxChunks;
  request.interAlgorithm = sweep.interAlgorithm.c_str();
  request.wire = sweep.wire;
  if (o.collective == Collective::kBroadcast && (o.root < 0 || o.root >= sweep.cluster.ranks())) {
    throw UsageError("--root " + std::to_string(o.root) + " is not a rank of the " +
                     std::to_string(sweep.cluster.ranks()) + "-rank cluster");
  }
  if (o.collective == Collective::kBarrier) throw UsageError("simulate: barrier has no sizes to sweep");
  if (o.stepFactor < 2 && o.minBytes != o.maxBytes) throw UsageError("--stepfactor must be at least 2");
  if (o.minBytes > o.maxBytes) throw UsageError("--minbytes is larger than --maxbytes");

  // Candidates: as asked, or every algorithm the simulator can run here.
  request.count = 1024;
  std::vector<std::string> algos = o.algos;
  if (algos.empty()) {
    algos = simulate::simulatedAlgorithms(sweep.cluster, request);
    algos.push_back(kAlgoTuned);
  }
  std::vector<std::string> candidates;
  for (const std::string& a : algos) {
    if (a == kAlgoTuned) continue;
    if (algorithms::findAlgorithm(o.collective, a) == nullptr) {
      std::string known;
      for (const auto& n : algorithms::algorithmNames(o.collective)) known += " " + n;
      throw UsageError("--algos: no algorithm '" + a + "' for " + std::string(toString(o.collective)) + " (known:" +
                       known + ", and tuned)");
    }
    candidates.push_back(a);
  }
  // "tuned" alone still needs candidates to choose from.
  std::vector<std::string> tunedFrom = candidates;
  if (tunedFrom.empty()) tunedFrom = simulate::simulatedAlgorithms(sweep.cluster, request);

  printSimulateHeader(sweep, algos);
  std::vector<SimulateRecord> all;
  for (const SizePlan& plan : planSizes(o, sweep.cluster.ranks())) {
    BenchRecord size;
    size.bytes = plan.bytes;
    size.count = plan.count;
    size.countPerRank = plan.countPerRank;
    request.count = o.collective == Collective::kAllreduce || o.collective == Collective::kBroadcast ? size.count
                                                                                                      : size.countPerRank;
    const bool tuned = std::find(algos.begin(), algos.end(), kAlgoTuned) != algos.end();
    const auto predictions = simulate::predictAll(sweep.cluster, request, tuned ? tunedFrom : candidates);
    std::vector<SimulateRecord> block;
    for (const std::string& a : algos) {
      if (a == kAlgoTuned) {
        const simulate::Prediction& best = simulate::fastest(predictions);
        SimulateRecord r = recordOf(size, kAlgoTuned, best, sweep);
        r.bench.ranAlgorithm = best.ranAlgorithm;
        block.push_back(r);
        continue;
      }
      const auto it = std::find_if(predictions.begin(), predictions.end(),
                                   [&](const simulate::Prediction& p) { return p.algorithm == a; });
      block.push_back(recordOf(size, a, *it, sweep));
    }
    printSimulateSize(block);
    all.insert(all.end(), block.begin(), block.end());
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  std::printf("# simulated in %.2f s of wall time\n", wall);
  if (!o.outputPath.empty()) {
    writeSimulateJson(sweep, all, wall);
    std::printf("# results written to %s\n", o.outputPath.c_str());
  }
  return 0;
}

int runReplay(const SimulateCli& a) {
  const simulate::ClusterSpec cluster = clusterOf(a);
  simulate::ReplaySimOptions options = a.replay;
  if (!(a.deviceTflops > 0)) throw UsageError("--device-tflops must be positive");
  options.deviceFlopsPerSecond = a.deviceTflops * 1e12;
  options.bucketBytes = bytesOption(a.bucketText, "--bucket");
  options.firstBucketBytes = bytesOption(a.firstBucketText, "--first-bucket");
  options.chunkBytes = bytesOption(a.chunkText, "--chunk-bytes");
  options.maxChunks = a.maxChunks;
  const workloads::ModelProfile profile = workloads::loadProfile(a.model);
  const simulate::ReplaySimReport report = simulate::simulateReplay(cluster, profile, options);
  printReplayTable(cluster, report, options);
  if (!a.replayOutput.empty()) {
    writeReplayJson(cluster, report, options, a.replayOutput);
    std::printf("# results written to %s\n", a.replayOutput.c_str());
  }
  return 0;
}

}  // namespace

ExtraCommand addSimulateCommand(CLI::App& app) {
  auto a = std::make_shared<SimulateCli>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Predict collective times on a described cluster (e.g. 8 nodes x 8 devices) by running the "
                  "library's schedules on a simulated network; one process, no MPI");
  CLI::Option* shapeOption =
      cmd->add_option("--cluster", a->shape, "NODESxRANKS_PER_NODE, e.g. 8x8 or 128x8")->capture_default_str();
  cmd->add_option("--cluster-file", a->clusterFile, "JSON cluster description (docs/SIMULATOR.md); flags override it");
  cmd->add_option("--topology", a->topologyFiles,
                  "`boostcomm topo --output` file(s) of one job: its shape, measured links and memory, the median "
                  "over several comma-separated files (flags override it)");
  cmd->add_option("--cache", a->cache, "Node cache SIZE,SPEEDUP for host memory: working sets up to SIZE run SPEEDUP times faster, e.g. 32M,2.4 (default none)");
  cmd->add_option("--first-touch", a->firstTouch,
                  "Fresh-page write rate, e.g. 0.3GBps: the backend's per-call temporary from 32 MiB (default none; 0 = none)");
  cmd->add_option("--intra", a->intra, "Intra-node link BANDWIDTH,LATENCY per rank, e.g. 25GBps,2us (default 25GBps,2us)");
  cmd->add_option("--inter", a->inter, "Inter-node link BANDWIDTH,LATENCY per node NIC, e.g. 3GBps,10us (default 3GBps,10us)");
  cmd->add_option("--memory", a->memory, "Local reduce/copy bandwidth per rank, e.g. 100GBps (default)");
  cmd->add_option("--node-bus", a->nodeBus, "Cap on all intra-node traffic of a node together, e.g. 50GBps (default none)");
  cmd->add_flag("--intra-copy-on-cpu", a->intraCopyOnCpu,
                "Intra-node messages are copies by the receiving rank's CPU (host shared memory)");
  cmd->add_option("collective", a->collective, "allreduce, allgather, broadcast or reduce_scatter")->capture_default_str();
  cmd->add_option("-b,--minbytes", a->minText, "Smallest size S (bench convention)")->capture_default_str();
  cmd->add_option("-e,--maxbytes", a->maxText, "Largest size S")->capture_default_str();
  cmd->add_option("-f,--stepfactor", a->stepFactor, "Size multiplier between steps")->capture_default_str();
  cmd->add_option("-d,--dtype", a->dtype, "Element type")->capture_default_str();
  cmd->add_option("-o,--op", a->op, "Reduction")->capture_default_str();
  cmd->add_option("-r,--root", a->root, "Broadcast root")->capture_default_str();
  cmd->add_option("--algos", a->algos, "Algorithms to simulate (default: every one that runs here, and tuned)")
      ->delimiter(',');
  cmd->add_option("--chunk-bytes", a->chunkText, "Pipelining chunk (BOOSTCOMM_RING_CHUNK_BYTES)")->capture_default_str();
  cmd->add_option("--max-chunks", a->maxChunks, "Chunks per segment at most (BOOSTCOMM_MAX_CHUNKS)")->capture_default_str();
  cmd->add_option("--inter-algorithm", a->interAlgorithm, "Inter-node phase of hier allreduce: ring, rhd or native")
      ->capture_default_str();
  cmd->add_option("--wire", a->wire,
                  "Wire format of float32 allreduce, allgather and reduce_scatter under ring, rhd and hier's "
                  "inter-node phase: off, bf16 or fp16 "
                  "(link bytes; conversion compute not modelled)")
      ->capture_default_str();
  cmd->add_option("--output", a->output, "Write the predictions as bench JSON records (docs/BENCH_JSON.md)");

  CLI::App* replay = cmd->add_subcommand("replay", "Before/after table of a training step on the cluster");
  replay->add_option("--model", a->model, "resnet50, bert-large, or a JSON profile file")->capture_default_str();
  replay->add_option("--batch", a->replay.batchPerRank, "Samples per rank and step")->capture_default_str();
  replay->add_option("--device-tflops", a->deviceTflops, "Sustained device compute, TFLOP/s")->capture_default_str();
  replay->add_option("--comm-share", a->replay.commShare,
                     "Instead of --device-tflops: backward compute such that the baseline communicates this "
                     "fraction of its step (as boostcomm replay)");
  replay->add_option("--bucket", a->bucketText, "Fusion bucket size")->capture_default_str();
  replay->add_option("--first-bucket", a->firstBucketText, "First (smaller) bucket")->capture_default_str();
  replay->add_option("--modes", a->replay.modes, "baseline, fused, boosted")->delimiter(',');
  replay->add_option("--output", a->replayOutput, "Write the table as JSON");
  replay->add_option("--epoch-samples", a->replay.epochSamples, "Samples per epoch, all ranks (sync-per-epoch row)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  ExtraCommand extra;
  extra.app = cmd;
  extra.needsMpi = false;
  extra.run = [a, replay, shapeOption](Communicator*) {
    a->shapeGiven = shapeOption->count() > 0;
    if (*replay) return runReplay(*a);
    SimulateSweep sweep;
    sweep.cluster = clusterOf(*a);
    const auto coll = parseCollective(a->collective);
    const auto dtype = parseDataType(a->dtype);
    const auto op = parseReduceOp(a->op);
    if (!coll) throw UsageError("collective '" + a->collective + "' is not allreduce, allgather, broadcast or reduce_scatter");
    if (!dtype) throw UsageError("--dtype: unknown type '" + a->dtype + "'");
    if (!op) throw UsageError("--op: unknown reduction '" + a->op + "'");
    sweep.options.collective = *coll;
    sweep.options.dtype = *dtype;
    sweep.options.op = *op;
    sweep.options.root = a->root;
    sweep.options.minBytes = bytesOption(a->minText, "--minbytes");
    sweep.options.maxBytes = bytesOption(a->maxText, "--maxbytes");
    sweep.options.stepFactor = a->stepFactor;
    sweep.options.algos = a->algos;
    sweep.options.outputPath = a->output;
    sweep.options.check = false;
    sweep.chunkBytes = bytesOption(a->chunkText, "--chunk-bytes");
    sweep.maxChunks = a->maxChunks;
    sweep.interAlgorithm = a->interAlgorithm;
    const auto wire = parseWireFormat(a->wire);
    if (!wire || *wire == WireFormat::kAuto) throw UsageError("--wire: '" + a->wire + "' is not off, bf16 or fp16");
    if (*wire != WireFormat::kOff && (!algorithms::wireCollective(sweep.options.collective) ||
                                      sweep.options.dtype != DataType::kFloat32)) {
      throw UsageError("--wire " + a->wire + " applies to float32 allreduce, allgather and reduce_scatter only");
    }
    sweep.wire = *wire;
    if (sweep.interAlgorithm != "ring" && sweep.interAlgorithm != "rhd" && sweep.interAlgorithm != "native") {
      throw UsageError("--inter-algorithm: '" + sweep.interAlgorithm + "' is not ring, rhd or native");
    }
    return runSweep(sweep);
  };
  return extra;
}

}  // namespace boostcomm::tools
