// The schedule cache keys allgatherv by its exact counts: with a hash under
// which every key collides, distinct count vectors still get distinct
// entries; and on one communicator, allgatherv calls whose count vectors
// differ only in other ranks' counts (rank 0's key fields all equal) each run
// their own schedule and give exact results.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

#include "testing/inproc_group.h"
#include "api/schedule_cache.h"
#include "boostcomm/boostcomm.h"

namespace boostcomm {
namespace {

std::size_t everyKeyCollides(const detail::ScheduleKey&) { return 42; }

algorithms::CollectiveSpec allgatherv(std::vector<std::size_t> counts) {
  algorithms::CollectiveSpec spec;
  spec.collective = Collective::kAllgather;
  spec.size = static_cast<int>(counts.size());
  spec.count = counts.front();
  spec.counts = std::move(counts);
  return spec;
}

TEST(ScheduleCache, DistinctCountsWithEqualHashesDoNotCollide) {
  detail::ScheduleCache cache(16, everyKeyCollides);
  const algorithms::AlgorithmInfo& ring = *algorithms::findAlgorithm(Collective::kAllgather, "ring");
  const std::vector<std::vector<std::size_t>> vectors = {{4, 1, 7}, {4, 7, 1}, {4, 2, 6}, {4, 8}, {4}};
  std::vector<std::shared_ptr<const executor::Schedule>> built;
  for (const auto& counts : vectors) {
    EXPECT_EQ(cache.find(ring, allgatherv(counts)), nullptr) << "counts of size " << counts.size();
    built.push_back(std::make_shared<executor::Schedule>());
    cache.insert(built.back());
  }
  EXPECT_EQ(cache.size(), vectors.size());
  for (std::size_t i = 0; i < vectors.size(); ++i) EXPECT_EQ(cache.find(ring, allgatherv(vectors[i])), built[i]);
  // Equal counts, other algorithm: another entry.
  const algorithms::AlgorithmInfo& native = *algorithms::findAlgorithm(Collective::kAllgather, "native");
  EXPECT_EQ(cache.find(native, allgatherv(vectors[0])), nullptr);
}

TEST(ScheduleCache, NoEntriesWithoutALimit) {
  detail::ScheduleCache cache(0);
  const algorithms::AlgorithmInfo& ring = *algorithms::findAlgorithm(Collective::kAllgather, "ring");
  cache.find(ring, allgatherv({1, 2}));
  cache.insert(std::make_shared<executor::Schedule>());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ScheduleCache, AllgathervWithCountsDifferingElsewhereRunsItsOwnSchedule) {
  constexpr int kRanks = 3;
  // Rank 0 contributes 4 elements each time and the totals are equal.
  const std::vector<std::vector<std::size_t>> vectors = {{4, 1, 7}, {4, 7, 1}, {4, 2, 6}, {4, 1, 7}};
  detail::runInProcess(kRanks, [&](Communicator& comm) {
    for (const char* algo : {"ring", "native"}) {
      for (const auto& counts : vectors) {
        const std::size_t mine = counts[static_cast<std::size_t>(comm.rank())];
        std::vector<float> in(mine);
        for (std::size_t i = 0; i < mine; ++i) in[i] = static_cast<float>(comm.rank() * 100 + static_cast<int>(i));
        std::vector<float> out(std::accumulate(counts.begin(), counts.end(), std::size_t{0}), -1.0f);
        CallOptions options;
        options.algorithm = algo;
        comm.allgatherv(std::span<const float>(in), std::span<float>(out), counts, options);
        std::size_t at = 0;
        for (int r = 0; r < kRanks; ++r) {
          for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i, ++at) {
            ASSERT_EQ(out[at], static_cast<float>(r * 100 + static_cast<int>(i)))
                << algo << " rank " << comm.rank() << " block " << r << " element " << i;
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace boostcomm
