// Checks of a transport::Transport shared by the in-process and the MPI
// transport tests, so both transports face the same sweep.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

#include "boostcomm/types.h"
#include "transport/transport.h"

namespace boostcomm::testing {

// Polls until `req` completes (60 s deadline) and expects it cleared.
void waitFor(transport::Transport& t, transport::Request& req);

// Runs a native call blocking (request null) or non-blocking, then waits.
// expectPending: a non-blocking call must leave its request active (MPI).
template <typename Call>
void runNative(transport::Transport& t, bool nonBlocking, Call call, bool expectPending = false) {
  if (!nonBlocking) {
    call(nullptr);
    return;
  }
  transport::Request req;
  call(&req);
  if (expectPending) {
    EXPECT_TRUE(req.active());
  }
  waitFor(t, req);
}

// Native allreduce and reduce_scatter of one (dtype, op, count) case on this
// rank, against the exact reference of common/test_data.h.
void checkNativeReductions(transport::Transport& t, DataType dtype, ReduceOp op, std::size_t count,
                           std::uint64_t seed, bool nonBlocking, bool inPlace, bool expectPending);

}  // namespace boostcomm::testing
