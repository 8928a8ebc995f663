// What `boostcomm bench` prints (rank 0) and writes with --output. The JSON
// schema is documented in docs/BENCH_JSON.md; bump kSchemaVersion when a
// field changes meaning or disappears (adding fields keeps the version).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_internal.h"
#include "bench.h"
#include "bench_json.h"
#include "cli_util.h"

namespace boostcomm::tools {
namespace {

constexpr int kSchemaVersion = 1;

// time of the "mpi" record of the same size, or 0 when it did not run.
double mpiTimeUs(const std::vector<BenchRecord>& records, std::size_t bytes) {
  for (const BenchRecord& r : records) {
    if (r.algorithm == kAlgoMpi && r.bytes == bytes) return r.timeUs;
  }
  return 0;
}

std::string opName(const BenchMeta& meta) { return opName(meta.options); }

std::string algoLabel(const BenchRecord& r) {
  const std::string name = algoPart(r.algorithm);
  const std::string base = name == kAlgoSelected ? "selected:" + r.ranAlgorithm : name;
  // NAME+WIRE as requested, "=RAN" when the payload travelled otherwise (auto resolved, or an
  // algorithm that cannot carry the format).
  const std::string off = fingerprintsOff(r.algorithm) ? kNoFingerprintsSuffix : "";
  if (r.wire.empty()) return base + off;
  return base + "+" + r.wire + (r.ranWire == r.wire ? "" : "=" + r.ranWire) + off;
}

// --fingerprints-ab: per algorithm, the geometric mean over sizes of its
// time against its "@nofp" twin's in the same run.
void printFingerprintCost(const std::vector<BenchRecord>& records) {
  std::map<std::string, std::pair<double, int>> logRatio;  // name -> (sum of logs, sizes)
  std::vector<std::string> order;
  for (const BenchRecord& off : records) {
    if (!fingerprintsOff(off.algorithm) || off.timeUs <= 0) continue;
    const std::string on = off.algorithm.substr(0, off.algorithm.size() - std::string_view(kNoFingerprintsSuffix).size());
    for (const BenchRecord& r : records) {
      if (r.algorithm != on || r.bytes != off.bytes || r.timeUs <= 0) continue;
      if (!logRatio.contains(on)) order.push_back(on);
      logRatio[on].first += std::log(r.timeUs / off.timeUs);
      ++logRatio[on].second;
    }
  }
  if (order.empty()) return;
  std::printf("# fingerprint cost (time / time@nofp, geomean over sizes):");
  for (const auto& name : order) {
    const auto& [sum, n] = logRatio[name];
    std::printf(" %s %+.1f%%", name.c_str(), 100.0 * (std::exp(sum / n) - 1.0));
  }
  std::printf("\n");
}

}  // namespace

std::string opName(const BenchOptions& options) {
  return isReducing(options.collective) ? std::string(toString(options.op)) : "none";
}

nlohmann::ordered_json recordJson(const BenchRecord& r, const BenchOptions& o, int ranks) {
  return {
      {"collective", std::string(toString(o.collective))},
      {"algorithm", r.algorithm},
      {"ran_algorithm", r.ranAlgorithm},
      {"wire", r.wire.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.wire)},
      {"ran_wire", r.ranWire},
      {"selected_algorithm",
       r.selectedAlgorithm.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.selectedAlgorithm)},
      {"dtype", std::string(toString(o.dtype))},
      {"op", opName(o)},
      {"ranks", ranks},
      {"bytes", r.bytes},
      {"count", r.count},
      {"count_per_rank", r.countPerRank},
      {"time_us", r.timeUs},
      {"time_us_min", r.timeUsMin},
      {"time_us_max", r.timeUsMax},
      {"algbw_GBps", r.algbwGBps},
      {"busbw_GBps", r.busbwGBps},
      {"check", r.check},
  };
}

void printBenchHeader(const BenchMeta& meta, const std::vector<std::string>& algos) {
  const BenchOptions& o = meta.options;
  std::printf("# boostcomm bench: %s, %d ranks, dtype %s, op %s", std::string(toString(o.collective)).c_str(),
              meta.ranks, std::string(toString(o.dtype)).c_str(), opName(meta).c_str());
  if (o.collective == Collective::kBroadcast) std::printf(", root %d", o.root);
  std::printf("\n# boostcomm %s, %s, reduce kernels %s, host %s, %s\n", meta.version.c_str(),
              meta.mpiLibrary.c_str(), meta.reduceIsa.c_str(), meta.hostname.c_str(), meta.date.c_str());
  std::printf("# iters %d, warmup %d, repeats %d: time_us is per call, the median over repeats of each "
              "block's max over ranks\n",
              o.iters, o.warmup, o.repeats);
  std::printf("# single-thread memcpy %.2f GB/s (64 MiB, median of 5); GB/s = 1e9 B/s\n", meta.memcpyGBps);
  if (meta.options.zeroCopy) std::printf("# buffers: registered (allocateBuffer, --zero-copy)\n");
  std::printf("# algorithms:");
  for (const auto& a : algos) std::printf(" %s", a.c_str());
  std::printf("\n# check: %s; vs_mpi = time_mpi / time\n#\n", o.check ? "on" : "off");
  std::printf("# %10s %12s  %-18s %11s %10s %10s %8s %6s %7s\n", "size", "count", "algorithm", "time_us",
              "algbw_GBps", "busbw_GBps", "bus/mcpy", "check", "vs_mpi");
  std::fflush(stdout);
}

void printSizeBlock(const BenchMeta& meta, const std::vector<BenchRecord>& records) {
  for (const BenchRecord& r : records) {
    const double mpiUs = mpiTimeUs(records, r.bytes);
    char speedup[16] = "-";
    if (mpiUs > 0 && r.timeUs > 0 && r.algorithm != kAlgoMpi) {
      const double ratio = mpiUs / r.timeUs;
      std::snprintf(speedup, sizeof speedup, ratio >= 0.01 ? "%.2fx" : "%.1ex", ratio);
    }
    const double fraction = meta.memcpyGBps > 0 ? 100.0 * r.busbwGBps / meta.memcpyGBps : 0.0;
    std::printf("  %10s %12zu  %-18s %11.2f %10.3f %10.3f %7.1f%% %6s %7s\n", formatBytes(r.bytes).c_str(), r.count,
                algoLabel(r).c_str(), r.timeUs, r.algbwGBps, r.busbwGBps, fraction, r.check.c_str(), speedup);
  }
  std::fflush(stdout);
}

void printBenchSummary(const BenchMeta& meta, const std::vector<BenchRecord>& records) {
  int ok = 0;
  int failed = 0;
  int skipped = 0;
  // Per algorithm: mean busbw and geometric mean of the speedup over mpi.
  struct Totals {
    double busbw = 0;
    int sizes = 0;
    double logSpeedup = 0;
    int speedups = 0;
  };
  std::map<std::string, Totals> totals;
  std::vector<std::string> order;
  for (const BenchRecord& r : records) {
    ok += r.check == "ok";
    failed += r.check == "fail";
    skipped += r.check == "skipped";
    if (!totals.contains(r.algorithm)) order.push_back(r.algorithm);
    Totals& t = totals[r.algorithm];
    t.busbw += r.busbwGBps;
    ++t.sizes;
    const double mpiUs = mpiTimeUs(records, r.bytes);
    if (r.algorithm != kAlgoMpi && mpiUs > 0 && r.timeUs > 0 && r.bytes > 0) {
      t.logSpeedup += std::log(mpiUs / r.timeUs);
      ++t.speedups;
    }
  }
  std::printf("#\n# checks: %d ok, %d failed, %d skipped\n# avg busbw GB/s:", ok, failed, skipped);
  for (const auto& name : order) std::printf(" %s %.3f", name.c_str(), totals[name].busbw / totals[name].sizes);
  bool anySpeedup = false;
  for (const auto& name : order) anySpeedup |= totals[name].speedups > 0;
  if (anySpeedup) {
    std::printf("\n# geomean speedup vs mpi (sizes > 0):");
    for (const auto& name : order) {
      const Totals& t = totals[name];
      if (t.speedups > 0) std::printf(" %s %.2fx", name.c_str(), std::exp(t.logSpeedup / t.speedups));
    }
  }
  std::printf("\n");
  printFingerprintCost(records);
  if (!meta.options.outputPath.empty()) std::printf("# results written to %s\n", meta.options.outputPath.c_str());
  std::fflush(stdout);
}

void writeBenchJson(const BenchMeta& meta, const std::vector<BenchRecord>& records, const std::string& path) {
  using Json = nlohmann::ordered_json;
  const BenchOptions& o = meta.options;
  Json algorithms = Json::array();
  for (const BenchRecord& r : records) {
    if (std::find(algorithms.begin(), algorithms.end(), r.algorithm) == algorithms.end()) algorithms.push_back(r.algorithm);
  }
  Json doc;
  doc["meta"] = {
      {"schema_version", kSchemaVersion},
      {"tool", "boostcomm bench"},
      {"command", telemetry::currentRunInfo().command},
      {"version", meta.version},
      {"date", meta.date},
      {"hostname", meta.hostname},
      {"mpi_library", meta.mpiLibrary},
      {"reduce_isa", meta.reduceIsa},
      {"ranks", meta.ranks},
      {"collective", std::string(toString(o.collective))},
      {"dtype", std::string(toString(o.dtype))},
      {"op", opName(meta)},
      {"root", o.collective == Collective::kBroadcast ? Json(o.root) : Json(nullptr)},
      {"minbytes", o.minBytes},
      {"maxbytes", o.maxBytes},
      {"stepfactor", o.stepFactor},
      {"iters", o.iters},
      {"warmup", o.warmup},
      {"repeats", o.repeats},
      {"check", o.check},
      {"algorithms", algorithms},
      {"memcpy_GBps", meta.memcpyGBps},
  };
  Json results = Json::array();
  for (const BenchRecord& r : records) {
    const double mpiUs = mpiTimeUs(records, r.bytes);
    Json record = recordJson(r, o, meta.ranks);
    record["busbw_memcpy_frac"] = meta.memcpyGBps > 0 ? Json(r.busbwGBps / meta.memcpyGBps) : Json(nullptr);
    record["speedup_vs_mpi"] = mpiUs > 0 && r.timeUs > 0 ? Json(mpiUs / r.timeUs) : Json(nullptr);
    results.push_back(std::move(record));
  }
  doc["results"] = std::move(results);
  std::ofstream out(path);
  out << doc.dump(2) << '\n';
  if (!out) throw UsageError("--output: cannot write " + path);
}

}  // namespace boostcomm::tools

namespace boostcomm::tools {

int auditSelection(const BenchMeta& meta, const std::vector<BenchRecord>& records, bool print) {
  const double margin = meta.options.auditMarginPercent / 100.0;
  if (print) {
    std::printf("#\n# audit: selected vs the fastest measured algorithm per size (fails above %.0f%%)\n",
                meta.options.auditMarginPercent);
    std::printf("# %10s  %-14s %12s  %-14s %12s  %7s  %s\n", "size", "selected", "time_us", "best", "time_us",
                "ratio", "verdict");
  }
  int slow = 0;
  int sizes = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const BenchRecord& sel = records[i];
    if (sel.algorithm != kAlgoSelected || sel.bytes == 0) continue;
    const BenchRecord* best = nullptr;
    for (const BenchRecord& r : records) {
      if (r.bytes != sel.bytes || r.algorithm == kAlgoSelected || r.algorithm == kAlgoMpi || r.timeUs <= 0) continue;
      if (best == nullptr || r.timeUs < best->timeUs) best = &r;
    }
    if (best == nullptr) continue;
    ++sizes;
    const double ratio = sel.timeUs / best->timeUs;
    const bool ok = ratio <= 1.0 + margin;
    slow += ok ? 0 : 1;
    if (print) {
      std::printf("  %10s  %-14s %12.2f  %-14s %12.2f  %6.2fx  %s\n", formatBytes(sel.bytes).c_str(),
                  sel.ranAlgorithm.c_str(), sel.timeUs, best->algorithm.c_str(), best->timeUs, ratio,
                  ok ? "ok" : "SLOW");
    }
  }
  if (print) std::printf("# audit: %d of %d sizes within %.0f%% of the best\n", sizes - slow, sizes,
                         meta.options.auditMarginPercent);
  return slow;
}

}  // namespace boostcomm::tools
