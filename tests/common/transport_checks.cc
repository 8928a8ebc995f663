#include "common/transport_checks.h"

#include <chrono>
#include <thread>
#include <vector>

#include "common/test_data.h"

namespace boostcomm::testing {

void waitFor(transport::Transport& t, transport::Request& req) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!t.test(req)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "request never completed";
    std::this_thread::yield();
  }
  EXPECT_EQ(req.slot[0], 0u);
  EXPECT_EQ(req.slot[1], 0u);
}

void checkNativeReductions(transport::Transport& t, DataType dtype, ReduceOp op, std::size_t count,
                           std::uint64_t seed, bool nonBlocking, bool inPlace, bool expectPending) {
  using transport::Request;
  const int n = t.size();
  const int me = t.rank();
  const std::size_t elemBytes = dataTypeSize(dtype);
  // allreduce
  std::vector<unsigned char> send(count * elemBytes);
  std::vector<unsigned char> recv(count * elemBytes);
  fillReduceInput(send.data(), dtype, op, Pattern::kExact, seed, me, 0, count);
  if (inPlace) recv = send;
  const void* src = inPlace ? recv.data() : send.data();
  runNative(
      t, nonBlocking, [&](Request* r) { t.nativeAllreduce(src, recv.data(), count, dtype, op, r); }, expectPending);
  EXPECT_EQ(checkReduction(recv.data(), dtype, op, Pattern::kExact, seed, n, 0, count), "") << "allreduce";

  // reduce-scatter: block r of the reduced size()*count elements lands on rank r
  std::vector<unsigned char> rsSend(n * count * elemBytes);
  fillReduceInput(rsSend.data(), dtype, op, Pattern::kExact, seed, me, 0, n * count);
  std::vector<unsigned char> rsRecv(count * elemBytes);
  void* rsOut = inPlace ? rsSend.data() : rsRecv.data();
  runNative(
      t, nonBlocking, [&](Request* r) { t.nativeReduceScatter(rsSend.data(), rsOut, count, dtype, op, r); },
      expectPending);
  EXPECT_EQ(checkReduction(rsOut, dtype, op, Pattern::kExact, seed, n, me * count, count), "") << "reduce_scatter";
}

}  // namespace boostcomm::testing
