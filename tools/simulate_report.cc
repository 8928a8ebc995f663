// What `boostcomm simulate` prints and writes. The sweep's JSON has bench's
// layout and record fields (docs/BENCH_JSON.md), so the same readers and
// plots work on predictions; meta.tool is "boostcomm simulate", every record
// has "predicted": true, check "skipped", and speedup_vs_native (modelled
// backend / this) in place of speedup_vs_mpi. Fields in docs/SIMULATOR.md.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "boostcomm/version.h"
#include "bench_json.h"
#include "cli_util.h"
#include "seed_table.h"
#include "simulate.h"

namespace boostcomm::tools {
namespace {

double nativeTimeUs(const std::vector<SimulateRecord>& records, std::size_t bytes) {
  for (const SimulateRecord& r : records) {
    if (r.bench.algorithm == "native" && r.bench.bytes == bytes) return r.bench.timeUs;
  }
  return 0;
}

std::string isoNow() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

std::string label(const SimulateRecord& r) {
  return r.bench.algorithm == r.bench.ranAlgorithm ? r.bench.algorithm : r.bench.algorithm + ":" + r.bench.ranAlgorithm;
}

}  // namespace

void printSimulateHeader(const SimulateSweep& sweep, const std::vector<std::string>& algos) {
  const BenchOptions& o = sweep.options;
  std::printf("# boostcomm simulate: %s, %d ranks (%s), dtype %s, op %s\n", std::string(toString(o.collective)).c_str(),
              sweep.cluster.ranks(), sweep.cluster.describe().c_str(), std::string(toString(o.dtype)).c_str(),
              opName(o).c_str());
  std::printf("# predicted times of one call (virtual time, no measurement noise); chunk %s, hier inter-node %s\n",
              formatBytes(sweep.chunkBytes).c_str(), sweep.interAlgorithm.c_str());
  std::printf("# native = the MPI library's collective, modelled as the algorithm in parentheses; tuned = the "
              "fastest candidate per size\n# algorithms:");
  for (const auto& a : algos) std::printf(" %s", a.c_str());
  std::printf("\n# vs_native = time_native / time; GB/s = 1e9 B/s\n#\n");
  std::printf("# %10s %12s  %-22s %12s %10s %10s %10s %8s\n", "size", "count", "algorithm", "time_us", "algbw_GBps",
              "busbw_GBps", "inter_MB", "vs_native");
  std::fflush(stdout);
}

void printSimulateSize(const std::vector<SimulateRecord>& records) {
  for (const SimulateRecord& r : records) {
    const double nativeUs = nativeTimeUs(records, r.bench.bytes);
    char speedup[16] = "-";
    if (nativeUs > 0 && r.bench.timeUs > 0 && r.bench.algorithm != "native") {
      std::snprintf(speedup, sizeof speedup, "%.2fx", nativeUs / r.bench.timeUs);
    }
    std::printf("  %10s %12zu  %-22s %12.2f %10.3f %10.3f %10.1f %8s\n", formatBytes(r.bench.bytes).c_str(),
                r.bench.count, label(r).c_str(), r.bench.timeUs, r.bench.algbwGBps, r.bench.busbwGBps,
                r.interBytes / 1e6, speedup);
  }
  std::fflush(stdout);
}

void writeSimulateJson(const SimulateSweep& sweep, const std::vector<SimulateRecord>& records, double wallSeconds) {
  using Json = nlohmann::ordered_json;
  const BenchOptions& o = sweep.options;
  const simulate::ClusterSpec& c = sweep.cluster;
  Json algorithms = Json::array();
  for (const SimulateRecord& r : records) {
    if (std::find(algorithms.begin(), algorithms.end(), r.bench.algorithm) == algorithms.end()) {
      algorithms.push_back(r.bench.algorithm);
    }
  }
  Json doc;
  doc["meta"] = {
      {"schema_version", 1},
      {"tool", "boostcomm simulate"},
      {"version", versionString()},
      {"date", isoNow()},
      {"ranks", c.ranks()},
      {"collective", std::string(toString(o.collective))},
      {"dtype", std::string(toString(o.dtype))},
      {"op", opName(o)},
      {"root", o.collective == Collective::kBroadcast ? Json(o.root) : Json(nullptr)},
      {"minbytes", o.minBytes},
      {"maxbytes", o.maxBytes},
      {"stepfactor", o.stepFactor},
      {"check", false},
      {"algorithms", algorithms},
      {"predicted", true},
      {"cluster",
       {{"nodes", c.nodes},
        {"ranks_per_node", c.ranksPerNode},
        {"intra_GBps", c.intra.bytesPerSecond / 1e9},
        {"intra_latency_us", c.intra.latencySeconds * 1e6},
        {"inter_GBps", c.inter.bytesPerSecond / 1e9},
        {"inter_latency_us", c.inter.latencySeconds * 1e6},
        {"memory_GBps", c.memoryBytesPerSecond / 1e9},
        {"node_bus_GBps", c.nodeBusBytesPerSecond / 1e9},
        {"intra_copy_on_cpu", c.intraCopyOnCpu}}},
      {"chunk_bytes", sweep.chunkBytes},
      {"inter_algorithm", sweep.interAlgorithm},
      {"wall_s", wallSeconds},
  };
  Json results = Json::array();
  for (const SimulateRecord& s : records) {
    const BenchRecord& r = s.bench;
    const double nativeUs = nativeTimeUs(records, r.bytes);
    Json record = recordJson(r, o, c.ranks());
    record["speedup_vs_native"] = nativeUs > 0 && r.timeUs > 0 ? Json(nativeUs / r.timeUs) : Json(nullptr);
    record["inter_node_bytes"] = s.interBytes;
    record["intra_node_bytes"] = s.intraBytes;
    record["predicted"] = true;
    results.push_back(std::move(record));
  }
  doc["results"] = std::move(results);
  std::ofstream out(o.outputPath);
  out << doc.dump(2) << '\n';
  if (!out) throw UsageError("--output: cannot write " + o.outputPath);
}

void printReplayTable(const simulate::ClusterSpec& cluster, const simulate::ReplaySimReport& r,
                      const simulate::ReplaySimOptions& o) {
  std::printf("# simulated replay %s: %zu tensors, %s of gradients, %d ranks (%s)\n", r.model.c_str(), r.tensors,
              formatBytes(r.gradientBytes).c_str(), r.ranks, cluster.describe().c_str());
  if (o.commShare > 0) {
    std::printf("# backward compute %.2f ms/step, calibrated so the baseline communicates %.0f%% of its step\n",
                r.computeSeconds * 1e3, o.commShare * 100);
  } else {
    std::printf("# backward compute %.2f ms/step: batch %d per rank at %.0f TFLOP/s sustained\n", r.computeSeconds * 1e3,
                o.batchPerRank, o.deviceFlopsPerSecond / 1e12);
  }
  std::printf("# buckets %s (first %s); step = backward + communication still running after it\n",
              formatBytes(o.bucketBytes).c_str(), formatBytes(o.firstBucketBytes).c_str());
  std::printf("%-9s %10s %12s %8s %10s %10s %12s %6s  %s\n", "mode", "step(ms)", "samples/s", "speedup", "comm-share",
              "sync(ms)", "exposed(ms)", "colls", "algorithms");
  for (const simulate::ReplaySimMode& m : r.modes) {
    std::printf("%-9s %10.2f %12.0f %7.2fx %10.2f %10.2f %12.2f %6zu  %s\n", m.mode.c_str(), m.stepSeconds * 1e3,
                m.throughput, m.speedup, m.commShare, m.syncSeconds * 1e3, m.exposedSeconds * 1e3, m.collectives,
                m.algorithms.c_str());
  }
  std::vector<SeedColumn> columns;
  for (const simulate::ReplaySimMode& m : r.modes) columns.push_back(seedColumnOf(m));
  char title[256];
  std::snprintf(title, sizeof title, "the seed's table, simulated (links: intra %.2f GB/s, inter %.3f GB/s; epoch = %.0f samples)",
                cluster.intra.bytesPerSecond / 1e9, cluster.inter.bytesPerSecond / 1e9, o.epochSamples);
  printSeedTable(columns, title);
}

void writeReplayJson(const simulate::ClusterSpec& cluster, const simulate::ReplaySimReport& r,
                     const simulate::ReplaySimOptions& o, const std::string& path) {
  nlohmann::ordered_json modes = nlohmann::ordered_json::object();
  for (const simulate::ReplaySimMode& m : r.modes) {
    modes[m.mode] = {{"step_time_s", m.stepSeconds},      {"throughput", m.throughput},
                     {"speedup", m.speedup},              {"comm_share", m.commShare},
                     {"sync_time_s", m.syncSeconds},      {"exposed_comm_s", m.exposedSeconds},
                     {"compute_time_s", m.computeSeconds}, {"collectives_per_step", m.collectives},
                     {"algorithms", m.algorithms},
                     {"seed_table", seedJson(seedColumnOf(m))}};
  }
  nlohmann::ordered_json doc = {{"tool", "boostcomm simulate replay"},
                                {"predicted", true},
                                {"model", r.model},
                                {"tensors", r.tensors},
                                {"gradient_bytes", r.gradientBytes},
                                {"ranks", r.ranks},
                                {"cluster", cluster.describe()},
                                {"batch_per_rank", o.batchPerRank},
                                {"device_tflops", o.deviceFlopsPerSecond / 1e12},
                                {"comm_share_target", o.commShare},
                                {"bucket_bytes", o.bucketBytes},
                                {"first_bucket_bytes", o.firstBucketBytes},
                                {"compute_time_s", r.computeSeconds},
                                {"epoch_samples", o.epochSamples},
                                {"modes", modes}};
  std::ofstream out(path);
  out << doc.dump(2) << '\n';
  if (!out) throw UsageError("--output: cannot write " + path);
}

}  // namespace boostcomm::tools
