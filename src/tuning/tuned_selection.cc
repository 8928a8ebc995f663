#include "tuning/tuned_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>

#include "algorithms/selection.h"
#include "core/tunables.h"
#include "topology/detect.h"
#include "tuning/model_selection.h"

namespace boostcomm::tuning {
namespace {

// The model is coarse: it moves away from native only when it predicts a
// gain above 10%.
constexpr double kModelNativeMargin = 0.10;

// The entries of `coll` that drive the selection: float32 if tuned, else the
// first dtype tuned (the selection is per size, not per dtype: docs/TUNING.md).
std::vector<const TuningEntry*> entriesFor(const TuningCache& cache, Collective coll) {
  std::vector<const TuningEntry*> all;
  for (const TuningEntry& e : cache.entries()) {
    if (e.collective == coll && e.bytes > 0) all.push_back(&e);
  }
  if (all.empty()) return all;
  DataType dtype = all.front()->dtype;
  for (const TuningEntry* e : all) {
    if (e->dtype == DataType::kFloat32) dtype = DataType::kFloat32;
  }
  std::erase_if(all, [&](const TuningEntry* e) { return e->dtype != dtype; });
  std::sort(all.begin(), all.end(), [](const TuningEntry* a, const TuningEntry* b) { return a->bytes < b->bytes; });
  all.erase(std::unique(all.begin(), all.end(),
                        [](const TuningEntry* a, const TuningEntry* b) { return a->bytes == b->bytes; }),
            all.end());
  return all;
}

std::size_t geometricMean(std::size_t a, std::size_t b) {
  return static_cast<std::size_t>(std::sqrt(static_cast<double>(a) * static_cast<double>(b)));
}

}  // namespace

TunedSelection::TunedSelection(std::shared_ptr<const TuningCache> cache, const CostParams& params,
                               const algorithms::CollectiveSpec& probe, bool modelFallback)
    : cache_(std::move(cache)) {
  for (int c = 0; c < kNumCollectives; ++c) {
    const auto coll = static_cast<Collective>(c);
    if (coll == Collective::kBarrier) continue;
    std::vector<Rule>& rules = rules_[static_cast<std::size_t>(c)];
    const std::vector<std::string> candidates = runnableAlgorithms(probe, coll);
    auto push = [&rules](std::size_t lo, std::size_t hi, const algorithms::AlgorithmInfo* algo, bool measured) {
      if (lo > hi) return;
      if (!rules.empty() && rules.back().algorithm == algo && rules.back().measured == measured &&
          rules.back().maxBytes + 1 == lo) {
        rules.back().maxBytes = hi;
        return;
      }
      rules.push_back({lo, hi, algo, measured});
    };
    // [lo, hi] from the cost model (or left untuned).
    auto fromModel = [&](std::size_t lo, std::size_t hi) {
      if (lo > hi) return;
      if (!modelFallback) return push(lo, hi, nullptr, false);
      sampleModel(params, coll, candidates, lo, hi, kModelNativeMargin,
                  [&](std::size_t a, std::size_t b, const algorithms::AlgorithmInfo* algo) { push(a, b, algo, false); });
    };
    const std::vector<const TuningEntry*> entries = entriesFor(*cache_, coll);
    std::size_t next = 0;  // first byte count not yet covered
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::size_t s = entries[i]->bytes;
      const std::size_t lo = i == 0 ? s / 2 : next;
      const std::size_t hi = i + 1 < entries.size() ? geometricMean(s, entries[i + 1]->bytes) : s * 2;
      if (lo > next) fromModel(next, lo - 1);  // below the first measured size
      push(lo, hi, algorithms::findAlgorithm(coll, entries[i]->winner), true);
      next = hi + 1;
    }
    fromModel(next, algorithms::kOpenEnd);
  }
}

CostParams paramsForCache(const TuningCache& cache, const algorithms::NodeLayout& layout, int worldSize,
                          bool sharedMemory, std::size_t chunkBytes) {
  CostParams p = paramsFor(worldSize, layout.nodeSizes(), cache.coresPerNode, sharedMemory, cache.intraNode, cache.interNode);
  p.chunkBytes = cache.chunkBytes > 0 ? cache.chunkBytes : chunkBytes;
  return p;
}

std::optional<std::string> readOnRankZero(transport::Transport& world, const std::string& path) {
  std::string text;
  std::int64_t length = -1;
  if (world.rank() == 0) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      length = static_cast<std::int64_t>(text.size());
    }
  }
  world.nativeBroadcast(&length, 1, DataType::kInt64, 0, nullptr);
  if (length < 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(length));
  if (length > 0) world.nativeBroadcast(text.data(), text.size(), DataType::kUInt8, 0, nullptr);
  return text;
}

std::shared_ptr<const TunedSelection> tunedSelectionOf(std::shared_ptr<const TuningCache> cache,
                                                       const algorithms::CollectiveSpec& probe) {
  const bool model = core::tunableBool(core::kTunableTuningModel);
  const CostParams params = paramsForCache(*cache, *probe.layout, probe.size, probe.sharedMemory, probe.chunkBytes);
  return std::make_shared<TunedSelection>(std::move(cache), params, probe, model);
}

std::shared_ptr<const TunedSelection> tunedSelectionFromEnv(transport::Transport& world,
                                                            const algorithms::CollectiveSpec& probe) {
  const std::string path = core::tunableString(core::kTunableTuningCache);
  if (path.empty()) return nullptr;
  const std::optional<std::string> text = readOnRankZero(world, path);
  // Messages name the path; a runaway value (a 1 MiB variable) is cut short.
  const std::string shown =
      path.size() <= 256 ? path : path.substr(0, 256) + "...(" + std::to_string(path.size()) + " bytes)";
  DetectOptions layoutOnly;
  layoutOnly.probe = false;
  const TuningSignature expected = signatureOf(topology::detectOnTransport(world, layoutOnly));
  auto cache = std::make_shared<TuningCache>();
  TuningCache::LoadResult result;
  if (text) {
    result = TuningCache::parse(*text, shown, expected, *cache);
  } else {
    result.notice = "tuning cache '" + shown + "' (BOOSTCOMM_TUNING_CACHE) does not exist yet; using the selection "
                    "table (`boostcomm tune --cache " + shown + "` creates it)";
  }
  if (result.status != TuningCache::LoadStatus::kLoaded) {
    if (world.rank() == 0) std::fprintf(stderr, "[boostcomm] %s\n", result.notice.c_str());
    return nullptr;
  }
  return tunedSelectionOf(std::move(cache), probe);
}

std::shared_ptr<const TunedSelection> tunedSelectionPreview(const TuningSignature& expected,
                                                            const algorithms::CollectiveSpec& probe) {
  const std::string path = core::tunableString(core::kTunableTuningCache);
  if (path.empty()) return nullptr;
  auto cache = std::make_shared<TuningCache>();
  if (TuningCache::load(path, expected, *cache).status != TuningCache::LoadStatus::kLoaded) return nullptr;
  return tunedSelectionOf(std::move(cache), probe);
}

}  // namespace boostcomm::tuning
