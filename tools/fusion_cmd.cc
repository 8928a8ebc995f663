// `boostcomm fusion`: GradientGroup and CollectiveFusion against the
// baselines, in one run (docs/PERF_FUSION.md).
//
//   --pattern gradients (default): a model's gradient tensors synchronised by
//     one MPI_Allreduce per tensor, by one packed MPI_Allreduce (pack + call +
//     unpack), and by GradientGroup in copy and bucket-view modes, for each
//     bucket size given (each size is its own block of rounds, baselines
//     re-measured beside it).
//   --pattern three-request: per layer an allgather of activations, an
//     allreduce of gradients and a broadcast of parameters; one blocking call
//     per request vs CollectiveFusion unfused (all async) vs fused.
// Every method's result is checked before timing. Rank 0 prints; --output
// writes JSON.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "extra_commands.h"
#include "fusion_bench.h"

namespace boostcomm::tools {
namespace {

struct FusionArgs {
  std::string model = "resnet50";
  std::string pattern = "gradients";
  std::string bucketBytes;  // comma-separated sizes; empty = library default
  std::string methods = "mpi_per_tensor,mpi_packed,group_list,group_packed,group_view";
  int layers = 24;
  TimingOptions timing;
  std::string output;
};

bool wanted(const FusionArgs& a, const std::string& method) {
  for (const std::string& m : splitList(a.methods))
    if (m == method) return true;
  return false;
}

using Json = nlohmann::ordered_json;

// Prints one block and returns its JSON. Speedups are against the faster of
// the methods named in `baselines` (their medians in this same block).
Json reportBlock(const std::vector<FusionMethod*>& methods, const std::vector<std::string>& checks,
                 const std::vector<std::string>& baselines, std::size_t bucketBytes, bool print) {
  double best = 0;
  std::string bestName;
  for (const FusionMethod* m : methods)
    for (const std::string& b : baselines)
      if (m->name == b && (best == 0 || median(m->stepUs) < best)) best = median(m->stepUs), bestName = b;
  Json block;
  block["bucket_bytes"] = bucketBytes;
  block["best_baseline"] = bestName;
  if (print) {
    std::printf("# bucket limit %s; speedup = median(%s) / median(method)\n",
                bucketBytes ? formatBytes(bucketBytes).c_str() : "default", bestName.c_str());
    std::printf("%-22s %9s %12s %12s %12s %8s %9s  %s\n", "method", "launches", "median_ms", "min_ms", "max_ms",
                "speedup", "build_ms", "check");
  }
  for (std::size_t i = 0; i < methods.size(); ++i) {
    const FusionMethod& m = *methods[i];
    const double med = median(m.stepUs);
    const auto [lo, hi] = std::minmax_element(m.stepUs.begin(), m.stepUs.end());
    const double speedup = med > 0 && best > 0 ? best / med : 0;
    if (print)
      std::printf("%-22s %9zu %12.3f %12.3f %12.3f %8.2f %9.2f  %s\n", m.name.c_str(), m.launchesPerStep, med / 1e3,
                  *lo / 1e3, *hi / 1e3, speedup, m.buildMs, checks[i].empty() ? "ok" : ("FAIL: " + checks[i]).c_str());
    Json j;
    j["method"] = m.name;
    j["launches_per_step"] = m.launchesPerStep;
    j["median_step_ms"] = med / 1e3;
    Json steps = Json::array();
    for (double us : m.stepUs) steps.push_back(us / 1e3);
    j["step_ms"] = steps;
    j["speedup_vs_best_baseline"] = speedup;
    if (m.buildMs > 0) j["build_ms"] = m.buildMs;
    j["check"] = checks[i].empty() ? "ok" : checks[i];
    block["methods"].push_back(j);
  }
  if (print) std::fflush(stdout);
  return block;
}

// Checks every method, then times them; returns the block.
Json runBlock(Communicator& comm, std::vector<FusionMethod*> methods, const std::vector<std::string>& baselines,
              std::size_t bucketBytes, const FusionArgs& a, bool& allOk) {
  std::vector<std::string> checks;
  for (FusionMethod* m : methods) {
    checks.push_back(m->check());
    allOk = allOk && checks.back().empty();
  }
  timeMethods(comm, methods, a.timing);
  return reportBlock(methods, checks, baselines, bucketBytes, comm.rank() == 0);
}

int runFusion(const FusionArgs& a, Communicator& comm) {
  const bool root = comm.rank() == 0;
  Json doc;
  doc["tool"] = "boostcomm fusion";
  doc["ranks"] = comm.size();
  doc["pattern"] = a.pattern;
  doc["iters"] = a.timing.iters;
  doc["warmup"] = a.timing.warmup;
  doc["repeats"] = a.timing.repeats;
  bool allOk = true;
  if (a.pattern == "three-request") {
    ThreeRequestSizes sizes;
    sizes.layers = a.layers;
    std::string plan;
    std::vector<FusionMethod> methods = threeRequestMethods(comm, sizes, plan);
    if (root)
      std::printf("# three-request pattern, %d ranks, %d layers: allgather %zu floats/rank, allreduce %zu floats, "
                  "broadcast %zu floats per layer\n# %s",
                  comm.size(), sizes.layers, sizes.activationCount, sizes.gradientCount, sizes.parameterCount,
                  plan.c_str());
    std::vector<FusionMethod*> ptrs;
    for (FusionMethod& m : methods) ptrs.push_back(&m);
    doc["layers"] = sizes.layers;
    doc["plan"] = plan;
    doc["blocks"].push_back(runBlock(comm, ptrs, {"separate_calls"}, 0, a, allOk));
  } else {
    const workloads::ModelProfile model = workloads::loadProfile(a.model);
    GradientSet set(model, comm.rank());
    doc["model"] = model.name;
    doc["tensors"] = model.tensors.size();
    doc["parameters"] = model.parameterCount();
    if (root)
      std::printf("# boostcomm fusion: %s, %zu tensors, %zu parameters (%.1f MB), %d ranks, iters %d, warmup %d, "
                  "repeats %d\n# step time = median over repeats of (block time / iters, max over ranks)\n",
                  model.name.c_str(), model.tensors.size(), model.parameterCount(), model.bytes() / 1e6, comm.size(),
                  a.timing.iters, a.timing.warmup, a.timing.repeats);
    std::vector<std::size_t> sizes;
    for (const std::string& s : splitList(a.bucketBytes)) {
      const auto bytes = parseBytes(s);
      if (!bytes || *bytes == 0) throw UsageError("--bucket-bytes: not a size: " + s);
      sizes.push_back(*bytes);
    }
    if (sizes.empty()) sizes.push_back(0);
    const std::vector<std::string> baselines = {"mpi_per_tensor", "mpi_packed"};
    std::vector<FusionMethod> base;
    if (wanted(a, "mpi_per_tensor")) base.push_back(mpiPerTensorMethod(comm, set));
    if (wanted(a, "mpi_packed")) base.push_back(mpiPackedMethod(comm, set));
    for (std::size_t bucketBytes : sizes) {
      std::vector<FusionMethod> groups;  // created per block: each holds registered buckets
      if (wanted(a, "group_list")) groups.push_back(gradientGroupMethod(comm, set, bucketBytes, GroupMode::kList));
      if (wanted(a, "group_packed") || wanted(a, "group_copy"))
        groups.push_back(gradientGroupMethod(comm, set, bucketBytes, GroupMode::kPacked));
      if (wanted(a, "group_view")) groups.push_back(gradientGroupMethod(comm, set, bucketBytes, GroupMode::kView));
      std::vector<FusionMethod*> ptrs;
      for (FusionMethod& m : base) m.stepUs.clear(), ptrs.push_back(&m);
      for (FusionMethod& m : groups) ptrs.push_back(&m);
      doc["blocks"].push_back(runBlock(comm, ptrs, baselines, bucketBytes, a, allOk));
    }
  }
  if (root && !a.output.empty()) {
    std::ofstream out(a.output);
    out << doc.dump(2) << "\n";
    if (!out) std::fprintf(stderr, "boostcomm fusion: cannot write %s\n", a.output.c_str());
  }
  return allOk ? 0 : 1;
}

}  // namespace

ExtraCommand addFusionCommand(CLI::App& app) {
  auto args = std::make_shared<FusionArgs>();
  CLI::App* sub = app.add_subcommand("fusion", "GradientGroup / CollectiveFusion vs MPI baselines (docs/PERF_FUSION.md)");
  sub->add_option("--model", args->model, "resnet50, bert-large or a JSON profile file")->capture_default_str();
  sub->add_option("--pattern", args->pattern, "gradients or three-request")
      ->check(CLI::IsMember({"gradients", "three-request"}))
      ->capture_default_str();
  sub->add_option("--bucket-bytes", args->bucketBytes,
                  "GradientGroup bucket limits, comma-separated (e.g. 1M,4M,25M); default: BOOSTCOMM_BUCKET_BYTES");
  sub->add_option("--methods", args->methods, "gradient methods to run, comma-separated")->capture_default_str();
  sub->add_option("--layers", args->layers, "three-request: layers")->capture_default_str();
  sub->add_option("-n,--iters", args->timing.iters, "steps per timed block")->capture_default_str();
  sub->add_option("-w,--warmup", args->timing.warmup, "untimed steps per method first")->capture_default_str();
  sub->add_option("-r,--repeats", args->timing.repeats, "rounds (the median is reported)")->capture_default_str();
  sub->add_option("-o,--output", args->output, "write the results as JSON to this file (rank 0)");
  ExtraCommand command;
  command.app = sub;
  command.run = [args](Communicator* comm) { return runFusion(*args, *comm); };
  return command;
}

}  // namespace boostcomm::tools
