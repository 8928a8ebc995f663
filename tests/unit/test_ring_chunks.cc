// Ring algorithms with many chunks per segment and segments of unequal length
// (count not divisible by the rank count): chunk c of different segments must
// never share scratch (regression: slots were laid out by offset within the
// segment, so chunk regions of unequal segments overlapped under pipelining).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "core/tunables.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

double input(int rank, std::size_t i) { return static_cast<double>((rank + 3) * static_cast<int>(i % 29) - 40); }

TEST(RingChunks, UnequalSegmentsManyChunks) {
  core::setTunableOverride(core::kTunableRingChunkBytes, "1000");  // chunks of 250 floats
  for (int n : {2, 3, 5, 7}) {
    for (std::size_t count : {std::size_t{10007}, std::size_t{65539}}) {
      for (const char* algo : {"ring", "rhd"}) {
        std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
        detail::runInProcess(n, [&](Communicator& comm) {
          std::vector<float> v(count);
          for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(input(comm.rank(), i));
          CallOptions options;
          options.algorithm = algo;
          for (int round = 0; round < 3; ++round) {  // reuse: cached schedule, pooled scratch
            std::vector<float> r(count);
            comm.allreduce(std::span<const float>(v), std::span<float>(r), ReduceOp::kSum, options);
            out[static_cast<std::size_t>(comm.rank())] = r;
          }
        });
        for (std::size_t i = 0; i < count; ++i) {
          double want = 0;
          for (int r = 0; r < n; ++r) want += input(r, i);
          ASSERT_EQ(out[0][i], static_cast<float>(want)) << algo << " n=" << n << " count=" << count << " i=" << i;
        }
        for (int r = 1; r < n; ++r) {
          ASSERT_EQ(std::memcmp(out[0].data(), out[static_cast<std::size_t>(r)].data(), count * sizeof(float)), 0);
        }
      }
    }
  }
  core::clearTunableOverride(core::kTunableRingChunkBytes);
}

TEST(RingChunks, ReduceScatterAndAllgathervManyChunks) {
  core::setTunableOverride(core::kTunableRingChunkBytes, "1000");
  for (int n : {3, 5}) {
    detail::runInProcess(n, [&](Communicator& comm) {
      const std::size_t block = 4099;
      std::vector<std::int32_t> in(block * static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::int32_t>(input(comm.rank(), i));
      std::vector<std::int32_t> mine(block);
      CallOptions options;
      options.algorithm = "ring";
      comm.reduceScatter(std::span<const std::int32_t>(in), std::span<std::int32_t>(mine), ReduceOp::kSum, options);
      for (std::size_t i = 0; i < block; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += input(r, static_cast<std::size_t>(comm.rank()) * block + i);
        ASSERT_EQ(mine[i], static_cast<std::int32_t>(want)) << "reduce_scatter n=" << n << " i=" << i;
      }
      std::vector<std::size_t> counts;
      std::size_t total = 0;
      for (int r = 0; r < n; ++r) {
        counts.push_back(3001 + 977 * static_cast<std::size_t>(r));
        total += counts.back();
      }
      std::vector<std::int32_t> part(counts[static_cast<std::size_t>(comm.rank())], comm.rank() + 1);
      std::vector<std::int32_t> all(total, -1);
      comm.allgatherv(std::span<const std::int32_t>(part), std::span<std::int32_t>(all), counts, options);
      std::size_t offset = 0;
      for (int r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i) ASSERT_EQ(all[offset + i], r + 1);
        offset += counts[static_cast<std::size_t>(r)];
      }
    });
  }
  core::clearTunableOverride(core::kTunableRingChunkBytes);
}

}  // namespace
}  // namespace boostcomm
