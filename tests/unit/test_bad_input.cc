// Invalid calls must fail fast with the right Error category and a message
// naming the argument and the rank (ctest label `unit`).
//
// Most checks call one rank (rank 2 of an in-process group of 3) alone: input
// validation is local, so a correct library throws before communicating. The
// calls carry a 5 s deadline so a missing check shows up as a kTimeout
// failure instead of a hung test.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/error.h"
#include "testing/inproc_group.h"

namespace boostcomm {
namespace {

using std::chrono::milliseconds;

constexpr int kWorldSize = 3;
constexpr int kRank = 2;  // the rank that makes the bad call
constexpr std::size_t kHuge = std::size_t{1} << 63;

CallOptions guarded(std::string algorithm = {}) {
  CallOptions options;
  options.algorithm = std::move(algorithm);
  options.timeout = milliseconds(5000);
  return options;
}

// Runs call, expecting Error{category} raised by `rank` whose message
// contains "rank <rank>" and every string of `mentions`.
void expectError(const std::function<void()>& call, ErrorCategory category, int rank,
                 const std::vector<std::string>& mentions) {
  try {
    call();
    ADD_FAILURE() << "expected Error{" << toString(category) << "}, but the call succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.category(), category) << "category is " << toString(e.category()) << ": " << what;
    EXPECT_EQ(e.rank(), rank) << what;
    EXPECT_NE(what.find("rank " + std::to_string(rank)), std::string::npos) << "message should name the rank: " << what;
    for (const auto& word : mentions) {
      EXPECT_NE(what.find(word), std::string::npos) << "message should mention '" << word << "': " << what;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected boostcomm::Error, got another exception: " << e.what();
  }
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { group_ = detail::createInProcessGroup(kWorldSize); }
  Communicator& comm() { return *group_[kRank]; }
  void expectInvalid(const std::function<void()>& call, const std::vector<std::string>& mentions) {
    expectError(call, ErrorCategory::kInvalidArgument, kRank, mentions);
  }

  std::vector<std::shared_ptr<Communicator>> group_;
  std::vector<float> a_ = std::vector<float>(64, 1.0f);
  std::vector<float> b_ = std::vector<float>(64, 0.0f);
  std::vector<std::int32_t> i_ = std::vector<std::int32_t>(64, 1);
};

TEST_F(BadInputTest, NullDataWithNonZeroCount) {
  expectInvalid([&] { comm().allreduce(ConstView(nullptr, 4, DataType::kFloat32), View(b_.data(), 4, DataType::kFloat32),
                                       ReduceOp::kSum, guarded()); }, {"send"});
  expectInvalid([&] { comm().allreduce(ConstView(a_.data(), 4, DataType::kFloat32), View(nullptr, 4, DataType::kFloat32),
                                       ReduceOp::kSum, guarded()); }, {"recv"});
  expectInvalid([&] { comm().broadcast(View(nullptr, 4, DataType::kFloat32), 0, guarded()); }, {"buffer"});
  expectInvalid([&] { comm().allgather(ConstView(nullptr, 4, DataType::kFloat32), View(b_.data(), 12, DataType::kFloat32),
                                       guarded()); }, {"send"});
  expectInvalid([&] { comm().allgather(ConstView(a_.data(), 4, DataType::kFloat32), View(nullptr, 12, DataType::kFloat32),
                                       guarded()); }, {"recv"});
  expectInvalid([&] { comm().reduceScatter(ConstView(nullptr, 12, DataType::kFloat32), View(b_.data(), 4, DataType::kFloat32),
                                           ReduceOp::kSum, guarded()); }, {"send"});
  expectInvalid([&] { comm().allreduceAsync(ConstView(nullptr, 4, DataType::kFloat32), View(b_.data(), 4, DataType::kFloat32),
                                            ReduceOp::kSum, guarded()).wait(milliseconds(5000)); }, {"send"});
}

// Null pointers are fine when there is nothing to read or write.
TEST(BadInputGroup, NullDataWithZeroCountIsAccepted) {
  detail::runInProcess(kWorldSize, [](Communicator& comm) {
    comm.allreduce(ConstView(nullptr, 0, DataType::kFloat32), View(nullptr, 0, DataType::kFloat32), ReduceOp::kSum);
    comm.allgather(ConstView(nullptr, 0, DataType::kInt32), View(nullptr, 0, DataType::kInt32));
    comm.broadcast(View(nullptr, 0, DataType::kUInt8), 1);
    comm.reduceScatter(ConstView(nullptr, 0, DataType::kFloat64), View(nullptr, 0, DataType::kFloat64), ReduceOp::kMax);
  });
}

TEST_F(BadInputTest, CountMismatch) {
  expectInvalid([&] { comm().allreduce(ConstView(a_.data(), 4, DataType::kFloat32), View(b_.data(), 5, DataType::kFloat32),
                                       ReduceOp::kSum, guarded()); }, {"count"});
  // allgather recv must hold size * send.count elements.
  expectInvalid([&] { comm().allgather(ConstView(a_.data(), 4, DataType::kFloat32), View(b_.data(), 8, DataType::kFloat32),
                                       guarded()); }, {"count"});
  // reduce_scatter send must hold size * recv.count elements.
  expectInvalid([&] { comm().reduceScatter(ConstView(a_.data(), 8, DataType::kFloat32), View(b_.data(), 4, DataType::kFloat32),
                                           ReduceOp::kSum, guarded()); }, {"count"});
}

TEST_F(BadInputTest, DtypeMismatchBetweenSendAndRecv) {
  expectInvalid([&] { comm().allreduce(ConstView(a_.data(), 4, DataType::kFloat32), View(i_.data(), 4, DataType::kInt32),
                                       ReduceOp::kSum, guarded()); }, {"dtype"});
  expectInvalid([&] { comm().allgather(ConstView(a_.data(), 4, DataType::kFloat32), View(i_.data(), 12, DataType::kInt32),
                                       guarded()); }, {"dtype"});
  expectInvalid([&] { comm().reduceScatter(ConstView(a_.data(), 12, DataType::kFloat32), View(i_.data(), 4, DataType::kInt32),
                                           ReduceOp::kSum, guarded()); }, {"dtype"});
}

TEST_F(BadInputTest, OpTheDtypeCannotTake) {
  for (DataType dtype : {DataType::kInt32, DataType::kInt64, DataType::kUInt8}) {
    SCOPED_TRACE(std::string(toString(dtype)));
    expectInvalid([&] { comm().allreduce(ConstView(i_.data(), 4, dtype), View(b_.data(), 4, dtype), ReduceOp::kAvg, guarded()); },
                  {"avg", std::string(toString(dtype))});
    expectInvalid([&] { comm().reduceScatter(ConstView(i_.data(), 12, dtype), View(b_.data(), 4, dtype), ReduceOp::kAvg,
                                             guarded()); }, {"avg", std::string(toString(dtype))});
  }
}

TEST_F(BadInputTest, RootOutOfRange) {
  for (int root : {-1, kWorldSize, 1000}) {
    SCOPED_TRACE("root=" + std::to_string(root));
    expectInvalid([&] { comm().broadcast(View(a_.data(), 4, DataType::kFloat32), root, guarded()); }, {"root"});
  }
}

// count * element size (or size * count) must not silently wrap around.
TEST_F(BadInputTest, CountOverflow) {
  const std::size_t tooMany = std::numeric_limits<std::size_t>::max() / 2;  // * 4 bytes overflows
  expectInvalid([&] { comm().allreduce(ConstView(a_.data(), tooMany, DataType::kFloat32),
                                       View(b_.data(), tooMany, DataType::kFloat32), ReduceOp::kSum, guarded()); }, {"count"});
  expectInvalid([&] { comm().broadcast(View(a_.data(), tooMany, DataType::kFloat64), 0, guarded()); }, {"count"});
  // 3 * 2^63 wraps to 2^63: a check "recv.count == size * send.count" done
  // in size_t would pass.
  expectInvalid([&] { comm().allgather(ConstView(a_.data(), kHuge, DataType::kUInt8), View(b_.data(), kHuge, DataType::kUInt8),
                                       guarded()); }, {"count"});
  expectInvalid([&] { comm().reduceScatter(ConstView(a_.data(), kHuge, DataType::kUInt8),
                                           View(b_.data(), kHuge, DataType::kUInt8), ReduceOp::kSum, guarded()); }, {"count"});
}

TEST_F(BadInputTest, PartialAliasing) {
  float* base = b_.data();
  expectInvalid([&] { comm().allreduce(ConstView(base, 8, DataType::kFloat32), View(base + 1, 8, DataType::kFloat32),
                                       ReduceOp::kSum, guarded()); }, {"send", "recv"});
  expectInvalid([&] { comm().allreduce(ConstView(base + 3, 8, DataType::kFloat32), View(base, 8, DataType::kFloat32),
                                       ReduceOp::kSum, guarded()); }, {"send", "recv"});
  // allgather in place means send == recv + rank * count exactly; off by one element is partial.
  expectInvalid([&] { comm().allgather(ConstView(base + 2 * 4 + 1, 4, DataType::kFloat32), View(base, 12, DataType::kFloat32),
                                       guarded()); }, {"send", "recv"});
  expectInvalid([&] { comm().allgather(ConstView(base, 4, DataType::kFloat32), View(base, 12, DataType::kFloat32),
                                       guarded()); }, {"send", "recv"});  // rank 2's in-place slot is base + 8
  expectInvalid([&] { comm().reduceScatter(ConstView(base, 12, DataType::kFloat32), View(base + 2, 4, DataType::kFloat32),
                                           ReduceOp::kSum, guarded()); }, {"send", "recv"});
}

TEST_F(BadInputTest, AllgathervCounts) {
  const std::vector<std::size_t> wrongLength{4, 4};
  expectInvalid([&] { comm().allgatherv(ConstView(a_.data(), 4, DataType::kFloat32), View(b_.data(), 8, DataType::kFloat32),
                                        wrongLength, guarded()); }, {"recvCounts"});
  const std::vector<std::size_t> counts{1, 2, 4};
  expectInvalid([&] { comm().allgatherv(ConstView(a_.data(), 4, DataType::kFloat32), View(b_.data(), 8, DataType::kFloat32),
                                        counts, guarded()); }, {"recv"});  // sum 7 != recv.count 8
  expectInvalid([&] { comm().allgatherv(ConstView(a_.data(), 3, DataType::kFloat32), View(b_.data(), 7, DataType::kFloat32),
                                        counts, guarded()); }, {"send"});  // recvCounts[2] = 4 != send.count 3
  const std::vector<std::size_t> overflowing{kHuge, kHuge, 4};  // sums to 4 in size_t
  expectInvalid([&] { comm().allgatherv(ConstView(a_.data(), 4, DataType::kUInt8), View(b_.data(), 4, DataType::kUInt8),
                                        overflowing, guarded()); }, {"recvCounts"});
}

TEST_F(BadInputTest, UnknownAlgorithmListsValidOnes) {
  for (Collective coll : {Collective::kAllreduce, Collective::kBroadcast}) {
    SCOPED_TRACE(std::string(toString(coll)));
    std::vector<std::string> mentions{"no_such_algo"};
    for (const auto& name : comm().algorithms(coll)) mentions.push_back(name);
    if (coll == Collective::kAllreduce) {
      expectInvalid([&] { comm().allreduce(ConstView(a_.data(), 4, DataType::kFloat32), View(b_.data(), 4, DataType::kFloat32),
                                           ReduceOp::kSum, guarded("no_such_algo")); }, mentions);
    } else {
      expectInvalid([&] { comm().broadcast(View(a_.data(), 4, DataType::kFloat32), 0, guarded("no_such_algo")); }, mentions);
    }
  }
}

// An algorithm that exists but cannot run at this world size (e.g. one that
// needs a power of two) is rejected up front on every rank, naming it, and
// is not listed by algorithms() there. Every registered name is tried on
// every rank of groups of 3, 5 and 6.
TEST(BadInputGroup, AlgorithmNotApplicable) {
  int rejected = 0;
  for (Collective coll : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast,
                          Collective::kReduceScatter, Collective::kBarrier}) {
    std::vector<std::string> known;
    for (int ws : {2, 3, 4, 5, 6, 8}) {
      auto group = detail::createInProcessGroup(ws);
      for (const auto& name : group[0]->algorithms(coll)) {
        if (std::find(known.begin(), known.end(), name) == known.end()) known.push_back(name);
      }
    }
    for (int ws : {3, 5, 6}) {
      const auto listed = detail::createInProcessGroup(ws)[0]->algorithms(coll);
      for (const auto& name : known) {
        const std::string where = std::string(toString(coll)) + " algo=" + name + " ws=" + std::to_string(ws);
        SCOPED_TRACE(where);
        std::vector<int> threw(static_cast<std::size_t>(ws), 0);
        detail::runInProcess(ws, [&](Communicator& comm) {
          std::vector<float> a(64, 1.0f), b(64);
          try {
            switch (coll) {
              case Collective::kAllreduce:
                comm.allreduce(ConstView(a.data(), 4, DataType::kFloat32), View(b.data(), 4, DataType::kFloat32),
                               ReduceOp::kSum, guarded(name));
                break;
              case Collective::kAllgather:
                comm.allgather(ConstView(a.data(), 2, DataType::kFloat32), View(b.data(), 2 * ws, DataType::kFloat32),
                               guarded(name));
                break;
              case Collective::kBroadcast: comm.broadcast(View(a.data(), 4, DataType::kFloat32), 0, guarded(name)); break;
              case Collective::kReduceScatter:
                comm.reduceScatter(ConstView(a.data(), 2 * ws, DataType::kFloat32), View(b.data(), 2, DataType::kFloat32),
                                   ReduceOp::kSum, guarded(name));
                break;
              case Collective::kBarrier: comm.barrier(guarded(name)); break;
            }
          } catch (const Error& e) {
            threw[static_cast<std::size_t>(comm.rank())] = 1;
            const std::string what = e.what();
            EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument) << what;
            EXPECT_NE(what.find(name), std::string::npos) << "message should name the algorithm: " << what;
            EXPECT_NE(what.find("rank " + std::to_string(comm.rank())), std::string::npos) << what;
          }
        });
        const int throwers = static_cast<int>(std::count(threw.begin(), threw.end(), 1));
        if (throwers == 0) continue;  // runnable here
        ++rejected;
        EXPECT_EQ(throwers, ws) << "only some ranks rejected it";
        EXPECT_FALSE(std::find(listed.begin(), listed.end(), name) != listed.end())
            << "algorithms() lists '" << name << "' at ws=" << ws << " but a call with it is rejected";
      }
    }
  }
  if (rejected == 0) GTEST_SKIP() << "every algorithm runs at every world size tried";
}

TEST(BadInputGroup, UseAfterFinalize) {
  detail::runInProcess(kWorldSize, [](Communicator& comm) {
    comm.finalize();
    EXPECT_TRUE(comm.finalized());
    std::vector<float> a(4, 1.0f), b(4);
    const int rank = comm.rank();
    expectError([&] { comm.allreduce(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum); },
                ErrorCategory::kFinalized, rank, {});
    expectError([&] { comm.broadcast(std::span<float>(b), 0); }, ErrorCategory::kFinalized, rank, {});
    expectError([&] { comm.barrier(); }, ErrorCategory::kFinalized, rank, {});
    expectError([&] { comm.allgatherAsync(std::span<const float>(a), std::span<float>(b)).wait(); },
                ErrorCategory::kFinalized, rank, {});
  });
}

// Only ranks 0 and 1 of 3 call: the wait must end with kTimeout, not hang.
TEST(BadInputGroup, WaitTimesOutWhenARankNeverJoins) {
  auto group = detail::createInProcessGroup(kWorldSize);
  std::vector<float> a0(1000, 1.0f), b0(1000), a1(1000, 1.0f), b1(1000);
  Work w0 = group[0]->allreduceAsync(std::span<const float>(a0), std::span<float>(b0), ReduceOp::kSum);
  Work w1 = group[1]->allreduceAsync(std::span<const float>(a1), std::span<float>(b1), ReduceOp::kSum);
  const auto start = std::chrono::steady_clock::now();
  expectError([&] { w0.wait(milliseconds(200)); }, ErrorCategory::kTimeout, 0, {});
  expectError([&] { w1.wait(milliseconds(200)); }, ErrorCategory::kTimeout, 1, {});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(10)) << "the 200 ms deadlines took far too long";
  EXPECT_GE(elapsed, milliseconds(300)) << "two 200 ms waits returned too early";
}

TEST(BadInputGroup, BlockingCallTimesOutWhenARankNeverJoins) {
  auto group = detail::createInProcessGroup(kWorldSize);
  std::vector<float> a(16, 1.0f), b(16);
  CallOptions options;
  options.timeout = milliseconds(200);
  expectError([&] { group[2]->allreduce(std::span<const float>(a), std::span<float>(b), ReduceOp::kSum, options); },
              ErrorCategory::kTimeout, 2, {});
  auto other = detail::createInProcessGroup(kWorldSize);
  expectError([&] { other[1]->barrier(options); }, ErrorCategory::kTimeout, 1, {});
}

}  // namespace
}  // namespace boostcomm
