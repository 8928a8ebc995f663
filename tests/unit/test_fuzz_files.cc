// The files boostcomm reads (tuning cache, topology file, model profile)
// under damage: a valid file cut at every byte, random bytes, and random
// mutations of a valid file must never crash or throw anything but
// boostcomm::Error{kInvalidArgument}; a damaged BOOSTCOMM_TUNING_CACHE makes
// every rank fall back alike (one notice, correct results, the same choice);
// concurrent writers of one cache always leave a file that parses, and never
// a temporary file behind (core/atomic_file.h). ctest label `unit`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "boostcomm/topology.h"
#include "boostcomm/autotune.h"
#include "boostcomm/version.h"
#include "common/inproc_harness.h"
#include "common/tunable_override.h"
#include "core/tunables.h"
#include "workloads/model_profile.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

constexpr std::uint32_t kSeed = 20261202;

// Damaged versions of `good`: every prefix, random byte strings, and copies
// with a few bytes overwritten, inserted or deleted (JSON-ish bytes are
// favoured, so that many mutants still parse and reach the field checks).
std::vector<std::string> damaged(const std::string& good, int randomCount) {
  std::vector<std::string> out;
  for (std::size_t n = 0; n < good.size(); ++n) out.push_back(good.substr(0, n));
  std::mt19937 rng(kSeed);
  const std::string alphabet = "{}[]\":,0123456789-+.eE truefalsnul\\\n\x00\xff";
  auto byte = [&] {
    return rng() % 4 == 0 ? static_cast<char>(rng() & 0xff) : alphabet[rng() % alphabet.size()];
  };
  for (int i = 0; i < randomCount; ++i) {
    std::string noise(rng() % 300, '\0');
    for (char& c : noise) c = byte();
    out.push_back(noise);
    std::string mutant = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !mutant.empty(); ++e) {
      const std::size_t at = rng() % mutant.size();
      switch (rng() % 3) {
        case 0: mutant[at] = byte(); break;
        case 1: mutant.insert(at, 1, byte()); break;
        default: mutant.erase(at, 1); break;
      }
    }
    out.push_back(mutant);
  }
  // Numbers at the edges of every type, in place of the first number found.
  const std::size_t digit = good.find_first_of("0123456789");
  if (digit != std::string::npos) {
    for (const char* n : {"-1", "1e308", "-1e308", "18446744073709551616", "9223372036854775807", "4294967296",
                          "0.5", "null", "\"x\"", "[]", "{}"}) {
      out.push_back(good.substr(0, digit) + n + good.substr(digit + 1));
    }
  }
  return out;
}

// Runs parse on every damaged input: only boostcomm::Error{kInvalidArgument}
// may come out. Returns how many inputs parsed.
int expectOnlyInvalidArgument(const std::vector<std::string>& inputs, const std::function<void(const std::string&)>& parse) {
  int parsed = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    try {
      parse(inputs[i]);
      ++parsed;
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << "input " << i << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "input " << i << " (" << inputs[i].size() << " bytes) threw a non-boostcomm exception: "
                    << e.what();
    }
  }
  return parsed;
}

TuningSignature signatureOf(int worldSize) {
  TuningSignature s;
  s.worldSize = worldSize;
  s.ranksPerNode = {worldSize};
  s.hostsHash = "00000000deadbeef";
  s.version = versionString();
  return s;
}

TuningCache sampleCache(const TuningSignature& sig, const std::string& winner = "ring") {
  TuningCache cache(sig);
  TuningEntry e;
  e.collective = Collective::kAllreduce;
  e.dtype = DataType::kFloat32;
  e.bytes = 65536;
  e.winner = winner;
  e.defaultAlgorithm = "native";
  e.candidates = {{"native", 30.0, 28.0}, {winner, 20.0, 19.0}};
  cache.upsert(e);
  e.bytes = 1 << 20;
  cache.upsert(e);
  cache.chunkBytes = 262144;
  cache.bucketBytes = 1 << 24;
  cache.bucketTimesUs = {{1 << 20, 900.0}};
  cache.meta = {{"command", "boostcomm tune"}};
  return cache;
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("bc_fuzz_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(FuzzFiles, TuningCacheNeverCrashes) {
  const TuningSignature sig = signatureOf(2);
  const std::string good = sampleCache(sig).toJson();
  const std::vector<std::string> inputs = damaged(good, 1000);
  int loaded = 0;
  int corrupt = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TuningCache out;
    TuningCache::LoadResult result;
    try {
      result = TuningCache::parse(inputs[i], "fuzz.json", sig, out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "input " << i << ": parse threw instead of reporting: " << e.what();
      continue;
    }
    if (result.status == TuningCache::LoadStatus::kCorrupt) {
      ++corrupt;
      EXPECT_NE(result.notice.find("fuzz.json"), std::string::npos) << result.notice;
    }
    if (result.status == TuningCache::LoadStatus::kLoaded) {
      ++loaded;
      // What a loaded cache is asked for must not crash either.
      (void)out.lookup(Collective::kAllreduce, DataType::kFloat32, 65536);
      (void)out.toJson();
    }
  }
  // Every truncation is corrupt; some mutations still load (damage in a time).
  EXPECT_GE(corrupt, static_cast<int>(good.size()));
  EXPECT_GT(loaded, 0);
  EXPECT_EQ(TuningCache::parse(good, "fuzz.json", sig, *std::make_unique<TuningCache>()).status,
            TuningCache::LoadStatus::kLoaded);
}

TEST(FuzzFiles, TopologyFileNeverCrashes) {
  Topology t;
  t.worldSize = 4;
  t.nodes = 2;
  t.ranksPerNode = {2, 2};
  t.nodeOfRank = {0, 0, 1, 1};
  t.localRankOfRank = {0, 1, 0, 1};
  t.hostnames = {"alpha", "beta"};
  t.sockets = {1, 1};
  t.numaNodes = {1, 1};
  t.cores = {2, 2};
  t.intraNode = {1.25, 12.5, 1, true, {{8, 1.3, 1.3}, {1 << 20, 90.0, 88.0}}};
  t.interNode = {30.0, 0.118, 2, true, {}};
  const std::string good = topologyToJson(t);
  const int parsed = expectOnlyInvalidArgument(damaged(good, 1000), [](const std::string& text) {
    const Topology back = topologyFromJson(text);
    EXPECT_EQ(back.nodeOfRank.size(), static_cast<std::size_t>(back.worldSize));
  });
  EXPECT_GT(parsed, 0);
  EXPECT_EQ(topologyFromJson(good).worldSize, 4);
}

TEST(FuzzFiles, ProfileFileNeverCrashes) {
  workloads::ModelProfile p;
  p.name = "tiny";
  workloads::appendTensor(p, "conv.weight", {64, 3, 7, 7}, 1e8);
  workloads::appendTensor(p, "fc.bias", {1000}, 1e3);
  const std::string good = workloads::profileToJson(p);
  const int parsed = expectOnlyInvalidArgument(damaged(good, 1000), [](const std::string& text) {
    const workloads::ModelProfile back = workloads::parseProfileText(text, "fuzz.json");
    EXPECT_LE(back.bytes(), workloads::kMaxProfileBytes);
  });
  EXPECT_GT(parsed, 0);
  // Shapes whose product wraps around 2^64 are rejected, not wrapped.
  EXPECT_THROW(workloads::parseProfileText(R"({"tensors": [{"shape": [4294967296, 4294967296, 16]}]})", "big.json"), Error);
  EXPECT_THROW(workloads::parseProfileText(R"({"tensors": [{"shape": [1099511627776, 2]}]})", "big.json"), Error);
  EXPECT_EQ(workloads::parseProfileText(good, "good.json").parameterCount(), 64u * 3 * 7 * 7 + 1000);
}

// A damaged BOOSTCOMM_TUNING_CACHE: every rank falls back the same way and
// computes right. Rank 0 reads the file and broadcasts it, so even a file
// that differs per rank (being rewritten) cannot split the ranks' choices.
TEST(FuzzFiles, DamagedEnvCacheFallsBackAlikeOnEveryRank) {
  constexpr int kRanks = 3;
  const std::string path = tempPath("env_cache.json");
  const std::string good = sampleCache(testing::inProcessSignature(kRanks)).toJson();
  std::mt19937 rng(kSeed);
  std::vector<std::string> files{good, "", "{", good.substr(0, good.size() / 2), good.substr(0, good.size() - 2)};
  for (int i = 0; i < 12; ++i) {
    std::string mutant = good;
    mutant[rng() % mutant.size()] = "{}[]\":,0x"[rng() % 9];
    files.push_back(mutant);
  }
  testing::TunableOverride cacheVar(core::kTunableTuningCache, path);
  for (std::size_t f = 0; f < files.size(); ++f) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << files[f];
    std::vector<std::string> choice(kRanks);
    std::vector<int> tuned(kRanks);
    detail::runInProcess(kRanks, [&](Communicator& comm) {
      std::vector<float> x(4099);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(comm.rank() + 1 + static_cast<int>(i % 7));
      comm.allreduce(std::span<const float>(x), std::span<float>(x), ReduceOp::kSum);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float want = static_cast<float>(kRanks * (kRanks + 1) / 2 + kRanks * static_cast<int>(i % 7));
        ASSERT_EQ(x[i], want) << "file " << f << " rank " << comm.rank() << " element " << i;
      }
      choice[static_cast<std::size_t>(comm.rank())] = comm.selectedAlgorithm(Collective::kAllreduce, 65536);
      tuned[static_cast<std::size_t>(comm.rank())] = tuningCacheOf(comm) != nullptr;
    });
    for (int r = 1; r < kRanks; ++r) {
      EXPECT_EQ(choice[static_cast<std::size_t>(r)], choice[0]) << "file " << f << ": rank " << r << " chose differently";
      EXPECT_EQ(tuned[static_cast<std::size_t>(r)], tuned[0]) << "file " << f << ": rank " << r;
    }
    if (f == 0) {
      EXPECT_TRUE(tuned[0]) << "the intact cache must load";
    }
    if (f >= 1 && f <= 4) {
      EXPECT_FALSE(tuned[0]) << "file " << f << " is truncated and must be ignored";
    }
  }
  std::filesystem::remove(path);
}

// Writers racing on one path: every read in between and the file at the end
// parse, the end state is one writer's whole text, and no temporary is left.
TEST(FuzzFiles, ConcurrentCacheWritersLeaveAFileThatParses) {
  const std::filesystem::path dir = tempPath("writers");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "cache.json").string();
  const TuningSignature sig = signatureOf(2);
  std::vector<std::string> texts;
  for (const char* winner : {"ring", "rhd", "rd", "native2"}) texts.push_back(sampleCache(sig, winner).toJson());
  sampleCache(sig).save(path);
  std::atomic<bool> stop{false};
  std::atomic<int> badReads{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!stop.load()) {
      TuningCache out;
      const auto result = TuningCache::load(path, sig, out);
      if (result.status != TuningCache::LoadStatus::kLoaded) badReads.fetch_add(1);
      reads.fetch_add(1);
    }
  });
  std::vector<std::thread> writers;
  for (std::size_t w = 0; w < texts.size(); ++w) {
    writers.emplace_back([&, w] {
      const TuningCache mine = TuningCache::fromJson(texts[w]);
      for (int i = 0; i < 50; ++i) mine.save(path);
    });
  }
  for (auto& t : writers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(badReads.load(), 0) << "of " << reads.load() << " reads";
  std::ifstream in(path, std::ios::binary);
  const std::string final((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(std::find(texts.begin(), texts.end(), final), texts.end()) << "the file is no writer's text";
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "cache.json") << "left behind: " << e.path();
  }
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(FuzzFiles, AtomicWriteFailsCleanlyInAMissingDirectory) {
  const std::string path = tempPath("no_such_dir") + "/cache.json";
  try {
    sampleCache(signatureOf(2)).save(path);
    ADD_FAILURE() << "saving into a missing directory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("tuning cache"), std::string::npos) << e.what();
  }
}

TEST(FuzzFiles, TopologySaveIsAtomicToo) {
  const std::filesystem::path dir = tempPath("topo");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "topo.json").string();
  Topology t;
  t.worldSize = 1;
  t.nodes = 1;
  t.ranksPerNode = {1};
  t.nodeOfRank = {0};
  t.localRankOfRank = {0};
  t.hostnames = {"a"};
  std::vector<std::thread> writers;
  for (int w = 0; w < 3; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < 30; ++i) saveTopology(t, path);
    });
  }
  for (auto& th : writers) th.join();
  EXPECT_EQ(loadTopology(path).worldSize, 1);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace boostcomm
