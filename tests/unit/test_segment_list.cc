// Segment-list allreduce (Communicator::allreduceMany) on in-process groups,
// and the SegmentList addressing underneath it (core/segment_list.h).
//
// Lists of 0, 1, 2 and 161 segments with lengths 0, 1, odd and prime; every
// dtype and op on every in-process algorithm (native through its staging
// copy, ring/rhd/rd with steps cut at segment boundaries), world sizes 1-16;
// chunks made tiny so every ring chunk straddles segments. Each rank checks
// its result against the float64 reference and against rank 0's bytes.
// Overlapping segments, null data, mixed dtypes or lists that differ between
// ranks must fail on every rank.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/collective_case.h"
#include "common/inproc_harness.h"
#include "common/test_data.h"
#include "common/tunable_override.h"
#include "core/segment_list.h"
#include "testing/inproc_group.h"

namespace boostcomm::testing {
namespace {

// ------------------------------------------------------------ SegmentList

TEST(SegmentList, FindPiecesAndRuns) {
  char a[5], b[3], c[7];
  core::SegmentList list;
  list.append(a, 5);
  list.append(nullptr, 0);  // empty: skipped
  list.append(b, 3);
  list.append(c, 7);
  ASSERT_EQ(list.segments(), 3u);
  EXPECT_EQ(list.totalBytes(), 15u);
  EXPECT_EQ(list.find(0), 0u);
  EXPECT_EQ(list.find(4), 0u);
  EXPECT_EQ(list.find(5), 1u);
  EXPECT_EQ(list.find(8), 2u);
  EXPECT_EQ(list.find(14), 2u);
  EXPECT_EQ(list.pieceCount(4, 6), 3u);
  EXPECT_EQ(list.pieceCount(5, 3), 1u);
  EXPECT_EQ(list.contiguous(5, 3), b);
  EXPECT_EQ(list.contiguous(4, 2), nullptr);
  std::vector<std::size_t> sizes;
  list.forEachPiece(3, 10, [&](core::Piece p) { sizes.push_back(p.bytes); });
  EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 3, 5}));

  // gather/scatter round trip through a contiguous buffer
  for (int i = 0; i < 5; ++i) a[i] = static_cast<char>(i);
  for (int i = 0; i < 3; ++i) b[i] = static_cast<char>(5 + i);
  for (int i = 0; i < 7; ++i) c[i] = static_cast<char>(8 + i);
  char flat[15];
  list.gather(flat, 0, 15);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(flat[i], i);
  for (char& x : flat) x = static_cast<char>(x + 100);
  list.scatter(2, flat + 2, 11);
  EXPECT_EQ(a[1], 1);
  EXPECT_EQ(a[2], 102);
  EXPECT_EQ(c[4], 112);  // list byte 12: the last one written
  EXPECT_EQ(c[5], 13);

  // Runs of two listed operands cut at both lists' boundaries.
  char d[4], e[11];
  core::SegmentList other;
  other.append(d, 4);
  other.append(e, 11);
  const core::Operand ops[2] = {{&list, nullptr, 0}, {&other, nullptr, 0}};
  std::vector<std::size_t> runs;
  core::forEachRun(ops, 15, [&](char* const*, std::size_t n) { runs.push_back(n); });
  EXPECT_EQ(runs, (std::vector<std::size_t>{4, 1, 3, 7}));
}

// ------------------------------------------------------------ allreduceMany


struct ListCase {
  std::vector<std::size_t> counts;
  DataType dtype;
  ReduceOp op;
  std::string algorithm;
};

std::string describe(const ListCase& c, int worldSize) {
  return "ws " + std::to_string(worldSize) + " " + std::string(toString(c.dtype)) + " " +
         std::string(toString(c.op)) + " algo '" + c.algorithm + "' segments " + std::to_string(c.counts.size());
}

// Runs the cases on one in-process group; returns failures.
std::vector<std::string> runListCases(int worldSize, const std::vector<ListCase>& cases) {
  std::mutex mutex;
  std::vector<std::string> failures;
  // Per case: rank 0's result bytes, for the bitwise cross-rank check.
  std::vector<std::vector<unsigned char>> rank0(cases.size());
  std::vector<std::vector<std::vector<unsigned char>>> results(cases.size(),
                                                               std::vector<std::vector<unsigned char>>(worldSize));
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    const int rank = comm.rank();
    for (std::size_t k = 0; k < cases.size(); ++k) {
      const ListCase& c = cases[k];
      const std::size_t es = dataTypeSize(c.dtype);
      const std::size_t total = std::accumulate(c.counts.begin(), c.counts.end(), std::size_t{0});
      // Separate allocations per segment, with a guard byte after each.
      std::vector<std::vector<unsigned char>> memory;
      std::vector<View> segments;
      std::size_t first = 0;
      for (std::size_t n : c.counts) {
        memory.emplace_back(n * es + 1, 0xA5);
        fillReduceInput(memory.back().data(), c.dtype, c.op, Pattern::kExact, 42 + k, rank, first, n);
        segments.emplace_back(n == 0 ? nullptr : memory.back().data(), n, c.dtype);
        first += n;
      }
      CallOptions options;
      options.algorithm = c.algorithm;
      try {
        if (k % 2 == 0) {
          comm.allreduceMany(segments, c.op, options);
        } else {
          comm.allreduceManyAsync(segments, c.op, options).wait();
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.push_back(describe(c, worldSize) + " rank " + std::to_string(rank) + ": " + e.what());
        continue;
      }
      std::vector<unsigned char> flat(total * es);
      first = 0;
      for (std::size_t s = 0; s < c.counts.size(); ++s) {
        const std::size_t n = c.counts[s];
        if (memory[s][n * es] != 0xA5) {
          std::lock_guard lock(mutex);
          failures.push_back(describe(c, worldSize) + " rank " + std::to_string(rank) + ": guard byte after segment " +
                             std::to_string(s) + " overwritten");
        }
        if (n > 0) std::memcpy(flat.data() + first * es, memory[s].data(), n * es);
        first += n;
      }
      const std::string bad = checkReduction(flat.data(), c.dtype, c.op, Pattern::kExact, 42 + k, worldSize, 0, total);
      std::lock_guard lock(mutex);
      if (!bad.empty()) failures.push_back(describe(c, worldSize) + " rank " + std::to_string(rank) + ": " + bad);
      results[k][static_cast<std::size_t>(rank)] = std::move(flat);
    }
  });
  for (std::size_t k = 0; k < cases.size(); ++k) {
    for (int r = 1; r < worldSize; ++r) {
      if (results[k][static_cast<std::size_t>(r)] != results[k][0])
        failures.push_back(describe(cases[k], worldSize) + ": rank " + std::to_string(r) + " differs from rank 0");
    }
  }
  return failures;
}

std::vector<std::string> algorithmsFor(int worldSize) {
  std::vector<std::string> algos = inProcessAlgorithms(worldSize, Collective::kAllreduce);
  algos.insert(algos.begin(), "");  // the default selection
  return algos;
}

class ManySweep : public ::testing::TestWithParam<int> {};

TEST_P(ManySweep, EveryDtypeOpAlgorithmAndShape) {
  const int worldSize = GetParam();
  std::vector<ListCase> cases;
  for (const std::string& algo : algorithmsFor(worldSize)) {
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kAllReduceOps) {
        if (op == ReduceOp::kAvg && !isFloatingPoint(dtype)) continue;
        for (std::size_t segments : {0, 1, 2, 161}) cases.push_back({listShape(segments, 1), dtype, op, algo});
      }
    }
  }
  const auto failures = runListCases(worldSize, cases);
  EXPECT_TRUE(failures.empty()) << formatFailures(failures);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ManySweep, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16));

// Chunks of 64 bytes: every ring/rhd message and reduce straddles segments
// (segments of 1-1021 elements), and lists large enough to take several
// chunks per ring segment.
TEST(Many, TinyChunksStraddleSegments) {
  TunableOverride chunk("BOOSTCOMM_RING_CHUNK_BYTES", "64");
  for (int worldSize : {2, 3, 4, 7}) {
    std::vector<ListCase> cases;
    for (const std::string& algo : algorithmsFor(worldSize)) {
      for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64, DataType::kUInt8}) {
        cases.push_back({listShape(161, 3), dtype, ReduceOp::kSum, algo});
        cases.push_back({listShape(40, 5), dtype, ReduceOp::kMax, algo});
      }
    }
    const auto failures = runListCases(worldSize, cases);
    EXPECT_TRUE(failures.empty()) << formatFailures(failures);
  }
}

// Many lists in flight at once, completed out of order of waiting.
TEST(Many, SeveralInFlight) {
  const int worldSize = 3;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    constexpr int kLists = 6;
    std::vector<std::vector<std::vector<float>>> memory(kLists);
    std::vector<Work> works;
    for (int l = 0; l < kLists; ++l) {
      std::vector<View> segments;
      for (std::size_t n : listShape(20 + l, 2)) {
        memory[l].emplace_back(n, static_cast<float>(comm.rank() + l));
        segments.emplace_back(memory[l].back().data(), n, DataType::kFloat32);
      }
      CallOptions options;
      options.algorithm = l % 2 ? "ring" : "";
      works.push_back(comm.allreduceManyAsync(segments, ReduceOp::kSum, options));
    }
    for (int l = kLists; l-- > 0;) works[l].wait();
    // Rank r contributes r + l: the sum over ranks 0..2 is 3 + 3l.
    for (int l = 0; l < kLists; ++l)
      for (const auto& seg : memory[l])
        for (float v : seg) ASSERT_EQ(v, 3.0f + 3.0f * static_cast<float>(l)) << "list " << l;
  });
}

// ------------------------------------------------------------ broadcastMany

// Every rank's segments end equal to the root's bytes (any bit pattern,
// NaNs included), on every algorithm, every root, with straddling chunks.
TEST(BroadcastMany, EveryAlgorithmAndRoot) {
  TunableOverride chunk("BOOSTCOMM_RING_CHUNK_BYTES", "64");
  for (int worldSize : {1, 2, 3, 5, 8}) {
    std::vector<std::string> algos = inProcessAlgorithms(worldSize, Collective::kBroadcast);
    algos.insert(algos.begin(), "");
    std::mutex mutex;
    std::vector<std::string> failures;
    detail::runInProcess(worldSize, [&](Communicator& comm) {
      std::uint64_t seed = 5;
      for (const std::string& algo : algos) {
        for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kUInt8}) {
          for (std::size_t n : {0, 1, 2, 161}) {
            for (int root = 0; root < worldSize; ++root, ++seed) {
              const std::size_t es = dataTypeSize(dtype);
              std::vector<std::vector<unsigned char>> mine, expected;
              std::vector<View> segments;
              for (std::size_t count : listShape(n, 3)) {
                mine.emplace_back(count * es);
                expected.emplace_back(count * es);
                fillBytes(mine.back().data(), mine.back().size(), seed + segments.size(), comm.rank());
                fillBytes(expected.back().data(), expected.back().size(), seed + segments.size(), root);
                segments.emplace_back(mine.back().data(), count, dtype);
              }
              CallOptions options;
              options.algorithm = algo;
              std::string bad;
              try {
                if (seed % 2) {
                  comm.broadcastMany(segments, root, options);
                } else {
                  comm.broadcastManyAsync(segments, root, options).wait();
                }
                for (std::size_t i = 0; i < mine.size() && bad.empty(); ++i)
                  if (mine[i] != expected[i]) bad = "segment " + std::to_string(i) + " differs from root's";
              } catch (const std::exception& e) {
                bad = e.what();
              }
              if (!bad.empty()) {
                std::lock_guard lock(mutex);
                failures.push_back("ws " + std::to_string(worldSize) + " algo '" + algo + "' " +
                                   std::string(toString(dtype)) + " " + std::to_string(n) + " segments root " +
                                   std::to_string(root) + " rank " + std::to_string(comm.rank()) + ": " + bad);
              }
            }
          }
        }
      }
    });
    EXPECT_TRUE(failures.empty()) << formatFailures(failures);
  }
}

TEST(BroadcastManyErrors, BadRootOrDifferentRootsFailEveryRank) {
  auto errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(10, 1.0f);
    std::vector<View> segments{View(a.data(), 10, DataType::kFloat32)};
    comm.broadcastMany(segments, comm.rank() == 2 ? 7 : 0);
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
  errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> a(10, 1.0f);
    std::vector<View> segments{View(a.data(), 10, DataType::kFloat32)};
    comm.broadcastMany(segments, comm.rank());
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
}

// ------------------------------------------------------------ bad input

TEST(ManyErrors, OverlapOnOneRankFailsEveryRank) {
  const auto errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(100, 1.0f);
    std::vector<View> segments{View(a.data(), 60, DataType::kFloat32), View(a.data() + 60, 40, DataType::kFloat32)};
    if (comm.rank() == 1) segments[1] = View(a.data() + 50, 40, DataType::kFloat32);  // overlaps segment 0
    comm.allreduceMany(segments, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("allreduceMany"), std::string::npos) << e.what();
    if (e.rank() == 1) {
      EXPECT_NE(std::string(e.what()).find("segments[0] and segments[1] overlap"), std::string::npos) << e.what();
    } else {
      EXPECT_NE(std::string(e.what()).find("rank(s) 1"), std::string::npos) << e.what();
    }
  }
}

TEST(ManyErrors, DifferentListsAcrossRanksAreAMismatch) {
  // Same total, different cut: still an error (the list shape is agreed).
  const auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> a(100, 1.0f);
    const std::size_t cut = comm.rank() == 0 ? 30 : 31;
    std::vector<View> segments{View(a.data(), cut, DataType::kFloat32),
                               View(a.data() + cut, 100 - cut, DataType::kFloat32)};
    comm.allreduceMany(segments, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
}

TEST(ManyErrors, DtypeDisagreementAndMixedDtypes) {
  auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<double> a(10, 1.0);
    const DataType t = comm.rank() == 0 ? DataType::kFloat64 : DataType::kInt64;
    std::vector<View> segments{View(a.data(), 10, t)};
    comm.allreduceMany(segments, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();

  errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> a(10, 1.0f);
    std::vector<std::int32_t> b(10, 1);
    std::vector<View> segments{View(a.data(), 10, DataType::kFloat32), View(b.data(), 10, DataType::kInt32)};
    comm.allreduceMany(segments, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("one dtype per list"), std::string::npos) << e.what();
  }
}

TEST(ManyErrors, NullDataAndIntegerAverage) {
  auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> a(10, 1.0f);
    std::vector<View> segments{View(a.data(), 10, DataType::kFloat32), View(nullptr, comm.rank() == 0 ? 3 : 0,
                                                                             DataType::kFloat32)};
    comm.allreduceMany(segments, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 2u);
  errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<std::int32_t> a(10, 1);
    std::vector<View> segments{View(a.data(), 10, DataType::kInt32)};
    comm.allreduceMany(segments, ReduceOp::kAvg);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
}

}  // namespace
}  // namespace boostcomm::testing
