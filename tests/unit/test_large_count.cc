// Counts beyond 2^31 elements: uint8 allreduce of 2^31 + 5 elements on two
// in-process ranks, for the native (chunked backend calls) and the ring and
// rhd schedules (64-bit offsets throughout). About 12 GiB at peak; ctest runs
// it alone (RUN_SERIAL, label "large").
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "api/inproc_group.h"
#include "boostcomm/boostcomm.h"

namespace boostcomm {
namespace {

constexpr std::size_t kCount = (std::size_t{1} << 31) + 5;

class LargeCount : public ::testing::TestWithParam<const char*> {};

TEST_P(LargeCount, Uint8SumBeyondIntRange) {
  auto group = detail::createInProcessGroup(2);
  std::vector<std::vector<std::uint8_t>> out(2);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        // Rank r holds (i * (r + 1)) mod 256; the sum is 3 i mod 256.
        std::vector<std::uint8_t> in(kCount);
        for (std::size_t i = 0; i < kCount; ++i) in[i] = static_cast<std::uint8_t>(i * static_cast<std::size_t>(r + 1));
        out[static_cast<std::size_t>(r)].resize(kCount);
        CallOptions options;
        options.algorithm = GetParam();
        group[static_cast<std::size_t>(r)]->allreduce(ConstView(in.data(), kCount, DataType::kUInt8),
                                                      View(out[static_cast<std::size_t>(r)].data(), kCount,
                                                           DataType::kUInt8),
                                                      ReduceOp::kSum, options);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  // Every element near the 2^31 boundary and a stride through the rest.
  for (std::size_t i = 0; i < kCount; i += (i + 4096 >= (std::size_t{1} << 31) && i < kCount) ? 1 : 4093) {
    ASSERT_EQ(out[0][i], static_cast<std::uint8_t>(3 * i)) << "element " << i;
  }
  EXPECT_EQ(out[0][kCount - 1], static_cast<std::uint8_t>(3 * (kCount - 1)));
  EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), kCount), 0) << "ranks differ";
}

INSTANTIATE_TEST_SUITE_P(Algorithms, LargeCount, ::testing::Values("native", "ring", "rhd"));

}  // namespace
}  // namespace boostcomm
