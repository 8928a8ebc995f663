// `boostcomm tune`: a tuning sweep on the running job (docs/TUNING.md).
//
//   mpirun -np 2 boostcomm tune -c allreduce,reduce_scatter -b 1K -e 16M -f 4 --cache tuning.json
//
// For each collective and size: every candidate algorithm (native included)
// is timed with warm-up and samples, the slowest rank counting; the winner
// goes into the cache. Then, with those winners in force, the fusion bucket
// size (GradientGroup over a model's gradients) and the pipelining chunk
// size are tuned. Rank 0 shows progress on stderr, prints a table per
// collective on stdout and writes the cache; later runs load it with
// BOOSTCOMM_TUNING_CACHE=FILE.
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli_internal.h"
#include "boostcomm/autotune.h"
#include "cli_util.h"
#include "extra_commands.h"
#include "tune_report.h"

namespace boostcomm::tools {
namespace {

struct TuneArgs {
  std::string collectives = "allreduce,reduce_scatter,allgather";
  std::string minBytes = "1K";
  std::string maxBytes = "16M";
  int factor = 4;
  std::string dtype = "float32";
  int samples = 0;
  int warmup = TuneOptions{}.warmup;
  int marginPercent = -1;
  std::string cache;
  bool flat = false;
  bool noProbe = false;
  bool noKnobs = false;
  std::string model = "resnet50";
  std::string buckets = "1M,4M,16M,64M";
  std::string chunks = "256K,1M,4M";
  std::string chunkPayload = "16M";
};

std::vector<std::size_t> sizeList(const std::string& text, const char* option) {
  std::vector<std::size_t> out;
  for (const std::string& s : splitList(text)) out.push_back(positiveBytes(s, option));
  if (out.empty()) throw UsageError(std::string(option) + ": no sizes given");
  return out;
}

// What `boostcomm tune`'s arguments ask for, checked (UsageError naming the option).
struct TunePlan {
  std::vector<Collective> collectives;
  DataType dtype = DataType::kFloat32;
  std::vector<std::size_t> sizes;
  std::vector<std::size_t> buckets;
  std::vector<std::size_t> chunks;
  std::size_t chunkPayload = 0;
  std::string path;  // the cache file
};

TunePlan planOf(const TuneArgs& a) {
  TunePlan plan;
  for (const std::string& name : splitList(a.collectives)) {
    const auto coll = parseCollective(name);
    if (!coll || *coll == Collective::kBarrier)
      throw UsageError("-c: '" + name + "' is not one of allreduce, allgather, broadcast, reduce_scatter");
    plan.collectives.push_back(*coll);
  }
  const auto dtype = parseDataType(a.dtype);
  if (!dtype) throw UsageError("-d: unknown dtype '" + a.dtype + "'");
  plan.dtype = *dtype;
  const std::size_t lo = positiveBytes(a.minBytes, "-b");
  const std::size_t hi = positiveBytes(a.maxBytes, "-e");
  if (lo > hi || a.factor < 2) throw UsageError("need -b <= -e and -f >= 2");
  for (std::size_t s = lo; s <= hi; s *= static_cast<std::size_t>(a.factor)) plan.sizes.push_back(s);
  plan.buckets = sizeList(a.buckets, "--buckets");
  plan.chunks = sizeList(a.chunks, "--chunks");
  plan.chunkPayload = positiveBytes(a.chunkPayload, "--chunk-payload");
  plan.path = a.cache;
  if (plan.path.empty()) plan.path = core::tunableString(core::kTunableTuningCache);
  if (plan.path.empty()) plan.path = "boostcomm_tuning.json";
  return plan;
}

// Collective: an existing cache of this job at `path`, to extend; anything else starts anew.
TuningCache cacheToExtend(Communicator& comm, const std::string& path) {
  const TuningSignature signature = currentSignature(comm);
  TuningCache cache(signature);
  const TuningCache::LoadResult loaded = loadTuningCache(comm, path, cache);
  if (comm.rank() == 0) {
    std::printf("# boostcomm tune: %s\n# cache: %s (%s)\n", signature.describe().c_str(), path.c_str(),
                loaded.status == TuningCache::LoadStatus::kLoaded
                    ? ("extending " + std::to_string(cache.entries().size()) + " entries").c_str()
                    : "new");
    if (loaded.status == TuningCache::LoadStatus::kMismatch || loaded.status == TuningCache::LoadStatus::kCorrupt)
      std::fprintf(stderr, "[boostcomm] %s\n[tune] rebuilding '%s' from scratch\n", loaded.notice.c_str(), path.c_str());
    std::fflush(stdout);
  }
  if (loaded.status != TuningCache::LoadStatus::kLoaded) cache = TuningCache(signature);
  const telemetry::RunInfo run = telemetry::currentRunInfo();
  cache.meta = {{"tool", "boostcomm tune"}, {"command", run.command}, {"hostname", run.hostname}, {"date", run.date}};
  return cache;
}

// Rank 0: the tables of what was measured, then the file.
void reportAndSave(const TuneArgs& a, const TunePlan& plan, TuningCache& cache, const Tuner& tuner, int worldSize,
                   const std::map<std::size_t, double>& bucketTimes, const std::map<std::size_t, double>& chunkTimes) {
  for (Collective coll : plan.collectives) printTuneTable(cache.entries(), coll, worldSize, tuner.options().samples);
  std::printf(
      "# margin: runner-up / winner; x_native, x_default: their time / the winner's (the default is what the\n"
      "# selection chose before this measurement); model: the cost model's choice and its predicted time. Native\n"
      "# or the default keeps the choice unless another candidate is faster by more than %.0f%% (noise margin).\n",
      tuner.options().margin * 100.0);
  if (!a.noKnobs) {
    printKnobTable(("fusion bucket size, GradientGroup step of " + a.model).c_str(), bucketTimes, cache.bucketBytes,
                   core::tunableBytes(core::kTunableBucketBytes));
    printKnobTable(("chunk size, allreduce of " + formatBytes(plan.chunkPayload)).c_str(), chunkTimes,
                   cache.chunkBytes, core::tunableBytes(core::kTunableRingChunkBytes));
  }
  cache.save(plan.path);
  std::printf("\n# wrote %s: %zu entries. Use it with BOOSTCOMM_TUNING_CACHE=%s\n", plan.path.c_str(),
              cache.entries().size(), plan.path.c_str());
}

int runTune(const TuneArgs& a, Communicator& comm) {
  const bool root = comm.rank() == 0;
  const TunePlan plan = planOf(a);
  TuningCache cache = cacheToExtend(comm, plan.path);

  TuneOptions options;
  options.samples = a.samples;
  options.warmup = a.warmup;
  options.margin = a.marginPercent >= 0 ? a.marginPercent / 100.0 : -1.0;
  options.hierarchical = !a.flat;
  options.probeLinks = !a.noProbe;
  if (root && options.probeLinks) std::fprintf(stderr, "[tune] probing links for the cost model ...\n");
  Tuner tuner(comm, options);
  const Topology& topo = tuner.topology();
  cache.intraNode = topo.intraNode;
  cache.interNode = topo.interNode;
  cache.coresPerNode = topo.cores.empty() ? 0 : topo.cores.front();

  const int knobSteps = a.noKnobs ? 0 : 2;
  TuneProgress progress(static_cast<int>(plan.collectives.size() * plan.sizes.size()) + knobSteps, root);
  for (Collective coll : plan.collectives) {
    for (std::size_t bytes : plan.sizes) {
      progress.step(std::string(toString(coll)) + " " + formatBytes(bytes));
      cache.upsert(tuner.tune(coll, plan.dtype, bytes));
    }
  }
  // The knobs are tuned with the collectives' winners in force.
  applyTuningCache(comm, cache);
  std::map<std::size_t, double> bucketTimes;
  std::map<std::size_t, double> chunkTimes;
  if (!a.noKnobs) {
    const workloads::ModelProfile profile = workloads::loadProfile(a.model);
    std::vector<std::size_t> counts;
    for (const workloads::TensorProfile& t : profile.tensors) counts.push_back(t.count());
    progress.step("fusion bucket size (" + profile.name + ", " + formatBytes(profile.bytes()) + ")");
    cache.bucketBytes = tuner.tuneBucketBytes(counts, plan.buckets, &bucketTimes);
    cache.bucketTimesUs = bucketTimes;
    progress.step("chunk size (allreduce " + formatBytes(plan.chunkPayload) + ")");
    cache.chunkBytes = tuner.tuneChunkBytes(plan.chunkPayload, plan.chunks, &chunkTimes);
    cache.chunkTimesUs = chunkTimes;
    applyTuningCache(comm, cache);
  }
  progress.done();
  if (root) reportAndSave(a, plan, cache, tuner, comm.size(), bucketTimes, chunkTimes);
  return 0;
}

}  // namespace

ExtraCommand addTuneCommand(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* sub = app.add_subcommand("tune", "measure the algorithms on this job and write a tuning cache (docs/TUNING.md)");
  sub->add_option("-c,--collectives", args->collectives, "comma-separated collectives")->capture_default_str();
  sub->add_option("-b,--minbytes", args->minBytes, "smallest payload")->capture_default_str();
  sub->add_option("-e,--maxbytes", args->maxBytes, "largest payload")->capture_default_str();
  sub->add_option("-f,--stepfactor", args->factor, "size multiplication factor")->capture_default_str();
  sub->add_option("-d,--dtype", args->dtype, "data type")->capture_default_str();
  sub->add_option("--samples", args->samples, "timed calls per candidate (0: BOOSTCOMM_TUNE_SAMPLES)");
  sub->add_option("-w,--warmup", args->warmup, "untimed calls per candidate")->capture_default_str();
  sub->add_option("--margin-percent", args->marginPercent, "noise margin (default BOOSTCOMM_TUNE_MARGIN_PERCENT)");
  sub->add_option("--cache", args->cache, "cache file (default BOOSTCOMM_TUNING_CACHE, else boostcomm_tuning.json)");
  sub->add_flag("--flat", args->flat, "leave out hierarchical candidates");
  sub->add_flag("--no-probe", args->noProbe, "do not probe the links (cost model uses built-in defaults)");
  sub->add_flag("--no-knobs", args->noKnobs, "skip the fusion bucket and chunk size tuning");
  sub->add_option("--model", args->model, "gradient profile for the bucket tuning")->capture_default_str();
  sub->add_option("--buckets", args->buckets, "candidate fusion bucket sizes")->capture_default_str();
  sub->add_option("--chunks", args->chunks, "candidate chunk sizes")->capture_default_str();
  sub->add_option("--chunk-payload", args->chunkPayload, "allreduce payload of the chunk tuning")->capture_default_str();
  ExtraCommand command;
  command.app = sub;
  command.run = [args](Communicator* comm) { return runTune(*args, *comm); };
  return command;
}

}  // namespace boostcomm::tools
