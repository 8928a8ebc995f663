// The tuning entry points that take a Communicator: apply or load a cache,
// and the *Autotune calls (measure once per size class, then reuse).
#include <cstdio>

#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/autotune.h"
#include "core/check.h"
#include "core/tunables.h"
#include "tuning/tuned_selection.h"

namespace boostcomm {
namespace {

std::shared_ptr<const tuning::TunedSelection> selectionFor(Communicator& comm,
                                                           std::shared_ptr<const TuningCache> cache) {
  detail::CommunicatorImpl& impl = detail::implOf(comm);
  const algorithms::CollectiveSpec self = impl.describeSelf();
  const tuning::CostParams params =
      tuning::paramsForCache(*cache, impl.layout(), comm.size(), self.sharedMemory, self.chunkBytes);
  const bool model = core::tunableBool(core::kTunableTuningModel);
  return std::make_shared<tuning::TunedSelection>(std::move(cache), params, self, model);
}

// The communicator's cache, or an empty one with the job's signature (collective then).
TuningCache cacheToExtend(Communicator& comm) {
  if (auto current = tuningCacheOf(comm)) return *current;
  return TuningCache(currentSignature(comm));
}

AutotuneResult autotune(Communicator& comm, Collective coll, ConstView input, View output, ReduceOp op,
                        bool autoStrategy) {
  TuningCache cache = cacheToExtend(comm);
  const std::size_t bytes = coll == Collective::kReduceScatter ? input.count * dataTypeSize(input.dtype)
                                                               : output.count * dataTypeSize(output.dtype);
  AutotuneResult result;
  const TuningEntry* known = cache.lookup(coll, output.dtype, bytes);
  // Reuse only a decision measured at this dtype and within the same power
  // of two, among the same kind of candidates (flat only when autoStrategy is off).
  const bool reusable =
      known != nullptr && known->dtype == output.dtype && known->bytes <= 2 * bytes && bytes <= 2 * known->bytes &&
      (autoStrategy || detail::implOf(comm).describeSelf().layout->nodes() < 2 || known->winner != "hier");
  if (reusable) {
    result.entry = *known;
    result.fromCache = true;
  } else {
    TuneOptions options;
    options.hierarchical = autoStrategy;
    options.probeLinks = false;  // the cost model's estimate is only reported here
    Tuner tuner(comm, options);
    result.entry = tuner.tune(coll, output.dtype, bytes);
    cache.upsert(result.entry);
    detail::implOf(comm).setTunedSelection(selectionFor(comm, std::make_shared<TuningCache>(std::move(cache))));
  }
  result.selectedAlgorithm = result.entry.winner;
  result.defaultAlgorithm = result.entry.defaultAlgorithm;
  result.speedup = result.entry.speedupOverDefault();
  // The real call, once, on the caller's buffers (the measurements ran on
  // scratch buffers, so in-place calls are not reduced twice).
  CallOptions call;
  call.algorithm = result.selectedAlgorithm;
  switch (coll) {
    case Collective::kAllreduce:
      comm.allreduce(input, output, op, call);
      break;
    case Collective::kAllgather:
      comm.allgather(input, output, call);
      break;
    case Collective::kReduceScatter:
      comm.reduceScatter(input, output, op, call);
      break;
    default:
      BC_INTERNAL(false, "autotune: unsupported collective " << toString(coll));
  }
  return result;
}

}  // namespace

TuningSignature currentSignature(Communicator& comm) {
  DetectOptions layoutOnly;
  layoutOnly.probe = false;
  return signatureOf(detectTopology(comm, layoutOnly));
}

bool applyTuningCache(Communicator& comm, const TuningCache& cache) {
  const TuningSignature job = currentSignature(comm);
  if (!(cache.signature() == job)) {
    if (comm.rank() == 0) {
      std::fprintf(stderr, "[boostcomm] tuning cache was tuned for %s, this job is %s: ignored\n",
                   cache.signature().describe().c_str(), job.describe().c_str());
    }
    return false;
  }
  detail::implOf(comm).setTunedSelection(selectionFor(comm, std::make_shared<TuningCache>(cache)));
  return true;
}

TuningCache::LoadResult loadTuningCache(Communicator& comm, const std::string& path, TuningCache& out) {
  const std::optional<std::string> text = tuning::readOnRankZero(detail::implOf(comm).transport(), path);
  const TuningSignature job = currentSignature(comm);
  if (!text) {
    TuningCache::LoadResult missing;
    missing.status = TuningCache::LoadStatus::kMissing;
    missing.notice = "tuning cache '" + path + "' does not exist yet";
    return missing;
  }
  return TuningCache::parse(*text, path, job, out);
}

std::shared_ptr<const TuningCache> tuningCacheOf(Communicator& comm) {
  auto selection = detail::implOf(comm).tunedSelection();
  return selection ? selection->sharedCache() : nullptr;
}

std::size_t tunedBucketBytes(Communicator& comm) {
  auto cache = tuningCacheOf(comm);
  return cache ? cache->bucketBytes : 0;
}

AutotuneResult allreduceAutotune(Communicator& comm, ConstView input, View output, ReduceOp op, bool autoStrategy) {
  return autotune(comm, Collective::kAllreduce, input, output, op, autoStrategy);
}

AutotuneResult allgatherAutotune(Communicator& comm, ConstView input, View output, bool autoStrategy) {
  return autotune(comm, Collective::kAllgather, input, output, ReduceOp::kSum, autoStrategy);
}

AutotuneResult reduceScatterAutotune(Communicator& comm, ConstView input, View output, ReduceOp op,
                                     bool autoStrategy) {
  return autotune(comm, Collective::kReduceScatter, input, output, op, autoStrategy);
}

}  // namespace boostcomm
