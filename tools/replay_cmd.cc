// `boostcomm replay`: command line, the before/after table and the JSON file.
// The replay itself is in replay_run.cc; method and results in docs/PERF_REPLAY.md.
//
//   mpirun -np 2 --oversubscribe --bind-to none boostcomm replay --model resnet50
//       --comm-share 0.28 --steps 5 --modes baseline,fused,boosted --output replay.json
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_internal.h"
#include "boostcomm/error.h"
#include "boostcomm/version.h"
#include "cli_util.h"
#include "extra_commands.h"
#include "replay.h"
#include "seed_table.h"

namespace boostcomm::tools {

namespace {

struct ReplayCli {
  ReplayOptions options;
  std::string computeText = "sleep";
  std::string bucketText = "25M";
  std::string firstBucketText = "1M";
  std::string buffersText = "list";
  std::string bucketViewText = "on";
  bool json = false;
};

const ModeResult* modeOf(const ReplayReport& r, const std::string& name) {
  for (const ModeResult& m : r.modes) {
    if (m.mode == name) return &m;
  }
  return nullptr;
}

// Overlap cannot hide the allreduce of the gradient that backward finishes
// last: the best step is compute + that allreduce, so the best speedup is the
// baseline's step over that (0 without a baseline or a tail measurement).
double tailBoundOf(const ReplayReport& r) {
  const ModeResult* baseline = modeOf(r, "baseline");
  if (!baseline || r.tailSeconds <= 0 || r.computeSeconds <= 0) return 0;
  return baseline->stepSeconds / (r.computeSeconds + r.tailSeconds);
}

nlohmann::json toJson(const ReplayReport& report, const ReplayOptions& o, const telemetry::RunInfo& run) {
  nlohmann::json modes = nlohmann::json::object();
  for (const ModeResult& m : report.modes) {
    modes[m.mode] = {{"step_time_s", m.stepSeconds},
                     {"throughput", m.throughput},
                     {"speedup", m.speedup},
                     {"comm_share", m.commShare},
                     {"sync_time_s", m.syncSeconds},
                     {"exposed_comm_s", m.exposedSeconds},
                     {"overlap_efficiency", m.overlapEfficiency},
                     {"compute_time_s", m.computeSeconds},
                     {"bus_bandwidth_gbs", m.busBandwidthGBs},
                     {"collectives_per_step", m.collectivesPerStep},
                     {"algorithm", m.algorithm},
                     {"step_time_samples_s", m.stepSamples},
                     {"seed_table", seedJson(seedColumnOf(m))},
                     {"link",
                      {{"inter_bytes_per_node", m.interBytesPerNode},
                       {"intra_bytes_per_node", m.intraBytesPerNode},
                       {"modelled_share", m.modelledShare}}}};
    if (o.linkOverhead) {
      modes[m.mode]["link_accounting_off"] = {
          {"step_time_s", m.stepSecondsAccountingOff},
          {"step_time_samples_s", m.stepSamplesAccountingOff},
          {"overhead", m.stepSecondsAccountingOff > 0 ? m.stepSeconds / m.stepSecondsAccountingOff - 1 : 0.0}};
    }
  }
  const double c = report.commShareTarget;
  // The share the baseline really had in the timed run (machine load moves
  // it away from the calibrated one), and the hiding bound at that share.
  double measuredShare = 0;
  double boostedSpeedup = 0;
  for (const ModeResult& m : report.modes) {
    if (m.mode == "baseline") measuredShare = m.commShare;
    if (m.mode == "boosted") boostedSpeedup = m.speedup;
  }
  const double measuredBound = measuredShare > 0 ? 1.0 / (1.0 - measuredShare) : 0.0;
  const double tailBound = tailBoundOf(report);
  nlohmann::json meta = telemetry::toJson(run);
  meta["tool"] = "boostcomm replay";
  meta["version"] = versionString();
  return {{"meta", meta},
          {"model", report.model},
          {"baseline_comm_share_measured", measuredShare},
          {"speedup_bound_measured", measuredBound},
          {"boosted_fraction_of_bound", measuredBound > 0 ? boostedSpeedup / measuredBound : 0.0},
          {"tail",
           {{"tensor", report.tailTensor},
            {"bytes", report.tailBytes},
            {"allreduce_time_s", report.tailSeconds},
            {"speedup_bound", tailBound},
            {"boosted_fraction_of_bound", tailBound > 0 ? boostedSpeedup / tailBound : 0.0}}},
          {"tensors", report.tensors},
          {"gradient_bytes", report.gradientBytes},
          {"ranks", report.ranks},
          {"comm_share_target", c},
          {"speedup_bound", c > 0 ? 1.0 / (1.0 - c) : 0.0},
          {"calibrated_sync_time_s", report.calibratedSyncSeconds},
          {"compute_time_s", report.computeSeconds},
          {"compute_emulation", o.compute == ComputeEmulation::kSleep ? "sleep" : "spin"},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"batch_per_rank", o.batchPerRank},
          {"bucket_bytes", o.overlap.bucketBytes},
          {"first_bucket_bytes", o.overlap.firstBucketBytes},
          {"stages", o.overlap.stages},
          {"buffers", o.overlap.bufferStrategy == BufferStrategy::kPingPong ? "pingpong"
                      : o.overlap.bufferStrategy == BufferStrategy::kSingle ? "single"
                                                                            : "list"},
          {"bucket_view", o.bucketView},
          {"epoch_samples", o.epochSamples},
          {"link_bandwidths",
           {{"intra_bytes_per_s", report.intraBytesPerSecond},
            {"inter_bytes_per_s", report.interBytesPerSecond},
            {"source", report.bandwidthSource}}},
          {"dropped_link_intervals", report.droppedIntervals},
          {"modes", modes}};
}

void printTable(const ReplayReport& r, const ReplayOptions& o) {
  std::printf("# replay %s: %zu tensors, %s of gradients, %d ranks, compute %.1f ms/step (%s)\n", r.model.c_str(),
              r.tensors, formatBytes(r.gradientBytes).c_str(), r.ranks, r.computeSeconds * 1e3,
              o.compute == ComputeEmulation::kSleep ? "sleep: accelerator-like" : "spin: CPU-bound");
  std::printf("# fused/boosted buckets: %s\n",
              o.bucketView ? "bucket view (gradients live in the buckets, no copies)"
              : o.overlap.bufferStrategy == BufferStrategy::kSegmentList
                  ? "segment lists (collectives read and write the gradients in place, no staging)"
                  : "copy (pack/unpack staging)");
  if (r.commShareTarget > 0) {
    std::printf("# calibrated: baseline sync %.1f ms -> comm share %.2f; hiding alone is bounded by 1/(1-c) = %.2fx\n",
                r.calibratedSyncSeconds * 1e3, r.commShareTarget, 1.0 / (1.0 - r.commShareTarget));
  }
  std::printf("%-9s %10s %12s %8s %10s %10s %10s %9s %8s %6s  %s\n", "mode", "step(ms)", "samples/s", "speedup",
              "comm-share", "sync(ms)", "exposed", "overlap%", "busGB/s", "colls", "algorithm");
  double measuredShare = 0;
  for (const ModeResult& m : r.modes) {
    if (m.mode == "baseline") measuredShare = m.commShare;
  }
  for (const ModeResult& m : r.modes) {
    std::printf("%-9s %10.2f %12.1f %7.3fx %10.3f %10.2f %10.2f %8.1f%% %8.2f %6zu  %s\n", m.mode.c_str(),
                m.stepSeconds * 1e3, m.throughput, m.speedup, m.commShare, m.syncSeconds * 1e3, m.exposedSeconds * 1e3,
                m.overlapEfficiency * 100, m.busBandwidthGBs, m.collectivesPerStep, m.algorithm.c_str());
  }
  if (measuredShare > 0 && measuredShare < 1) {
    std::printf("# baseline comm share measured in this run: %.3f -> bound 1/(1-c) = %.3fx\n", measuredShare,
                1.0 / (1.0 - measuredShare));
  }
  if (const double tailBound = tailBoundOf(r); tailBound > 0) {
    const ModeResult* boosted = modeOf(r, "boosted");
    std::printf("# tail: %s (%s) is ready only when backward ends; its allreduce alone takes %.1f ms, so overlap "
                "is bounded by baseline step / (compute + that) = %.3fx",
                r.tailTensor.c_str(), formatBytes(r.tailBytes).c_str(), r.tailSeconds * 1e3, tailBound);
    if (boosted && boosted->speedup > 0) std::printf("; boosted reaches %.1f%% of it", 100 * boosted->speedup / tailBound);
    std::printf("\n");
  }
  std::vector<SeedColumn> columns;
  for (const ModeResult& m : r.modes) columns.push_back(seedColumnOf(m));
  char title[256];
  std::snprintf(title, sizeof title,
                "the seed's table, measured (links: intra %.2f GB/s, inter %.3f GB/s from %s; epoch = %.0f samples)",
                r.intraBytesPerSecond / 1e9, r.interBytesPerSecond / 1e9, r.bandwidthSource.c_str(), o.epochSamples);
  printSeedTable(columns, title);
  if (r.droppedIntervals > 0) {
    std::printf("# warning: %llu inter-node in-flight intervals did not fit the accounting buffer: congestion undercounts\n",
                static_cast<unsigned long long>(r.droppedIntervals));
  }
  for (const ModeResult& m : r.modes) {
    std::printf("# %s: link bytes per node and step: intra %s, inter %s (%.0f%% modelled from backend/shm calls)\n",
                m.mode.c_str(), formatBytes(static_cast<std::size_t>(m.intraBytesPerNode)).c_str(),
                formatBytes(static_cast<std::size_t>(m.interBytesPerNode)).c_str(), m.modelledShare * 100);
    if (o.linkOverhead && m.stepSecondsAccountingOff > 0) {
      std::printf("# %s: link accounting on %.2f ms, off %.2f ms per step (median of %zu): overhead %+.2f%%\n",
                  m.mode.c_str(), m.stepSeconds * 1e3, m.stepSecondsAccountingOff * 1e3,
                  m.stepSamplesAccountingOff.size(), (m.stepSeconds / m.stepSecondsAccountingOff - 1) * 100);
    }
  }
  std::fflush(stdout);
}

}  // namespace

ExtraCommand addReplayCommand(CLI::App& app) {
  auto cli = std::make_shared<ReplayCli>();
  ReplayOptions& o = cli->options;
  CLI::App* cmd = app.add_subcommand(
      "replay", "Replay a model's training step (emulated backward + real gradient sync) in baseline, fused and "
                "boosted modes and print the before/after table (run under mpirun)");
  cmd->add_option("--model", o.model, "resnet50, bert-large, or a JSON profile file (docs/PROFILES.md)")
      ->capture_default_str();
  cmd->add_option("--comm-share", o.commShare,
                  "Calibrate the emulated compute so the baseline spends this fraction of its step in gradient "
                  "sync (0 = use --compute-seconds)")
      ->capture_default_str();
  cmd->add_option("--compute-seconds", o.computeSeconds, "Backward compute per step when not calibrating");
  cmd->add_option("--steps", o.steps, "Timed steps per mode (median reported)")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed steps per mode")->capture_default_str();
  cmd->add_option("--calibration-steps", o.calibrationSteps, "Baseline sync measurements for calibration")
      ->capture_default_str();
  cmd->add_option("--modes", o.modes, "Comma list of baseline, fused, boosted")->delimiter(',')->capture_default_str();
  cmd->add_option("--output", o.outputPath, "Write the results as JSON");
  cmd->add_option("--timeline", o.timelinePath,
                  "Chrome-trace timeline: one file per rank, merged into this path by rank 0 at the end");
  cmd->add_option("--compute", cli->computeText,
                  "Emulated compute: sleep (accelerator: the CPU is free while a layer computes) or spin (busy CPU)")
      ->check(CLI::IsMember({"sleep", "spin"}))
      ->capture_default_str();
  cmd->add_option("--batch", o.batchPerRank, "Samples per rank per step (throughput column)")->capture_default_str();
  cmd->add_option("--bucket-bytes", cli->bucketText, "Bucket limit of fused/boosted")->capture_default_str();
  cmd->add_option("--first-bucket-bytes", cli->firstBucketText, "First bucket limit (boosted starts early)")
      ->capture_default_str();
  cmd->add_option("--stages", o.overlap.stages, "Bucket collectives in flight")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--buffers", cli->buffersText, "list (in place, no staging copy), pingpong or single")
      ->check(CLI::IsMember({"list", "pingpong", "single"}))
      ->capture_default_str();
  cmd->add_option("--bucket-view", cli->bucketViewText,
                  "on: fused/boosted gradients live in the buckets (no pack/unpack copies, as DDP's "
                  "gradient_as_bucket_view); off: copied into staging buffers")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--topology", o.topologyPath,
                  "Link bandwidths for the utilisation rows from this `boostcomm topo` file (default: probe now)");
  cmd->add_option("--epoch-samples", o.epochSamples, "Samples per epoch, all ranks (sync-per-epoch row)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--link-overhead", o.linkOverhead,
                "Also run every step with link accounting off (interleaved) and report the overhead");
  cmd->add_flag("--json", cli->json, "Print the JSON (rank 0) instead of the table");

  ExtraCommand extra;
  extra.app = cmd;
  extra.run = [cli](Communicator* comm) {
    ReplayOptions& o = cli->options;
    const auto bucket = parseBytes(cli->bucketText);
    const auto first = parseBytes(cli->firstBucketText);
    if (!bucket || *bucket == 0) throw UsageError("--bucket-bytes: '" + cli->bucketText + "' is not a size");
    if (!first) throw UsageError("--first-bucket-bytes: '" + cli->firstBucketText + "' is not a size");
    o.overlap.bucketBytes = *bucket;
    o.overlap.firstBucketBytes = *first;
    o.overlap.bufferStrategy = cli->buffersText == "single"     ? BufferStrategy::kSingle
                               : cli->buffersText == "pingpong" ? BufferStrategy::kPingPong
                                                                : BufferStrategy::kSegmentList;
    o.compute = cli->computeText == "spin" ? ComputeEmulation::kSpin : ComputeEmulation::kSleep;
    o.bucketView = cli->bucketViewText == "on";
    const telemetry::RunInfo run = telemetry::currentRunInfo();  // the date is the run's start
    const ReplayReport report = runReplay(*comm, o);
    if (comm->rank() != 0) return 0;
    const nlohmann::json j = toJson(report, o, run);
    if (cli->json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      printTable(report, o);
    }
    if (!o.outputPath.empty()) {
      std::ofstream out(o.outputPath);
      out << j.dump(2) << "\n";
      if (!out.good()) throw Error(ErrorCategory::kInvalidArgument, 0, "replay: cannot write '" + o.outputPath + "'");
    }
    return 0;
  };
  return extra;
}

}  // namespace boostcomm::tools
