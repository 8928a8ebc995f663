// Segment-list allgather and reduce_scatter (Communicator::allgatherMany /
// reduceScatterMany) on in-process groups.
//
// Tensor lists of 0, 1, 2 and 40 tensors with lengths 0, 1, odd and prime,
// every in-process algorithm (native and shm-less staging, ring/rd with
// steps cut at tensor and block boundaries), world sizes 1-8, tiny chunks so
// ring messages straddle tensors. allgather moves raw bytes (any bit
// pattern); reduce_scatter is checked against the float64 reference of its
// block. Every rank's result is compared with rank 0's (allgather) or with
// the reference (reduce_scatter: each rank owns a different block). Guard
// bytes after each output tensor must survive. Bad shapes fail on every rank.
// Every other case runs the per-rank form (allgatherManyPerRank /
// reduceScatterManyPerRank) over the same tensors' blocks.
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "common/inproc_harness.h"
#include "common/many_split_case.h"
#include "common/test_data.h"
#include "common/tunable_override.h"
#include "testing/inproc_group.h"

namespace boostcomm::testing {
namespace {

std::vector<std::string> withDefaultSelection(int worldSize, Collective coll) {
  std::vector<std::string> algos = inProcessAlgorithms(worldSize, coll);
  algos.insert(algos.begin(), "");
  return algos;
}

std::vector<std::string> runAllgather(int worldSize, const std::vector<std::size_t>& shapes, bool async) {
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::vector<unsigned char>> outputs(static_cast<std::size_t>(worldSize));
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    SplitCase c;
    c.seed = 100;
    for (const std::string& algo : withDefaultSelection(worldSize, Collective::kAllgather)) {
      for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16, DataType::kUInt8, DataType::kInt64}) {
        for (std::size_t tensors : shapes) {
          c.counts = listShape(tensors, 3);
          c.dtype = dtype;
          c.algorithm = algo;
          c.async = async;
          c.seed += 50;
          c.perRank = (c.seed / 50) % 2 == 1;  // every other case through the per-rank form
          const std::string bad = runAllgatherMany(comm, c, &outputs[static_cast<std::size_t>(comm.rank())]);
          if (!bad.empty()) {
            std::lock_guard lock(mutex);
            failures.push_back("ws " + std::to_string(worldSize) + " " + describe(c, "allgatherMany") + " rank " +
                               std::to_string(comm.rank()) + ": " + bad);
          }
        }
      }
    }
  });
  for (int r = 1; r < worldSize; ++r)
    if (outputs[static_cast<std::size_t>(r)] != outputs[0])
      failures.push_back("ws " + std::to_string(worldSize) + ": rank " + std::to_string(r) + "'s outputs differ from rank 0's");
  return failures;
}

std::vector<std::string> runReduceScatter(int worldSize, const std::vector<std::size_t>& shapes, bool async) {
  std::mutex mutex;
  std::vector<std::string> failures;
  detail::runInProcess(worldSize, [&](Communicator& comm) {
    SplitCase c;
    c.seed = 300;
    for (const std::string& algo : withDefaultSelection(worldSize, Collective::kReduceScatter)) {
      for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt32}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
          if (op == ReduceOp::kAvg && !isFloatingPoint(dtype)) continue;
          for (std::size_t tensors : shapes) {
            c.counts = listShape(tensors, 3);
            c.dtype = dtype;
            c.op = op;
            c.algorithm = algo;
            c.async = async;
            c.seed += 50;
            c.perRank = (c.seed / 50) % 2 == 1;
            const std::string bad = runReduceScatterMany(comm, c);
            if (!bad.empty()) {
              std::lock_guard lock(mutex);
              failures.push_back("ws " + std::to_string(worldSize) + " " + describe(c, "reduceScatterMany") +
                                 " rank " + std::to_string(comm.rank()) + ": " + bad);
            }
          }
        }
      }
    }
  });
  return failures;
}

class ManySplitSweep : public ::testing::TestWithParam<int> {};

TEST_P(ManySplitSweep, AllgatherEveryAlgorithmAndShape) {
  const auto failures = runAllgather(GetParam(), {0, 1, 2, 40}, GetParam() % 2 == 1);
  EXPECT_TRUE(failures.empty()) << formatFailures(failures);
}

TEST_P(ManySplitSweep, ReduceScatterEveryAlgorithmAndShape) {
  const auto failures = runReduceScatter(GetParam(), {0, 1, 2, 40}, GetParam() % 2 == 0);
  EXPECT_TRUE(failures.empty()) << formatFailures(failures);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ManySplitSweep, ::testing::Values(1, 2, 3, 4, 5, 8));

// 64-byte chunks: every ring message straddles tensors and rank blocks.
TEST(ManySplit, TinyChunksStraddleTensors) {
  TunableOverride chunk("BOOSTCOMM_RING_CHUNK_BYTES", "64");
  for (int worldSize : {2, 3, 7}) {
    auto failures = runAllgather(worldSize, {161}, false);
    const auto more = runReduceScatter(worldSize, {161}, true);
    failures.insert(failures.end(), more.begin(), more.end());
    EXPECT_TRUE(failures.empty()) << formatFailures(failures);
  }
}

// ------------------------------------------------------------ bad input

TEST(ManySplitErrors, WrongCountOnOneRankFailsEveryRank) {
  const auto errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(4), b(comm.rank() == 1 ? 11 : 12);
    std::vector<ConstView> send{ConstView(a.data(), 4, DataType::kFloat32)};
    std::vector<View> recv{View(b.data(), b.size(), DataType::kFloat32)};
    comm.allgatherMany(send, recv);
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    // Rank 1 names its argument; the others name rank 1.
    const std::string what = e.what();
    EXPECT_TRUE(what.find("recv[0].count is 11") != std::string::npos || what.find("rank(s) 1") != std::string::npos)
        << what;
  }
}

TEST(ManySplitErrors, PerRankWrongBlockCountOrListLengthFailsEveryRank) {
  // Rank 1's block for rank 2 is one element short; on rank 2 the block list is one short.
  const auto errors = errorsOnEveryRank(3, [](Communicator& comm) {
    std::vector<float> a(4), b(12);
    std::vector<ConstView> send{ConstView(a.data(), 4, DataType::kFloat32)};
    std::vector<View> byRank;
    const int blocks = comm.rank() == 2 ? 2 : 3;
    for (int r = 0; r < blocks; ++r)
      byRank.emplace_back(b.data() + 4 * r, comm.rank() == 1 && r == 2 ? 3 : 4, DataType::kFloat32);
    comm.allgatherManyPerRank(send, byRank);
  });
  ASSERT_EQ(errors.size(), 3u);
  for (const Error& e : errors) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
    const std::string what = e.what();
    EXPECT_TRUE(what.find("recv[2].count is 3") != std::string::npos ||
                what.find("recv has 2") != std::string::npos || what.find("rank(s) 1, 2") != std::string::npos)
        << what;
  }
}

TEST(ManySplitErrors, SendOverlappingRecvFailsEveryRank) {
  const auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    std::vector<float> mem(32);
    // recv[0] is mem[0..16); on rank 0 send[0] lies inside it.
    float* sendData = comm.rank() == 0 ? mem.data() + 2 : mem.data() + 16;
    std::vector<ConstView> send{ConstView(sendData, 8, DataType::kFloat32)};
    std::vector<View> recv{View(mem.data(), 16, DataType::kFloat32)};
    comm.allgatherMany(send, recv);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
}

TEST(ManySplitErrors, ListsDifferingAcrossRanksAreAMismatch) {
  const auto errors = errorsOnEveryRank(2, [](Communicator& comm) {
    const std::size_t n = comm.rank() == 0 ? 3 : 4;
    std::vector<float> in(2 * n), out(n);
    std::vector<ConstView> send{ConstView(in.data(), 2 * n, DataType::kFloat32)};
    std::vector<View> recv{View(out.data(), n, DataType::kFloat32)};
    comm.reduceScatterMany(send, recv, ReduceOp::kSum);
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const Error& e : errors) EXPECT_EQ(e.category(), ErrorCategory::kMismatch) << e.what();
}

TEST(ManySplitErrors, LengthMismatchMixedDtypesAndIntegerAverage) {
  auto expectInvalidEverywhere = [](const std::function<void(Communicator&)>& fn, const char* words) {
    const auto errors = errorsOnEveryRank(2, fn);
    ASSERT_EQ(errors.size(), 2u);
    for (const Error& e : errors) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expectInvalidEverywhere(
      [](Communicator& comm) {
        std::vector<float> a(2), b(4), c(4);
        std::vector<ConstView> send{ConstView(a.data(), 2, DataType::kFloat32)};
        std::vector<View> recv{View(b.data(), 4, DataType::kFloat32), View(c.data(), 4, DataType::kFloat32)};
        comm.allgatherMany(send, recv);
      },
      "send has 1 tensors but recv has 2");
  expectInvalidEverywhere(
      [](Communicator& comm) {
        std::vector<float> a(4);
        std::vector<double> b(2);
        std::vector<ConstView> send{ConstView(a.data(), 4, DataType::kFloat32)};
        std::vector<View> recv{View(b.data(), 2, DataType::kFloat64)};
        comm.reduceScatterMany(send, recv, ReduceOp::kSum);
      },
      "one dtype per list");
  expectInvalidEverywhere(
      [](Communicator& comm) {
        std::vector<int> a(4), b(2);
        std::vector<ConstView> send{ConstView(a.data(), 4, DataType::kInt32)};
        std::vector<View> recv{View(b.data(), 2, DataType::kInt32)};
        comm.reduceScatterMany(send, recv, ReduceOp::kAvg);
      },
      "op avg is not supported");
}

}  // namespace
}  // namespace boostcomm::testing
