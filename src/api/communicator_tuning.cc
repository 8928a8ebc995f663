// A communicator's tuning cache: its job signature, applying a cache, loading
// one collectively, and what is installed (declared in boostcomm/autotune.h).
// In api, not autotune: the fusion drivers read the tuned bucket size and
// BOOSTCOMM_TUNING_CACHE installs through the same path; measuring is autotune's.
#include <cstdio>

#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/autotune.h"
#include "tuning/tuned_selection.h"

namespace boostcomm {
void detail::CommunicatorImpl::installTuningCache(std::shared_ptr<const TuningCache> cache) {
  setTunedSelection(tuning::tunedSelectionOf(std::move(cache), describeSelf()));
}

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
  detail::implOf(comm).installTuningCache(std::make_shared<TuningCache>(cache));
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

}  // namespace boostcomm
