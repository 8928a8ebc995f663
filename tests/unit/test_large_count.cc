// Counts beyond 2^31 elements: in-place uint8 allreduce of 2^31 + 5 elements
// on two in-process ranks with the native (chunked backend calls), ring and
// rhd schedules (64-bit offsets throughout). Buffers are allocated once and
// reused: first-touch page faults cost ~10 s/GiB on these VMs. About 8 GiB at
// peak; ctest runs it alone (RUN_SERIAL, label "large").
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

constexpr std::size_t kCount = (std::size_t{1} << 31) + 5;

// Rank r holds (i * (r + 1)) mod 256; the sum over two ranks is 3 i mod 256.
void fill(std::vector<std::uint8_t>& v, int rank) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint8_t>(i * static_cast<std::size_t>(rank + 1));
}

TEST(LargeCount, Uint8SumBeyondIntRange) {
  auto group = detail::createInProcessGroup(2);
  std::vector<std::vector<std::uint8_t>> data(2);
  for (const char* algorithm : {"native", "ring", "rhd"}) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(2);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          auto& v = data[static_cast<std::size_t>(r)];
          v.resize(kCount);
          fill(v, r);
          CallOptions options;
          options.algorithm = algorithm;
          group[static_cast<std::size_t>(r)]->allreduce(ConstView(v.data(), kCount, DataType::kUInt8),
                                                        View(v.data(), kCount, DataType::kUInt8), ReduceOp::kSum,
                                                        options);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    // Every element around the 2^31 boundary and the end, a stride elsewhere.
    const std::size_t boundary = std::size_t{1} << 31;
    for (std::size_t i = 0; i < kCount; i += (i + 4096 >= boundary) ? 1 : 4093) {
      ASSERT_EQ(data[0][i], static_cast<std::uint8_t>(3 * i)) << algorithm << " element " << i;
    }
    EXPECT_EQ(std::memcmp(data[0].data(), data[1].data(), kCount), 0) << algorithm << ": ranks differ";
  }
}

}  // namespace
}  // namespace boostcomm
