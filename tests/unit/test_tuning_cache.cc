// The tuning cache: JSON round trip, nearest-size lookup, foreign and
// corrupt files, the tuned selection's byte ranges, and on in-process groups:
// "auto" follows an applied cache (or BOOSTCOMM_TUNING_CACHE), explicit
// algorithms still win, a foreign cache changes nothing, and the *Autotune
// calls return correct results with one algorithm on every rank.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/communicator_impl.h"
#include "boostcomm/autotune.h"
#include "boostcomm/version.h"
#include "common/inproc_harness.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"
#include "tuning/tuned_selection.h"

using namespace boostcomm;

namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

TuningSignature signature(int worldSize) {
  TuningSignature s;
  s.worldSize = worldSize;
  s.ranksPerNode = {worldSize};
  s.hostsHash = "00000000deadbeef";
  s.version = versionString();
  return s;
}

TuningEntry entry(Collective coll, std::size_t bytes, const std::string& winner,
                  const std::vector<std::pair<std::string, double>>& times, DataType dtype = DataType::kFloat32) {
  TuningEntry e;
  e.collective = coll;
  e.dtype = dtype;
  e.bytes = bytes;
  e.winner = winner;
  e.defaultAlgorithm = "native";
  e.modelChoice = "native";
  for (const auto& [name, us] : times) e.candidates.push_back({name, us, us * 0.9});
  e.margin = 1.25;
  return e;
}

TuningCache sampleCache(const TuningSignature& sig) {
  TuningCache cache(sig);
  cache.upsert(entry(Collective::kAllreduce, 64 * kKiB, "ring", {{"native", 30.0}, {"ring", 20.0}}));
  cache.upsert(entry(Collective::kAllreduce, kMiB, "rhd", {{"native", 500.0}, {"ring", 450.0}, {"rhd", 300.0}}));
  cache.upsert(entry(Collective::kReduceScatter, kMiB, "ring", {{"native", 400.0}, {"ring", 200.0}}));
  cache.intraNode.latencyUs = 0.4;
  cache.intraNode.bandwidthGBps = 3.5;
  cache.intraNode.measured = true;
  cache.bucketBytes = 16 * kMiB;
  cache.chunkBytes = 256 * kKiB;
  cache.bucketTimesUs = {{kMiB, 900.0}, {16 * kMiB, 700.0}};
  cache.meta = {{"command", "boostcomm tune -c 'all reduce'"}, {"hostname", "node1"}};
  return cache;
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("bc_tuning_" + std::to_string(::getpid()) + "_" + name)).string();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(TuningCache, JsonRoundTripKeepsEverything) {
  const TuningCache cache = sampleCache(signature(2));
  const TuningCache back = TuningCache::fromJson(cache.toJson());
  EXPECT_EQ(back.signature(), cache.signature());
  ASSERT_EQ(back.entries().size(), cache.entries().size());
  for (std::size_t i = 0; i < cache.entries().size(); ++i) {
    const TuningEntry& a = cache.entries()[i];
    const TuningEntry& b = back.entries()[i];
    EXPECT_EQ(a.collective, b.collective);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.winner, b.winner);
    EXPECT_DOUBLE_EQ(a.margin, b.margin);
    ASSERT_EQ(a.candidates.size(), b.candidates.size());
    for (std::size_t c = 0; c < a.candidates.size(); ++c) {
      EXPECT_EQ(a.candidates[c].algorithm, b.candidates[c].algorithm);
      EXPECT_DOUBLE_EQ(a.candidates[c].timeUs, b.candidates[c].timeUs);
      EXPECT_DOUBLE_EQ(a.candidates[c].predictedUs, b.candidates[c].predictedUs);
    }
  }
  EXPECT_EQ(back.bucketBytes, 16 * kMiB);
  EXPECT_EQ(back.chunkBytes, 256 * kKiB);
  EXPECT_EQ(back.bucketTimesUs, cache.bucketTimesUs);
  EXPECT_TRUE(back.intraNode.measured);
  EXPECT_DOUBLE_EQ(back.intraNode.bandwidthGBps, 3.5);
  EXPECT_EQ(back.meta, cache.meta);
}

TEST(TuningCache, MetaIsInformational) {
  // Not part of the signature, and a non-string field in it is skipped, not a corrupt file.
  nlohmann::json j = nlohmann::json::parse(sampleCache(signature(2)).toJson());
  EXPECT_EQ(j["meta"]["hostname"], "node1");
  j["meta"]["ranks"] = 2;
  const TuningCache back = TuningCache::fromJson(j.dump());
  EXPECT_EQ(back.meta.count("ranks"), 0u);
  EXPECT_EQ(back.meta.at("hostname"), "node1");
  j.erase("meta");
  EXPECT_TRUE(TuningCache::fromJson(j.dump()).meta.empty());
}

TEST(TuningCache, SpeedupsComeFromTheStoredTimes) {
  const TuningEntry e = entry(Collective::kAllreduce, kMiB, "rhd", {{"native", 500.0}, {"ring", 450.0}, {"rhd", 250.0}});
  EXPECT_DOUBLE_EQ(e.winnerUs(), 250.0);
  EXPECT_DOUBLE_EQ(e.speedupOverNative(), 2.0);
  EXPECT_DOUBLE_EQ(e.speedupOverDefault(), 2.0);
}

TEST(TuningCache, LookupTakesTheNearestSizeWithinTwoX) {
  TuningCache cache = sampleCache(signature(2));
  cache.upsert(entry(Collective::kAllreduce, kMiB, "ring", {{"native", 1.0}, {"ring", 1.0}}, DataType::kFloat64));
  ASSERT_NE(cache.lookup(Collective::kAllreduce, DataType::kFloat32, 100 * kKiB), nullptr);
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat32, 100 * kKiB)->bytes, 64 * kKiB);
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat32, 700 * kKiB)->bytes, kMiB);
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat32, 2 * kMiB)->winner, "rhd");  // dtype first
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat64, kMiB)->winner, "ring");
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat32, 3 * kMiB), nullptr);  // beyond 2x
  EXPECT_EQ(cache.lookup(Collective::kAllgather, DataType::kFloat32, kMiB), nullptr);
  // Re-tuning a size replaces its entry.
  cache.upsert(entry(Collective::kAllreduce, kMiB, "native", {{"native", 1.0}}));
  EXPECT_EQ(cache.lookup(Collective::kAllreduce, DataType::kFloat32, kMiB)->winner, "native");
}

TEST(TuningCache, ForeignTopologyOrVersionIsIgnoredWithANotice) {
  const std::string text = sampleCache(signature(2)).toJson();
  TuningSignature otherSize = signature(4);
  TuningSignature otherVersion = signature(2);
  otherVersion.version = "99.0.0";
  TuningSignature otherHosts = signature(2);
  otherHosts.hostsHash = "1111111111111111";
  for (const TuningSignature& job : {otherSize, otherVersion, otherHosts}) {
    TuningCache out;
    const auto result = TuningCache::parse(text, "t.json", job, out);
    EXPECT_EQ(result.status, TuningCache::LoadStatus::kMismatch);
    EXPECT_NE(result.notice.find("t.json"), std::string::npos) << result.notice;
    EXPECT_NE(result.notice.find("ignored"), std::string::npos) << result.notice;
    EXPECT_NE(result.notice.find(job.describe()), std::string::npos) << result.notice;
    EXPECT_EQ(result.notice.find('\n'), std::string::npos) << "one line: " << result.notice;
    EXPECT_TRUE(out.entries().empty());
  }
  TuningCache out;
  EXPECT_EQ(TuningCache::parse(text, "t.json", signature(2), out).status, TuningCache::LoadStatus::kLoaded);
  EXPECT_EQ(out.entries().size(), 3u);
}

TEST(TuningCache, CorruptFilesGiveAWarningNamingTheProblem) {
  const std::string good = sampleCache(signature(2)).toJson();
  std::string badWinner = good;
  badWinner.replace(badWinner.find("\"winner\": \"ring\""), 16, "\"winner\": \"zzzz\"");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON"},
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"[1, 2, 3]", "not a tuning cache"},
      {"{\"format\": \"something-else\"}", "not a tuning cache"},
      {"{\"format\": \"boostcomm-tuning-cache\", \"format_version\": 7}", "format_version 7"},
      {"{\"format\": \"boostcomm-tuning-cache\", \"format_version\": 1}", "bad field"},
      {badWinner, "not among its candidates"},
  };
  for (const auto& [text, why] : cases) {
    TuningCache out;
    const auto result = TuningCache::parse(text, "c.json", signature(2), out);
    EXPECT_EQ(result.status, TuningCache::LoadStatus::kCorrupt) << text;
    EXPECT_NE(result.notice.find("warning: tuning cache 'c.json' is corrupt"), std::string::npos) << result.notice;
    EXPECT_NE(result.notice.find(why), std::string::npos) << result.notice;
    EXPECT_NE(result.notice.find("rebuilds"), std::string::npos) << result.notice;
  }
}

TEST(TuningCache, SaveAndLoadAFile) {
  const std::string path = tempPath("save.json");
  TuningCache out;
  EXPECT_EQ(TuningCache::load(path, signature(2), out).status, TuningCache::LoadStatus::kMissing);
  sampleCache(signature(2)).save(path);
  EXPECT_EQ(TuningCache::load(path, signature(2), out).status, TuningCache::LoadStatus::kLoaded);
  EXPECT_EQ(out.entries().size(), 3u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

// The tuned rule's algorithm for `bytes`; null where the selection has no opinion.
const algorithms::AlgorithmInfo* tunedChoice(const tuning::TunedSelection& s, Collective coll, std::size_t bytes) {
  for (const tuning::TunedSelection::Rule& r : s.rules(coll)) {
    if (bytes >= r.minBytes && bytes <= r.maxBytes) return r.algorithm;
  }
  return nullptr;
}

TEST(TunedSelection, RangesAroundTheMeasuredSizes) {
  // One node of 2 ranks without a segment: no shm, no hier.
  algorithms::NodeLayout layout = algorithms::layoutFromSizes({2});
  algorithms::CollectiveSpec probe;
  probe.size = 2;
  probe.layout = &layout;
  auto cache = std::make_shared<TuningCache>(sampleCache(signature(2)));
  const tuning::CostParams params = tuning::paramsForCache(*cache, layout, 2, false, kMiB);
  const tuning::TunedSelection measuredOnly(cache, params, probe, /*modelFallback=*/false);
  auto name = [&](const tuning::TunedSelection& s, Collective c, std::size_t bytes) {
    const algorithms::AlgorithmInfo* a = tunedChoice(s, c, bytes);
    return a ? std::string(a->name) : std::string("-");
  };
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 64 * kKiB), "ring");
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 32 * kKiB), "ring");   // down to half
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 200 * kKiB), "ring");  // below the geometric mean (256K)
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 300 * kKiB), "rhd");
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 2 * kMiB), "rhd");     // up to double
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 16 * kKiB), "-");      // untuned
  EXPECT_EQ(name(measuredOnly, Collective::kAllreduce, 3 * kMiB), "-");
  EXPECT_EQ(name(measuredOnly, Collective::kAllgather, kMiB), "-");
  EXPECT_EQ(measuredOnly.chunkBytes(), 256 * kKiB);
  // With the model, every size has an algorithm; the measured ranges stay.
  const tuning::TunedSelection withModel(cache, params, probe, /*modelFallback=*/true);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, 16 * kKiB, 3 * kMiB, std::size_t{1} << 40}) {
    EXPECT_NE(tunedChoice(withModel, Collective::kAllgather, bytes), nullptr) << bytes;
    EXPECT_NE(tunedChoice(withModel, Collective::kAllreduce, bytes), nullptr) << bytes;
  }
  EXPECT_EQ(name(withModel, Collective::kAllreduce, 64 * kKiB), "ring");
  EXPECT_EQ(name(withModel, Collective::kAllreduce, kMiB), "rhd");
  // Rules are contiguous from 0 to the top.
  const auto& rules = withModel.rules(Collective::kAllreduce);
  ASSERT_FALSE(rules.empty());
  EXPECT_EQ(rules.front().minBytes, 0u);
  for (std::size_t i = 1; i < rules.size(); ++i) EXPECT_EQ(rules[i].minBytes, rules[i - 1].maxBytes + 1);
  EXPECT_EQ(rules.back().maxBytes, std::numeric_limits<std::size_t>::max());
}

// Every rank's data: rank + 1 + (i % 7); the float64 reference of the sum.
std::vector<float> rankData(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  return v;
}
double referenceSum(int ranks, std::size_t i) {
  double sum = 0;
  for (int r = 0; r < ranks; ++r) sum += r + 1 + static_cast<double>(i % 7);
  return sum;
}

// Runs the async allreduce of `bytes` and returns the algorithm it used.
std::string autoAlgorithm(Communicator& comm, std::size_t bytes, const CallOptions& options = {}) {
  std::vector<float> data = rankData(comm.rank(), bytes / sizeof(float));
  Work w = comm.allreduceAsync(std::span(data), std::span(data), ReduceOp::kSum, options);
  w.wait();
  for (std::size_t i = 0; i < data.size(); i += 997) {
    EXPECT_DOUBLE_EQ(data[i], referenceSum(comm.size(), i)) << "element " << i;
  }
  return w.algorithm();
}

TEST(TuningInProcess, AutoUsesAnAppliedCacheAndExplicitAlgorithmsStillWin) {
  constexpr int kRanks = 2;
  detail::runInProcess(kRanks, [](Communicator& comm) {
    const std::string before = autoAlgorithm(comm, 64 * kKiB);
    TuningCache foreign = sampleCache(signature(kRanks + 1));
    EXPECT_FALSE(applyTuningCache(comm, foreign));
    EXPECT_EQ(autoAlgorithm(comm, 64 * kKiB), before);
    EXPECT_EQ(tuningCacheOf(comm), nullptr);

    TuningCache mine = sampleCache(currentSignature(comm));
    EXPECT_TRUE(applyTuningCache(comm, mine));
    EXPECT_EQ(autoAlgorithm(comm, 64 * kKiB), "ring");
    EXPECT_EQ(autoAlgorithm(comm, kMiB), "rhd");
    CallOptions native;
    native.algorithm = "native";
    EXPECT_EQ(autoAlgorithm(comm, kMiB, native), "native");
    EXPECT_EQ(tunedBucketBytes(comm), 16 * kMiB);
  });
}

TEST(TuningInProcess, EnvCacheIsLoadedAtCreationAndACorruptOneIsIgnored) {
  constexpr int kRanks = 2;
  const std::string path = tempPath("env.json");
  // The signature of an in-process group, taken from a first group.
  const TuningSignature sig = boostcomm::testing::inProcessSignature(kRanks);
  sampleCache(sig).save(path);
  core::setTunableOverride(core::kTunableTuningCache, path);
  detail::runInProcess(kRanks, [](Communicator& comm) {
    ASSERT_NE(tuningCacheOf(comm), nullptr);
    EXPECT_EQ(autoAlgorithm(comm, 64 * kKiB), "ring");
  });
  writeFile(path, "{ this is not json");
  detail::runInProcess(kRanks, [](Communicator& comm) {
    EXPECT_EQ(tuningCacheOf(comm), nullptr);
    EXPECT_EQ(autoAlgorithm(comm, 64 * kKiB), comm.selectedAlgorithm(Collective::kAllreduce, 64 * kKiB));
  });
  core::clearTunableOverride(core::kTunableTuningCache);
  std::filesystem::remove(path);
}

TEST(TuningInProcess, AutotuneReturnsCorrectResultsAndOneChoice) {
  constexpr int kRanks = 3;
  core::setTunableOverride(core::kTunableTuneSamples, "2");
  std::mutex mutex;
  std::vector<std::string> chosen;
  detail::runInProcess(kRanks, [&](Communicator& comm) {
    const std::size_t count = 3000;
    std::vector<float> in = rankData(comm.rank(), count);
    std::vector<float> out(count, -1.0f);
    const AutotuneResult first = allreduceAutotune(comm, std::span(in), std::span(out), ReduceOp::kSum);
    for (std::size_t i = 0; i < count; ++i) ASSERT_DOUBLE_EQ(out[i], referenceSum(kRanks, i)) << i;
    EXPECT_FALSE(first.fromCache);
    EXPECT_GT(first.speedup, 0.0);
    EXPECT_NE(first.entry.find("native"), nullptr);
    // The same size class again: decided from the cache, same algorithm.
    const AutotuneResult again = allreduceAutotune(comm, std::span(in), std::span(in), ReduceOp::kSum);
    EXPECT_TRUE(again.fromCache);
    EXPECT_EQ(again.selectedAlgorithm, first.selectedAlgorithm);
    for (std::size_t i = 0; i < count; ++i) ASSERT_DOUBLE_EQ(in[i], referenceSum(kRanks, i)) << i;

    // Reduce-scatter: rank r gets block r of the sum.
    const std::size_t block = 500;
    std::vector<float> rsIn = rankData(comm.rank(), block * kRanks);
    std::vector<float> rsOut(block);
    const AutotuneResult rs = reduceScatterAutotune(comm, std::span(rsIn), std::span(rsOut), ReduceOp::kSum);
    for (std::size_t i = 0; i < block; ++i) {
      ASSERT_DOUBLE_EQ(rsOut[i], referenceSum(kRanks, comm.rank() * block + i)) << i;
    }
    // Allgather: every rank's block in rank order.
    std::vector<float> agIn(block, static_cast<float>(comm.rank()));
    std::vector<float> agOut(block * kRanks);
    const AutotuneResult ag = allgatherAutotune(comm, std::span(agIn), std::span(agOut));
    for (std::size_t i = 0; i < agOut.size(); ++i) ASSERT_EQ(agOut[i], static_cast<float>(i / block)) << i;
    std::lock_guard lock(mutex);
    chosen.push_back(first.selectedAlgorithm + "/" + rs.selectedAlgorithm + "/" + ag.selectedAlgorithm);
  });
  core::clearTunableOverride(core::kTunableTuneSamples);
  ASSERT_EQ(chosen.size(), static_cast<std::size_t>(kRanks));
  for (const std::string& c : chosen) EXPECT_EQ(c, chosen.front());
}

}  // namespace
