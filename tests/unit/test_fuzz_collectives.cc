// Randomized collectives against the float64 reference: (collective, dtype,
// op, algorithm, count, root, in-place, async, world size) drawn from a fixed
// seed, run on in-process groups (ranks as threads), each result checked by
// the shared case runner (common/collective_case.h: float64 reference within
// the rounding bound, guard bytes, every rank bitwise equal to rank 0).
//
// The default count is modest for CI; the 10^4 run is
//   BC_FUZZ_CASES=10000 build/tests/test_fuzz_collectives
// (docs/RELIABILITY.md has its last result). BC_FUZZ_SEED changes the seed.
// ctest label `unit`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/collective_case.h"
#include "common/inproc_harness.h"

namespace boostcomm::testing {
namespace {

constexpr int kDefaultCases = 1200;
constexpr std::uint32_t kDefaultSeed = 15;
constexpr int kWorldSizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12};

long envOr(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtol(text, nullptr, 10) : fallback;
}

bool isFloating(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 || dtype == DataType::kFloat16 ||
         dtype == DataType::kBFloat16;
}

// Mostly small (where the algorithms' edge cases are: fewer elements than
// ranks, odd remainders), some medium, a few large enough to chunk.
std::size_t drawCount(std::mt19937& rng) {
  const unsigned bucket = rng() % 100;
  if (bucket < 8) return 0;
  if (bucket < 45) return 1 + rng() % 64;
  if (bucket < 85) return 65 + rng() % 4032;
  return 4097 + rng() % 70000;
}

template <typename T, std::size_t N>
T pick(std::mt19937& rng, const T (&values)[N]) {
  return values[rng() % N];
}

TEST(FuzzCollectives, RandomCasesMatchTheFloat64Reference) {
  const long total = envOr("BC_FUZZ_CASES", kDefaultCases);
  const auto seed = static_cast<std::uint32_t>(envOr("BC_FUZZ_SEED", kDefaultSeed));
  std::mt19937 rng(seed);
  std::map<int, std::vector<std::string>> algorithmsOf[kNumCollectives];
  std::map<int, std::vector<CaseSpec>> byWorldSize;
  for (long i = 0; i < total; ++i) {
    const int ws = pick(rng, kWorldSizes);
    CaseSpec spec;
    do {
      spec.coll = pick(rng, kAllTestCollectives);
    } while (spec.coll == TestCollective::kBarrier && rng() % 4 != 0);  // barriers carry no data: fewer of them
    spec.dtype = pick(rng, kAllDataTypes);
    spec.op = pick(rng, kAllReduceOps);
    std::vector<std::string>& algos = algorithmsOf[static_cast<int>(baseCollective(spec.coll))][ws];
    if (algos.empty()) algos = withDefault(inProcessAlgorithms(ws, baseCollective(spec.coll)));
    spec.algorithm = algos[rng() % algos.size()];
    spec.count = drawCount(rng);
    spec.root = static_cast<int>(rng() % static_cast<unsigned>(ws));
    spec.pattern = isFloating(spec.dtype) && spec.op != ReduceOp::kProd && rng() % 2 ? Pattern::kRandom : Pattern::kExact;
    spec.inPlace = (spec.coll == TestCollective::kAllreduce || spec.coll == TestCollective::kAllgather) && rng() % 3 == 0;
    spec.async = rng() % 3 == 0;
    spec.seed = rng();
    // Avg of integers is rejected by design (test_bad_input covers it).
    if (expectsInvalidArgument(spec)) spec.op = ReduceOp::kSum;
    byWorldSize[ws].push_back(spec);
  }
  std::size_t ran = 0;
  for (const auto& [ws, cases] : byWorldSize) {
    const std::vector<std::string> failures = runCasesInProcess(ws, cases);
    EXPECT_TRUE(failures.empty()) << "world size " << ws << ", seed " << seed << ": " << formatFailures(failures);
    ran += cases.size();
  }
  EXPECT_EQ(ran, static_cast<std::size_t>(total));
  std::printf("[fuzz] %zu randomized cases (seed %u) over world sizes 1-12\n", ran, seed);
}

}  // namespace
}  // namespace boostcomm::testing
