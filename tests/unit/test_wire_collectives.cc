// Wire formats on allgather(v) and reduce_scatter (docs/ALGORITHMS.md, "Wire
// formats"), in-process: flat ring on world sizes 1-8 and hier on declared
// multi-node layouts.
//   reduce_scatter: each rank's block against the float64 reference within
//     (roundings * u + float32 additions) * sum|x|, roundings = ring hops
//     that forward a partial sum (n-1 flat, N-1 across N nodes for hier);
//   allgather: every rank bitwise identical, every value within one rounding
//     of its owner's input (the owner keeps the rounded value too).
// Then the settings (the communicator's format reaches these collectives,
// other payloads pass through exactly, explicit bad requests are errors on
// every rank); the cost model's predictions with a wire are in test_wire.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/test_data.h"
#include "common/tunable_override.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using testing::Tunables;

double unitRoundoff(WireFormat f) { return f == WireFormat::kFp16 ? 0x1p-11 : 0x1p-8; }

// Uniform in [-1, 1), element `i` of `rank`'s input.
float inputOf(int rank, std::size_t i) {
  return static_cast<float>(static_cast<double>(testing::mix(17, static_cast<std::uint64_t>(rank), i) >> 11) * 0x1p-52 -
                            1.0);
}

std::vector<float> inputs(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = inputOf(rank, i);
  return v;
}

std::string describe(const std::string& algorithm, WireFormat wire, int size, std::size_t count) {
  return algorithm + " " + std::string(toString(wire)) + " size " + std::to_string(size) + " count " +
         std::to_string(count);
}

// reduce_scatter of `count` elements per rank; checks every rank's block.
void runReduceScatter(int size, std::size_t count, const std::string& algorithm, WireFormat wire, ReduceOp op,
                      int roundings) {
  const std::string what = describe(algorithm, wire, size, count);
  std::vector<std::vector<float>> results(static_cast<std::size_t>(size));
  std::vector<WireFormat> ran(static_cast<std::size_t>(size));
  detail::runInProcess(size, [&](Communicator& comm) {
    const auto me = static_cast<std::size_t>(comm.rank());
    const std::vector<float> in = inputs(comm.rank(), count * static_cast<std::size_t>(size));
    std::vector<float> out(count, -7.0f);
    CallOptions options;
    options.algorithm = algorithm;
    options.wire = wire;
    Work w = comm.reduceScatterAsync(std::span<const float>(in), std::span<float>(out), op, options);
    ran[me] = w.wireFormat();
    w.wait();
    results[me] = out;
  });
  if (size > 1 && count > 0) {
    EXPECT_EQ(ran[0], wire) << what;
  }
  const double u = unitRoundoff(wire);
  std::size_t rounded = 0;  // elements off by more than float32 sums can be: the wire rounded them
  for (int r = 0; r < size; ++r) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t global = static_cast<std::size_t>(r) * count + i;
      double ref = 0, sumAbs = 0;
      for (int q = 0; q < size; ++q) {
        ref += inputOf(q, global);
        sumAbs += std::fabs(inputOf(q, global));
      }
      if (op == ReduceOp::kAvg) {
        ref /= size;
        sumAbs /= size;
      }
      const double err = std::fabs(results[static_cast<std::size_t>(r)][i] - ref);
      const double bound = (roundings * u + (size + 1) * 0x1p-24) * sumAbs * (1 + 1e-6) + 1e-30;
      ASSERT_LE(err, bound) << what << ": rank " << r << " element " << i;
      if (err > (size + 1) * 0x1p-24 * sumAbs) ++rounded;
    }
  }
  // A builder that ignored the wire would pass the bound: it must show.
  if (size > 1 && count >= 1000) {
    EXPECT_GT(rounded, count / 4) << what << ": the results look uncompressed";
  }
}

// allgather of `count` elements per rank (allgatherv with `counts` when not
// empty); checks bitwise agreement and one rounding per value.
void runAllgather(int size, std::size_t count, const std::string& algorithm, WireFormat wire, bool inPlace,
                  std::vector<std::size_t> counts = {}) {
  const std::string what = describe(algorithm, wire, size, count) + (inPlace ? " in place" : "");
  if (counts.empty()) counts.assign(static_cast<std::size_t>(size), count);
  std::vector<std::size_t> offsets(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
  const std::size_t total = offsets.back();
  std::vector<std::vector<float>> results(static_cast<std::size_t>(size));
  std::vector<WireFormat> ran(static_cast<std::size_t>(size));
  const bool varying = std::any_of(counts.begin(), counts.end(), [&](std::size_t c) { return c != counts[0]; });
  detail::runInProcess(size, [&](Communicator& comm) {
    const auto me = static_cast<std::size_t>(comm.rank());
    const std::vector<float> mine = inputs(comm.rank(), counts[me]);
    std::vector<float> out(total, -7.0f);
    if (inPlace) std::copy(mine.begin(), mine.end(), out.begin() + static_cast<std::ptrdiff_t>(offsets[me]));
    std::span<const float> send =
        inPlace ? std::span<const float>(out).subspan(offsets[me], counts[me]) : std::span<const float>(mine);
    CallOptions options;
    options.algorithm = algorithm;
    options.wire = wire;
    Work w = varying ? comm.allgathervAsync(send, std::span<float>(out), counts, options)
                     : comm.allgatherAsync(send, std::span<float>(out), options);
    ran[me] = w.wireFormat();
    w.wait();
    results[me] = out;
  });
  if (size > 1 && total > 0) {
    EXPECT_EQ(ran[0], wire) << what;
  }
  for (int r = 1; r < size && total > 0; ++r) {
    ASSERT_EQ(std::memcmp(results[0].data(), results[static_cast<std::size_t>(r)].data(), total * sizeof(float)), 0)
        << what << ": rank " << r << " differs from rank 0";
  }
  // One rounding: u of the value; fp16 also its scaled subnormal floor,
  // 2^-25 * 2^-k <= 2^-39 * (the message's largest magnitude, <= 1 here).
  const double u = unitRoundoff(wire);
  std::size_t rounded = 0;
  for (int r = 0; r < size; ++r) {
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i) {
      const double x = inputOf(r, i);
      const double err = std::fabs(results[0][offsets[static_cast<std::size_t>(r)] + i] - x);
      ASSERT_LE(err, u * std::fabs(x) + 0x1p-39) << what << ": block " << r << " element " << i;
      if (err > 0) ++rounded;
    }
  }
  // Random float32 inputs are almost never 16-bit values: rounding must show.
  if (size > 1 && total >= 1000) {
    EXPECT_GT(rounded, total / 2) << what << ": the values look uncompressed";
  }
}

TEST(WireReduceScatter, RingWithinTheBound) {
  for (int size : {1, 2, 3, 4, 5, 7}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{16411}}) {
      for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
        runReduceScatter(size, count, "ring", wire, ReduceOp::kSum, size - 1);
      }
    }
  }
  runReduceScatter(3, 4099, "ring", WireFormat::kBf16, ReduceOp::kAvg, 2);
}

TEST(WireAllgather, RingBitwiseIdenticalEachValueRoundedOnce) {
  for (int size : {1, 2, 3, 5, 8}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{16411}}) {
      for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
        runAllgather(size, count, "ring", wire, /*inPlace=*/false);
      }
    }
  }
  runAllgather(3, 4099, "ring", WireFormat::kFp16, /*inPlace=*/true);
  runAllgather(4, 0, "ring", WireFormat::kBf16, /*inPlace=*/false, {5, 0, 10007, 3});
}

class WireHierGatherScatter : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(WireHierGatherScatter, InterNodePhaseCompresses) {
  const Tunables layout{{core::kTunableNodeLayout, GetParam().first}, {core::kTunableRingChunkBytes, "16384"}};
  const int size = GetParam().second;
  const int nodes = static_cast<int>(std::count(GetParam().first.begin(), GetParam().first.end(), ',')) + 1;
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{40009}}) {
    for (WireFormat wire : {WireFormat::kBf16, WireFormat::kFp16}) {
      runReduceScatter(size, count, "hier", wire, ReduceOp::kSum, nodes - 1);
      runAllgather(size, count, "hier", wire, /*inPlace=*/false);
    }
  }
  runReduceScatter(size, 3001, "hier", WireFormat::kBf16, ReduceOp::kAvg, nodes - 1);
  runAllgather(size, 3001, "hier", WireFormat::kBf16, /*inPlace=*/true);
  std::vector<std::size_t> varying(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) varying[static_cast<std::size_t>(r)] = r == 1 ? 0 : 1000 + 997 * static_cast<std::size_t>(r);
  runAllgather(size, 0, "hier", WireFormat::kFp16, /*inPlace=*/false, varying);
}

INSTANTIATE_TEST_SUITE_P(Layouts, WireHierGatherScatter,
                         ::testing::Values(std::make_pair(std::string("2,2"), 4), std::make_pair(std::string("3,3"), 6),
                                           std::make_pair(std::string("2,2,2"), 6)),
                         [](const auto& info) { return "n" + std::to_string(info.param.second) + "_" +
                                                       std::to_string(info.index); });

// Segment lists (allgatherMany / reduceScatterMany) under the communicator's
// format: chunks straddle tensors, and the results still agree.
TEST(WireGatherScatter, SegmentListsFollowTheCommunicatorSetting) {
  const Tunables layout{{core::kTunableNodeLayout, "2,2"}};
  std::vector<std::vector<float>> gathered(4);
  std::vector<WireFormat> ran(4);
  detail::runInProcess(4, [&](Communicator& comm) {
    comm.setWireFormat(WireFormat::kFp16);
    std::vector<float> a = inputs(comm.rank(), 1001), b = inputs(comm.rank() + 10, 3);
    std::vector<float> ga(4 * a.size()), gb(4 * b.size());
    const ConstView send[2] = {ConstView(std::span<const float>(a)), ConstView(std::span<const float>(b))};
    const View recv[2] = {View(std::span<float>(ga)), View(std::span<float>(gb))};
    CallOptions options;
    options.algorithm = "hier";
    Work w = comm.allgatherManyAsync(send, recv, options);
    ran[static_cast<std::size_t>(comm.rank())] = w.wireFormat();
    w.wait();
    ga.insert(ga.end(), gb.begin(), gb.end());
    gathered[static_cast<std::size_t>(comm.rank())] = ga;
  });
  EXPECT_EQ(ran, std::vector<WireFormat>(4, WireFormat::kFp16));
  for (int r = 1; r < 4; ++r) EXPECT_EQ(gathered[0], gathered[static_cast<std::size_t>(r)]) << "rank " << r;
  for (int r = 0; r < 4; ++r) {
    for (std::size_t i = 0; i < 1001; ++i) {
      const double x = inputOf(r, i);
      ASSERT_LE(std::fabs(gathered[0][static_cast<std::size_t>(r) * 1001 + i] - x), 0x1p-11 * std::fabs(x) + 0x1p-39);
    }
    for (std::size_t i = 0; i < 3; ++i) {  // b's blocks follow a's 4 x 1001
      const double x = inputOf(r + 10, i);
      ASSERT_LE(std::fabs(gathered[0][4 * 1001 + static_cast<std::size_t>(r) * 3 + i] - x),
                0x1p-11 * std::fabs(x) + 0x1p-39);
    }
  }
}

TEST(WireGatherScatter, ReduceScatterManyFollowsTheCommunicatorSetting) {
  const Tunables layout{{core::kTunableNodeLayout, "2,2"}};
  std::vector<std::vector<float>> blocks(4);
  std::vector<WireFormat> ran(4);
  detail::runInProcess(4, [&](Communicator& comm) {
    comm.setWireFormat(WireFormat::kBf16);
    const std::vector<float> a = inputs(comm.rank(), 4 * 2003), b = inputs(comm.rank() + 10, 4 * 5);
    std::vector<float> ra(2003), rb(5);
    const ConstView send[2] = {ConstView(std::span<const float>(a)), ConstView(std::span<const float>(b))};
    const View recv[2] = {View(std::span<float>(ra)), View(std::span<float>(rb))};
    CallOptions options;
    options.algorithm = "hier";
    Work w = comm.reduceScatterManyAsync(send, recv, ReduceOp::kSum, options);
    ran[static_cast<std::size_t>(comm.rank())] = w.wireFormat();
    w.wait();
    ra.insert(ra.end(), rb.begin(), rb.end());
    blocks[static_cast<std::size_t>(comm.rank())] = ra;
  });
  EXPECT_EQ(ran, std::vector<WireFormat>(4, WireFormat::kBf16));
  std::size_t rounded = 0;
  for (int r = 0; r < 4; ++r) {
    for (std::size_t i = 0; i < 2003 + 5; ++i) {
      const bool inA = i < 2003;
      const std::size_t at = static_cast<std::size_t>(r) * (inA ? 2003 : 5) + (inA ? i : i - 2003);
      double ref = 0, sumAbs = 0;
      for (int q = 0; q < 4; ++q) {
        const double x = inputOf(inA ? q : q + 10, at);
        ref += x;
        sumAbs += std::fabs(x);
      }
      const double err = std::fabs(blocks[static_cast<std::size_t>(r)][i] - ref);
      ASSERT_LE(err, (0x1p-8 + 5 * 0x1p-24) * sumAbs * (1 + 1e-6)) << "rank " << r << " element " << i;  // 2 nodes: 1 rounding
      if (err > 5 * 0x1p-24 * sumAbs) ++rounded;
    }
  }
  EXPECT_GT(rounded, std::size_t{1000});
}

TEST(WireGatherScatter, OtherPayloadsPassThroughAndBadRequestsFailOnEveryRank) {
  std::vector<int> failures(3, 0);
  detail::runInProcess(3, [&](Communicator& comm) {
    comm.setWireFormat(WireFormat::kBf16);
    // float64 moves exactly under a bf16 communicator setting.
    std::vector<double> d(777), all(3 * 777);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = 1.0 + 1e-13 * static_cast<double>(i + 1000 * comm.rank());
    CallOptions ring;
    ring.algorithm = "ring";
    Work w = comm.allgatherAsync(std::span<const double>(d), std::span<double>(all), ring);
    EXPECT_EQ(w.wireFormat(), WireFormat::kOff);
    w.wait();
    for (std::size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], 1.0 + 1e-13 * static_cast<double>(i % 777 + 1000 * (i / 777))) << i;
    }
    // Explicit formats that cannot be honoured name the reason.
    std::vector<float> x(30, 1.0f), y(10);
    CallOptions native;
    native.algorithm = "native";
    native.wire = WireFormat::kFp16;
    try {
      comm.reduceScatter(std::span<const float>(x), std::span<float>(y), ReduceOp::kSum, native);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("'native', which cannot carry it (ring, hier can)"), std::string::npos)
          << e.what();
      ++failures[static_cast<std::size_t>(comm.rank())];
    }
    std::vector<std::int32_t> n(10, 1), gathered(30);
    CallOptions bad;
    bad.wire = WireFormat::kBf16;
    try {
      comm.allgather(std::span<const std::int32_t>(n), std::span<std::int32_t>(gathered), bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("applies to float32 allreduce, allgather and reduce_scatter only"),
                std::string::npos)
          << e.what();
      ++failures[static_cast<std::size_t>(comm.rank())];
    }
  });
  EXPECT_EQ(failures, std::vector<int>({2, 2, 2}));
}

}  // namespace
}  // namespace boostcomm
