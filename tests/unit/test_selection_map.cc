// The selection map: its ranges and lookup rule on their own, then on
// in-process groups: each layer's precedence (table < strategy's hier rule <
// tuned cache < BOOSTCOMM_ALGO < CallOptions::algorithm), a forced algorithm
// that cannot run fails alike in selectedAlgorithm and in the call, and with
// a tuning cache loaded (applied, or BOOSTCOMM_TUNING_CACHE) selectedAlgorithm
// names the algorithm that ran (Work::algorithm()) at every size of a sweep.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/selection_map.h"
#include "api/route.h"
#include "testing/inproc_group.h"
#include "boostcomm/boostcomm.h"
#include "boostcomm/autotune.h"
#include "boostcomm/version.h"
#include "common/inproc_harness.h"
#include "common/tunable_override.h"
#include "core/tunables.h"

namespace boostcomm {
namespace {

using algorithms::kAnyBytes;
using algorithms::SelectionLayer;
using algorithms::SelectionMap;

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

const algorithms::AlgorithmInfo* find(Collective coll, const char* name) {
  const algorithms::AlgorithmInfo* a = algorithms::findAlgorithm(coll, name);
  EXPECT_NE(a, nullptr) << name;
  return a;
}

algorithms::CollectiveSpec allreduceSpec(std::size_t bytes, int size) {
  algorithms::CollectiveSpec spec;
  spec.collective = Collective::kAllreduce;
  spec.dtype = DataType::kUInt8;
  spec.count = bytes;
  spec.size = size;
  return spec;
}

using testing::Tunables;  // read when a communicator is created

TEST(SelectionMap, SplitsRangesPerLayerAndMergesEqualNeighbours) {
  SelectionMap map;
  const auto coll = Collective::kAllreduce;
  map.set(coll, SelectionLayer::kTable, 0, kAnyBytes, find(coll, "native"));
  map.set(coll, SelectionLayer::kTable, 4096, kAnyBytes, find(coll, "ring"));
  map.set(coll, SelectionLayer::kTuned, 1000, 9999, find(coll, "rhd"));
  ASSERT_EQ(map.ranges(coll).size(), 4u) << map.describe();
  EXPECT_EQ(map.at(coll, 999).top()->name, std::string("native"));
  EXPECT_EQ(map.at(coll, 1000).top()->name, std::string("rhd"));
  EXPECT_EQ(map.at(coll, 9999).top()->name, std::string("rhd"));
  EXPECT_EQ(map.at(coll, 10000).top()->name, std::string("ring"));
  EXPECT_EQ(map.at(coll, kAnyBytes).top()->name, std::string("ring"));
  // The tuned layer keeps the table's choice beneath it (the fallback).
  EXPECT_EQ(map.at(coll, 5000).byLayer[static_cast<int>(SelectionLayer::kTable)]->name, std::string("ring"));
  // Clearing the tuned opinion merges the ranges back.
  map.set(coll, SelectionLayer::kTuned, 0, kAnyBytes, nullptr);
  EXPECT_EQ(map.ranges(coll).size(), 2u) << map.describe();
  EXPECT_EQ(map.topChoiceUpTo(*find(coll, "native")), 4095u);
  EXPECT_EQ(map.topChoiceUpTo(*find(coll, "ring")), 0u);
  EXPECT_NE(map.describe().find("[4096, inf] ring (table)"), std::string::npos) << map.describe();
}

// The route table (api/route.h) read from a map: the native prefix and the
// native-or-shm prefix after it settle a call's kind without choosing; past
// them, past online selection's floor, or while unsettled, the call chooses
// in full. The interposer's backend range is the native prefix.
TEST(RouteTable, SettlesTheNativeAndShmPrefixesOnly) {
  using algorithms::AlgorithmKind;
  using detail::RouteTable;
  constexpr auto kAR = Collective::kAllreduce;
  constexpr auto kBC = Collective::kBroadcast;
  SelectionMap map;
  map.set(kAR, SelectionLayer::kTable, 0, kAnyBytes, find(kAR, "ring"));
  map.set(kAR, SelectionLayer::kTable, 0, 4095, find(kAR, "native"));
  map.set(kAR, SelectionLayer::kTable, 4096, 65535, find(kAR, "shm"));
  map.set(kBC, SelectionLayer::kTable, 0, kAnyBytes, find(kBC, "binomial"));
  map.set(Collective::kBarrier, SelectionLayer::kTable, 0, kAnyBytes, find(Collective::kBarrier, "native"));

  const RouteTable routes(map, kAnyBytes, /*settled=*/true);
  EXPECT_EQ(routes.settledKind(kAR, 0), AlgorithmKind::kBackend);
  EXPECT_EQ(routes.settledKind(kAR, 4095), AlgorithmKind::kBackend);
  EXPECT_EQ(routes.settledKind(kAR, 4096), AlgorithmKind::kSharedMemory);
  EXPECT_EQ(routes.settledKind(kAR, 65535), AlgorithmKind::kSharedMemory);
  EXPECT_FALSE(routes.settledKind(kAR, 65536).has_value());
  EXPECT_EQ(routes.backendUpTo(kAR), std::optional<std::size_t>(4095));
  EXPECT_FALSE(routes.settledKind(kBC, 0).has_value());
  EXPECT_FALSE(routes.backendUpTo(kBC).has_value());
  EXPECT_EQ(routes.backendUpTo(Collective::kBarrier), std::optional<std::size_t>(kAnyBytes));

  const RouteTable floor(map, 1023, /*settled=*/true);
  EXPECT_EQ(floor.settledKind(kAR, 1023), AlgorithmKind::kBackend);
  EXPECT_FALSE(floor.settledKind(kAR, 1024).has_value());
  const RouteTable unsettled(map, kAnyBytes, /*settled=*/false);
  EXPECT_FALSE(unsettled.settledKind(kAR, 8).has_value());
  EXPECT_EQ(unsettled.backendUpTo(kAR), std::optional<std::size_t>(4095));

  // A higher layer naming another algorithm at 0 bytes ends both prefixes.
  map.set(kAR, SelectionLayer::kForced, 0, kAnyBytes, find(kAR, "rd"));
  const RouteTable forced(map, kAnyBytes, /*settled=*/true);
  EXPECT_FALSE(forced.settledKind(kAR, 8).has_value());
  EXPECT_FALSE(forced.backendUpTo(kAR).has_value());
}

TEST(SelectionMap, HighestLayerThatCanRunWinsAndForcedMustRun) {
  SelectionMap map;
  const auto coll = Collective::kAllreduce;
  map.set(coll, SelectionLayer::kTable, 0, kAnyBytes, find(coll, "ring"));
  map.set(coll, SelectionLayer::kStrategy, 0, kAnyBytes, find(coll, "hier"));  // needs several nodes
  map.set(coll, SelectionLayer::kTuned, 0, kAnyBytes, find(coll, "shm"));      // needs a shm engine
  EXPECT_EQ(map.choose(allreduceSpec(64, 4)).name, std::string("ring"));       // both above cannot run
  map.set(coll, SelectionLayer::kTuned, 0, 100, find(coll, "rd"));
  EXPECT_EQ(map.choose(allreduceSpec(64, 4)).name, std::string("rd"));
  map.set(coll, SelectionLayer::kForced, 0, kAnyBytes, find(coll, "shm"));
  try {
    map.choose(allreduceSpec(64, 4));
    FAIL() << "a forced algorithm that cannot run must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(e.detail().find("algorithm 'shm' cannot run this call"), std::string::npos) << e.detail();
  }
  // Nothing named can run: the first registered algorithm that can (native).
  SelectionMap none;
  none.set(coll, SelectionLayer::kTable, 0, kAnyBytes, find(coll, "hier"));
  EXPECT_EQ(none.choose(allreduceSpec(64, 4)).name, std::string("native"));
}

// What a call of `bytes` without an algorithm ran (Work::algorithm()).
std::string ranAlgorithm(Communicator& comm, Collective coll, std::size_t bytes, const CallOptions& options = {}) {
  const std::size_t n = static_cast<std::size_t>(comm.size());
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  std::vector<float> in(count, static_cast<float>(comm.rank() + 1));
  std::vector<float> out(coll == Collective::kAllgather ? count * n : count, -1.0f);
  Work w;
  switch (coll) {
    case Collective::kAllreduce: w = comm.allreduceAsync(std::span<const float>(in), std::span<float>(out), ReduceOp::kSum, options); break;
    case Collective::kAllgather:
      w = comm.allgatherAsync(std::span<const float>(in), std::span<float>(out), options);
      break;
    case Collective::kBroadcast: w = comm.broadcastAsync(std::span<float>(in), 0, options); break;
    case Collective::kReduceScatter:
      in.assign(count * n, static_cast<float>(comm.rank() + 1));
      w = comm.reduceScatterAsync(std::span<const float>(in), std::span<float>(out), ReduceOp::kSum, options);
      break;
    case Collective::kBarrier: w = comm.barrierAsync(options); break;
  }
  w.wait();
  const float sum = static_cast<float>(n * (n + 1) / 2);
  if (coll == Collective::kAllreduce || coll == Collective::kReduceScatter) {
    EXPECT_EQ(out.front(), sum) << toString(coll) << " " << bytes;
    EXPECT_EQ(out.back(), sum) << toString(coll) << " " << bytes;
  }
  if (coll == Collective::kBroadcast) {
    EXPECT_EQ(in.back(), 1.0f);
  }
  return w.algorithm();
}

// Payload in bytes (nccl-tests convention) of a ranAlgorithm call.
std::size_t payloadOf(Collective coll, std::size_t bytes, int size) {
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  if (coll == Collective::kAllgather || coll == Collective::kReduceScatter)
    return count * sizeof(float) * static_cast<std::size_t>(size);
  return count * sizeof(float);
}

void expectReportedIsRun(Communicator& comm, Collective coll, std::size_t bytes, const std::string& expected = "") {
  const std::string ran = ranAlgorithm(comm, coll, bytes);
  EXPECT_EQ(comm.selectedAlgorithm(coll, payloadOf(coll, bytes, comm.size())), ran)
      << toString(coll) << " " << bytes << " B";
  if (!expected.empty()) {
    EXPECT_EQ(ran, expected) << toString(coll) << " " << bytes << " B";
  }
}

TEST(SelectionPrecedence, TableThenStrategyHierRule) {
  // Two nodes of two ranks, BOOSTCOMM_HIER_MIN_BYTES set: strategy auto runs
  // hier from 64 KiB up, above the model. BOOSTCOMM_SELECTION names 0-32767
  // only: above it the layers below decide. Trials off: the model's choice
  // is what runs.
  Tunables t{{core::kTunableNodeLayout, "2,2"}, {core::kTunableHierMinBytes, "65536"},
             {core::kTunableSelectionTable, "allreduce:0-1023=rd;1024-32767=ring"},
             {core::kTunableSelectionTrials, "0"}};
  detail::runInProcess(4, [](Communicator& comm) {
    expectReportedIsRun(comm, Collective::kAllreduce, 512, "rd");          // BOOSTCOMM_SELECTION
    expectReportedIsRun(comm, Collective::kAllreduce, 4 * kKiB, "ring");   // BOOSTCOMM_SELECTION
    expectReportedIsRun(comm, Collective::kAllreduce, 64 * kKiB, "hier");  // strategy over the model
    expectReportedIsRun(comm, Collective::kAllgather, 64);                 // the model
    CommStrategy flat;
    flat.strategy = Strategy::kFlat;
    comm.configureCommStrategy(flat);  // rebuilds the map
    // No strategy layer any more, and the model without hierarchical candidates.
    EXPECT_NE(comm.selectedAlgorithm(Collective::kAllreduce, 64 * kKiB), "hier");
    expectReportedIsRun(comm, Collective::kAllreduce, 64 * kKiB);
    expectReportedIsRun(comm, Collective::kAllreduce, 4 * kKiB, "ring");
  });
}

TEST(SelectionPrecedence, OneNodeUsesTheBuiltInTable) {
  // One node: no model, no link probe; the table measured on one host.
  Tunables t{{core::kTunableShm, "0"}};
  detail::runInProcess(3, [](Communicator& comm) {
    expectReportedIsRun(comm, Collective::kAllreduce, 64 * kKiB, "native");
    expectReportedIsRun(comm, Collective::kAllreduce, 32 * kMiB, "ring");
  });
}

TEST(SelectionPrecedence, UserSelectionBeatsStrategy) {
  // An explicit BOOSTCOMM_SELECTION rule wins over the strategy's hier rule
  // (and over a tuned cache: SelectionLayer order) in the ranges it names.
  Tunables t{{core::kTunableNodeLayout, "2,2"}, {core::kTunableHierMinBytes, "65536"},
             {core::kTunableSelectionTable, "allreduce:65536-=ring"}};
  detail::runInProcess(4, [](Communicator& comm) {
    expectReportedIsRun(comm, Collective::kAllreduce, 64 * kKiB, "ring");
    expectReportedIsRun(comm, Collective::kAllreduce, 512);  // below its ranges: the model (no trials below 4 KiB)
  });
}

TuningEntry winner(Collective coll, std::size_t bytes, const std::string& name) {
  TuningEntry e;
  e.collective = coll;
  e.bytes = bytes;
  e.winner = name;
  e.defaultAlgorithm = "native";
  e.modelChoice = "native";
  e.candidates = {{"native", 2.0, 1.8}, {name, 1.0, 0.9}};
  e.margin = 2.0;
  return e;
}

TEST(SelectionPrecedence, TunedOverStrategyForcedOverTunedCallOverForced) {
  Tunables t{{core::kTunableNodeLayout, "2,2"}, {core::kTunableTuningModel, "0"},
             {core::kTunableHierMinBytes, "65536"}, {core::kTunableSelectionTrials, "0"}};
  detail::runInProcess(4, [](Communicator& comm) {
    TuningCache cache(currentSignature(comm));
    cache.upsert(winner(Collective::kAllreduce, kMiB, "rhd"));
    cache.upsert(winner(Collective::kAllreduce, 4 * kKiB, "hier"));
    ASSERT_TRUE(applyTuningCache(comm, cache));
    expectReportedIsRun(comm, Collective::kAllreduce, kMiB, "rhd");        // tuned over strategy (hier)
    expectReportedIsRun(comm, Collective::kAllreduce, 4 * kKiB, "hier");   // tuned, below the hier size rule
    expectReportedIsRun(comm, Collective::kAllreduce, 64);                 // untuned: the model
    expectReportedIsRun(comm, Collective::kAllreduce, 16 * kMiB, "hier");  // untuned: the strategy
    CommStrategy flat;
    flat.strategy = Strategy::kFlat;
    comm.configureCommStrategy(flat);
    EXPECT_NE(comm.selectedAlgorithm(Collective::kAllreduce, 4 * kKiB), "hier");  // flat forbids a tuned hier
    expectReportedIsRun(comm, Collective::kAllreduce, 4 * kKiB);
    expectReportedIsRun(comm, Collective::kAllreduce, kMiB, "rhd");
    CommStrategy forced;
    forced.collectiveAlgorithm = "ring";
    comm.configureCommStrategy(forced);
    expectReportedIsRun(comm, Collective::kAllreduce, kMiB, "ring");  // forced over tuned
    expectReportedIsRun(comm, Collective::kAllreduce, 64, "ring");
    CallOptions rd;
    rd.algorithm = "rd";
    EXPECT_EQ(ranAlgorithm(comm, Collective::kAllreduce, kMiB, rd), "rd");  // the call over forced
  });
}

TEST(SelectionPrecedence, EnvAlgoOverTunedCache) {
  Tunables t{{core::kTunableAlgo, "allreduce:rd"}};
  detail::runInProcess(2, [](Communicator& comm) {
    TuningCache cache(currentSignature(comm));
    cache.upsert(winner(Collective::kAllreduce, kMiB, "ring"));
    ASSERT_TRUE(applyTuningCache(comm, cache));
    expectReportedIsRun(comm, Collective::kAllreduce, kMiB, "rd");
    expectReportedIsRun(comm, Collective::kAllreduce, 8, "rd");
  });
}

// A forced algorithm that cannot run: selectedAlgorithm and the call fail
// with the same error, on every rank.
void expectSameFailure(int ranks, Collective coll, std::size_t bytes) {
  std::vector<Error> errors = testing::errorsOnEveryRank(ranks, [&](Communicator& comm) {
    std::string reported;
    try {
      comm.selectedAlgorithm(coll, payloadOf(coll, bytes, comm.size()));
    } catch (const Error& e) {
      reported = e.detail();
    }
    try {
      ranAlgorithm(comm, coll, bytes);
    } catch (const Error& e) {
      EXPECT_EQ(e.detail(), reported);
      throw;
    }
  });
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(e.detail().find("cannot run this call"), std::string::npos) << e.detail();
  }
}

TEST(SelectionPrecedence, ForcedAlgorithmThatCannotRunFailsAlikeInQueryAndCall) {
  {
    Tunables t{{core::kTunableAlgo, "allgather:rd"}};  // rd allgather needs a power-of-two world
    expectSameFailure(3, Collective::kAllgather, 1 * kKiB);
  }
  {
    Tunables t{{core::kTunableAlgo, "allreduce:shm"}};  // the in-process transport has no shm engine
    expectSameFailure(2, Collective::kAllreduce, 64 * kKiB);
  }
  {
    Tunables t{{core::kTunableAlgo, "hier"}};  // one node
    expectSameFailure(2, Collective::kBroadcast, 64);
  }
}

// Sizes of a sweep: powers of four and their neighbours, 8 B to 6 MiB.
std::vector<std::size_t> sweepSizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t b = 8; b <= 4 * kMiB; b *= 4) {
    sizes.push_back(b);
    sizes.push_back(b * 3 / 2);
  }
  return sizes;
}

TuningCache sweepCache(const TuningSignature& sig, bool hier) {
  TuningCache cache(sig);
  cache.upsert(winner(Collective::kAllreduce, 4 * kKiB, "rd"));
  cache.upsert(winner(Collective::kAllreduce, 64 * kKiB, hier ? "hier" : "rhd"));
  cache.upsert(winner(Collective::kAllreduce, kMiB, "ring"));
  cache.upsert(winner(Collective::kAllgather, 16 * kKiB, "rd"));  // cannot run on 3 ranks: falls through
  cache.upsert(winner(Collective::kAllgather, kMiB, hier ? "hier" : "ring"));
  cache.upsert(winner(Collective::kReduceScatter, 256 * kKiB, "ring"));
  cache.upsert(winner(Collective::kBroadcast, 64 * kKiB, "binomial"));
  return cache;
}

void sweepReportedIsRun(Communicator& comm) {
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kReduceScatter,
                          Collective::kBroadcast, Collective::kBarrier}) {
    for (std::size_t bytes : sweepSizes()) {
      expectReportedIsRun(comm, coll, bytes);
      if (coll == Collective::kBarrier) break;
    }
  }
}

TEST(SelectionTuned, ReportedIsRunAtEverySizeWithAnAppliedCache) {
  detail::runInProcess(3, [](Communicator& comm) {
    ASSERT_TRUE(applyTuningCache(comm, sweepCache(currentSignature(comm), false)));
    sweepReportedIsRun(comm);
  });
  Tunables t{{core::kTunableNodeLayout, "2,2"}};
  detail::runInProcess(4, [](Communicator& comm) {
    ASSERT_TRUE(applyTuningCache(comm, sweepCache(currentSignature(comm), true)));
    sweepReportedIsRun(comm);
  });
}

TEST(SelectionTuned, ReportedIsRunAtEverySizeWithTheEnvCache) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("bc_select_" + std::to_string(::getpid()) + ".json")).string();
  sweepCache(testing::inProcessSignature(3), false).save(path);
  {
    Tunables t{{core::kTunableTuningCache, path}};
    detail::runInProcess(3, [](Communicator& comm) {
      comm.barrier();  // BOOSTCOMM_TUNING_CACHE is read at the first collective
      ASSERT_NE(tuningCacheOf(comm), nullptr);
      EXPECT_EQ(comm.selectedAlgorithm(Collective::kAllreduce, kMiB), "ring");
      sweepReportedIsRun(comm);
    });
    // Asked before the first collective (which reads the file), the answer is
    // already what the calls will run: ring from the cache, not the table's.
    detail::runInProcess(3, [](Communicator& comm) {
      const std::string before = comm.selectedAlgorithm(Collective::kAllreduce, kMiB);
      EXPECT_EQ(before, "ring");
      EXPECT_EQ(ranAlgorithm(comm, Collective::kAllreduce, kMiB), before);
    });
  }
  // A cache of another job (4 ranks) and a corrupt one: nothing is installed,
  // and the answer before the first call is the one after it, silently.
  for (bool corrupt : {false, true}) {
    if (corrupt) {
      std::ofstream(path) << "{ not json";
    } else {
      sweepCache(testing::inProcessSignature(4), false).save(path);
    }
    Tunables t{{core::kTunableTuningCache, path}};
    detail::runInProcess(3, [corrupt](Communicator& comm) {
      const std::string before = comm.selectedAlgorithm(Collective::kAllreduce, kMiB);
      EXPECT_EQ(ranAlgorithm(comm, Collective::kAllreduce, kMiB), before) << (corrupt ? "corrupt" : "foreign");
      EXPECT_EQ(tuningCacheOf(comm), nullptr);
      EXPECT_EQ(comm.selectedAlgorithm(Collective::kAllreduce, kMiB), before);
    });
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace boostcomm
