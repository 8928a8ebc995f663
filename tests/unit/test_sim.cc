// The simulator in data mode: every algorithm's real Schedules run for 6 to
// 128 ranks in one process on the simulated network, with real buffers and
// reductions, checked against the float64 reference (tests/common/test_data.h).
// Sizes sweep {0, 1, 7, 1000, 4099}-style counts; hierarchical algorithms run
// on uniform NxM layouts, flat ones on any. Inputs of kExact pattern make every
// summation order exact, so results must match the reference exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "boostcomm/error.h"
#include "common/test_data.h"
#include "simulate/simulator.h"

namespace boostcomm {
namespace {

using simulate::JobSpec;
using simulate::Simulation;
using simulate::ClusterSpec;
using testing::Pattern;

struct Layout {
  int nodes;
  int perNode;
};

ClusterSpec clusterOf(Layout l) {
  ClusterSpec c;
  c.nodes = l.nodes;
  c.ranksPerNode = l.perNode;
  return c;
}

// Small chunks so that even modest counts pipeline over several chunks and
// hierarchical pieces (the paths where schedules get intricate).
JobSpec jobOf(Collective coll, const std::string& algo, std::size_t count, ReduceOp op, DataType dtype, int root = 0) {
  JobSpec job;
  job.algorithm = algo;
  job.request.collective = coll;
  job.request.count = count;
  job.request.op = op;
  job.request.dtype = dtype;
  job.request.root = root;
  job.request.chunkBytes = 1024;
  job.request.maxChunks = 8;
  return job;
}

bool runs(const ClusterSpec& c, const std::string& algo, Collective coll) {
  const algorithms::AlgorithmInfo* info = algorithms::findAlgorithm(coll, algo);
  if (info == nullptr) return false;
  Simulation probe(c);
  try {
    probe.add(jobOf(coll, algo, 16, ReduceOp::kSum, DataType::kFloat32));
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::vector<std::string> algosFor(const ClusterSpec& c, Collective coll) {
  std::vector<std::string> out;
  for (const std::string& name : algorithms::algorithmNames(coll)) {
    if (runs(c, name, coll)) out.push_back(name);
  }
  return out;
}

// Elements of each rank's send and receive buffers for a collective.
std::size_t sendElems(Collective coll, std::size_t count, int ranks) {
  return coll == Collective::kReduceScatter ? count * static_cast<std::size_t>(ranks) : count;
}
std::size_t recvElems(Collective coll, std::size_t count, int ranks) {
  return coll == Collective::kAllgather ? count * static_cast<std::size_t>(ranks) : count;
}

class SimData : public ::testing::TestWithParam<Layout> {};

TEST_P(SimData, AllreduceEveryAlgorithmMatchesReference) {
  const ClusterSpec c = clusterOf(GetParam());
  const int n = c.ranks();
  const std::vector<std::string> algos = algosFor(c, Collective::kAllreduce);
  ASSERT_GE(algos.size(), 4u);
  if (c.nodes > 1 && c.ranksPerNode > 1) {
    ASSERT_NE(std::find(algos.begin(), algos.end(), "hier"), algos.end());
  }
  for (const std::string& algo : algos) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{4099}}) {
      for (const auto& [op, dtype] : {std::pair{ReduceOp::kSum, DataType::kFloat32}, std::pair{ReduceOp::kAvg, DataType::kFloat32},
                                      std::pair{ReduceOp::kMax, DataType::kFloat32}, std::pair{ReduceOp::kSum, DataType::kFloat64}}) {
        {
          SCOPED_TRACE(algo + " count " + std::to_string(count) + " op " + std::string(toString(op)) + " " +
                       std::string(toString(dtype)));
          const std::size_t es = dataTypeSize(dtype);
          std::vector<std::vector<char>> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
          Simulation sim(c);
          sim.add(jobOf(Collective::kAllreduce, algo, count, op, dtype));
          for (int r = 0; r < n; ++r) {
            auto& i = in[static_cast<std::size_t>(r)];
            auto& o = out[static_cast<std::size_t>(r)];
            i.resize(count * es + 1);
            o.assign(count * es + 1, 0x7f);
            testing::fillReduceInput(i.data(), dtype, op, Pattern::kExact, 7, r, 0, count);
            sim.bind(0, r, i.data(), o.data());
          }
          const simulate::SimResult result = sim.run();
          EXPECT_GT(result.seconds, count > 0 ? 0.0 : -1.0);
          // The float64 reference costs O(ranks x count) per rank checked:
          // check rank 0 against it, and every other rank bitwise against
          // rank 0 (exact inputs: every correct summation order gives the
          // reference exactly, so a correct result is bitwise unique).
          ASSERT_EQ(testing::checkReduction(out[0].data(), dtype, op, Pattern::kExact, 7, n, 0, count), "");
          for (int r = 1; r < n; ++r) {
            ASSERT_EQ(testing::compareBytes(out[static_cast<std::size_t>(r)].data(), out[0].data(), count * es, es), "")
                << "rank " << r << " differs from rank 0";
          }
        }
      }
    }
  }
}

TEST_P(SimData, ReduceScatterEveryAlgorithmMatchesReference) {
  const ClusterSpec c = clusterOf(GetParam());
  const int n = c.ranks();
  for (const std::string& algo : algosFor(c, Collective::kReduceScatter)) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{33}}) {
      SCOPED_TRACE(algo + " count " + std::to_string(count));
      const std::size_t total = sendElems(Collective::kReduceScatter, count, n);
      std::vector<std::vector<float>> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
      Simulation sim(c);
      sim.add(jobOf(Collective::kReduceScatter, algo, count, ReduceOp::kSum, DataType::kFloat32));
      for (int r = 0; r < n; ++r) {
        in[static_cast<std::size_t>(r)].resize(total + 1);
        out[static_cast<std::size_t>(r)].assign(count + 1, -1.0f);
        testing::fillReduceInput(in[static_cast<std::size_t>(r)].data(), DataType::kFloat32, ReduceOp::kSum,
                                 Pattern::kExact, 3, r, 0, total);
        sim.bind(0, r, in[static_cast<std::size_t>(r)].data(), out[static_cast<std::size_t>(r)].data());
      }
      sim.run();
      for (int r = 0; r < n; ++r) {
        const std::string bad = testing::checkReduction(out[static_cast<std::size_t>(r)].data(), DataType::kFloat32,
                                                        ReduceOp::kSum, Pattern::kExact, 3, n,
                                                        count * static_cast<std::size_t>(r), count);
        ASSERT_EQ(bad, "") << "rank " << r;
      }
    }
  }
}

TEST_P(SimData, AllgatherAndBroadcastMoveEveryByte) {
  const ClusterSpec c = clusterOf(GetParam());
  const int n = c.ranks();
  for (Collective coll : {Collective::kAllgather, Collective::kBroadcast}) {
    for (const std::string& algo : algosFor(c, coll)) {
      for (std::size_t count : {std::size_t{0}, std::size_t{5}, std::size_t{300}}) {
        const int root = coll == Collective::kBroadcast ? n / 3 : 0;
        SCOPED_TRACE(std::string(toString(coll)) + " " + algo + " count " + std::to_string(count));
        const std::size_t sendN = sendElems(coll, count, n) * 4;
        const std::size_t recvN = recvElems(coll, count, n) * 4;
        std::vector<std::vector<char>> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
        Simulation sim(c);
        sim.add(jobOf(coll, algo, count, ReduceOp::kSum, DataType::kFloat32, root));
        for (int r = 0; r < n; ++r) {
          auto& i = in[static_cast<std::size_t>(r)];
          auto& o = out[static_cast<std::size_t>(r)];
          i.resize(sendN + 1);
          testing::fillBytes(i.data(), sendN, 11, r);
          o.assign(recvN + 1, 0);
          // Broadcast is in place on the receive buffer: the root's holds the data.
          if (coll == Collective::kBroadcast && r == root) std::memcpy(o.data(), i.data(), sendN);
          sim.bind(0, r, i.data(), o.data());
        }
        sim.run();
        std::vector<char> expected(recvN + 1, 0);
        if (coll == Collective::kBroadcast) {
          std::memcpy(expected.data(), in[static_cast<std::size_t>(root)].data(), recvN);
        } else {
          for (int r = 0; r < n; ++r) std::memcpy(expected.data() + sendN * static_cast<std::size_t>(r), in[static_cast<std::size_t>(r)].data(), sendN);
        }
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(testing::compareBytes(out[static_cast<std::size_t>(r)].data(), expected.data(), recvN, 4), "")
              << "rank " << r;
        }
      }
    }
  }
}

// 128 ranks as 16x8 and 8x16, 64 as 8x8, uneven-count friendly 3x5 and
// 2x3, one node of 6, and 64 single-rank nodes (flat only).
INSTANTIATE_TEST_SUITE_P(Layouts, SimData,
                         ::testing::Values(Layout{2, 3}, Layout{3, 5}, Layout{1, 6}, Layout{8, 8}, Layout{16, 8},
                                           Layout{8, 16}, Layout{64, 1}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::to_string(info.param.nodes) + "x" + std::to_string(info.param.perNode);
                         });

// Several jobs in one simulation (a training step's buckets): each keeps its
// own messages and buffers, whether they overlap in time or run in sequence.
TEST(SimJobs, OverlappingAndSequentialJobsStaySeparate) {
  const ClusterSpec c = clusterOf({4, 4});
  const int n = c.ranks();
  const std::vector<std::string> algos = {"hier", "ring", "native", "rhd"};
  Simulation sim(c);
  std::vector<std::vector<std::vector<float>>> in(algos.size()), out(algos.size());
  for (std::size_t j = 0; j < algos.size(); ++j) {
    JobSpec job = jobOf(Collective::kAllreduce, algos[j], 500 + j, ReduceOp::kSum, DataType::kFloat32);
    job.afterPrevious = j % 2 == 1;
    job.releaseSeconds = 1e-6 * static_cast<double>(j);
    sim.add(job);
    in[j].resize(static_cast<std::size_t>(n));
    out[j].resize(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      in[j][static_cast<std::size_t>(r)].resize(500 + j);
      out[j][static_cast<std::size_t>(r)].assign(500 + j, 0);
      testing::fillReduceInput(in[j][static_cast<std::size_t>(r)].data(), DataType::kFloat32, ReduceOp::kSum,
                               Pattern::kExact, 100 + j, r, 0, 500 + j);
      sim.bind(static_cast<int>(j), r, in[j][static_cast<std::size_t>(r)].data(), out[j][static_cast<std::size_t>(r)].data());
    }
  }
  const simulate::SimResult result = sim.run();
  for (std::size_t j = 0; j < algos.size(); ++j) {
    EXPECT_LE(result.jobEndSeconds[j], result.seconds);
    // A sequential job starts on each rank when that rank finished the
    // previous one, so its first start is after the previous job's first start.
    if (j % 2 == 1) {
      EXPECT_GT(result.jobStartSeconds[j], result.jobStartSeconds[j - 1]) << j;
    }
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(testing::checkReduction(out[j][static_cast<std::size_t>(r)].data(), DataType::kFloat32, ReduceOp::kSum,
                                        Pattern::kExact, 100 + j, n, 0, 500 + j),
                "")
          << algos[j] << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace boostcomm
