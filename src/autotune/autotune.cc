// The *Autotune calls: measure the candidates once per size class, keep the
// winner in the communicator's tuning cache (src/api/communicator_tuning.cc),
// then reuse it.
#include <cstdio>

#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/autotune.h"
#include "core/check.h"
#include "core/tunables.h"
#include "tuning/tuned_selection.h"

namespace boostcomm {
namespace {

// The communicator's cache, or an empty one with the job's signature (collective then).
TuningCache cacheToExtend(Communicator& comm) {
  if (auto current = tuningCacheOf(comm)) return *current;
  return TuningCache(currentSignature(comm));
}

AutotuneResult measureOrReuse(Communicator& comm, Collective coll, ConstView input, View output, ReduceOp op,
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
    detail::implOf(comm).installTuningCache(std::make_shared<TuningCache>(std::move(cache)));
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

AutotuneResult allreduceAutotune(Communicator& comm, ConstView input, View output, ReduceOp op, bool autoStrategy) {
  return measureOrReuse(comm, Collective::kAllreduce, input, output, op, autoStrategy);
}

AutotuneResult allgatherAutotune(Communicator& comm, ConstView input, View output, bool autoStrategy) {
  return measureOrReuse(comm, Collective::kAllgather, input, output, ReduceOp::kSum, autoStrategy);
}

AutotuneResult reduceScatterAutotune(Communicator& comm, ConstView input, View output, ReduceOp op,
                                     bool autoStrategy) {
  return measureOrReuse(comm, Collective::kReduceScatter, input, output, op, autoStrategy);
}

}  // namespace boostcomm
