// MpiTransport under mpirun: point-to-point, native collectives (float16 and
// bfloat16 through our user MPI_Ops), split, error translation. Provides its
// own main (MPI_Init_thread / MPI_Finalize belong to the application, as in a
// real program). Run: mpirun -np 2|3 --oversubscribe --bind-to none <binary>.
// BOOSTCOMM_TEST_LARGE=1 adds a 2^31+5-byte message (needs ~4.3 GiB of RAM).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "boostcomm/error.h"
#include "common/rank_printer.h"
#include "common/test_data.h"
#include "common/transport_checks.h"
#include "core/segment_list.h"
#include "core/tunables.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/mpi/mpi_types.h"

namespace boostcomm::transport {
namespace {

using boostcomm::testing::checkReduction;
using boostcomm::testing::fillBytes;
using boostcomm::testing::fillReduceInput;
using boostcomm::testing::Pattern;
using boostcomm::testing::waitFor;

std::unique_ptr<MpiTransport> g_world;

constexpr DataType kDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
                                   DataType::kInt32,   DataType::kInt64,   DataType::kUInt8};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd};

// test() must not block, so this spins; MPI progresses inside MPI_Test.
// Non-blocking native calls on MPI must leave their request pending.
template <typename Call>
void runNative(Transport& t, bool nonBlocking, Call call) {
  boostcomm::testing::runNative(t, nonBlocking, call, /*expectPending=*/true);
}

TEST(MpiTransport, WorldIsADuplicateOfCommWorld) {
  int worldRank = -1;
  int worldSize = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  EXPECT_EQ(g_world->rank(), worldRank);
  EXPECT_EQ(g_world->size(), worldSize);
  EXPECT_EQ(g_world->name(), "mpi");
  EXPECT_GE(g_world->maxTag(), 32767);
  int relation = MPI_UNEQUAL;
  MPI_Comm_compare(g_world->comm(), MPI_COMM_WORLD, &relation);
  EXPECT_EQ(relation, MPI_CONGRUENT);  // same group, separate matching space
  EXPECT_FALSE(mpiInitializedByBoostcomm());
  EXPECT_EQ(mpiThreadLevel(), MPI_THREAD_MULTIPLE);
}

TEST(MpiTransport, MessagesOnOneTagArriveInPostingOrder) {
  if (g_world->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr int kMessages = 16;
  Transport& t = *g_world;
  std::vector<std::int32_t> values(kMessages, -1);
  std::vector<Request> reqs(kMessages);
  if (t.rank() == 0) {
    for (int i = 0; i < kMessages; ++i) {
      values[i] = 1000 + i;
      t.isend(&values[i], sizeof(std::int32_t), 1, 7, reqs[i]);
    }
  } else if (t.rank() == 1) {
    for (int i = 0; i < kMessages; ++i) t.irecv(&values[i], sizeof(std::int32_t), 0, 7, reqs[i]);
  }
  for (auto& r : reqs) waitFor(t, r);
  if (t.rank() == 1) {
    for (int i = 0; i < kMessages; ++i) EXPECT_EQ(values[i], 1000 + i) << "message " << i;
  }
}

TEST(MpiTransport, RingExchangeIncludingZeroBytesAndSelf) {
  Transport& t = *g_world;
  const int n = t.size();
  const int next = (t.rank() + 1) % n;
  const int prev = (t.rank() + n - 1) % n;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
    std::vector<unsigned char> out(bytes);
    std::vector<unsigned char> in(bytes);
    std::vector<unsigned char> self(bytes);
    fillBytes(out.data(), bytes, bytes, t.rank());
    Request reqs[4];
    t.irecv(in.data(), bytes, prev, 3, reqs[0]);
    t.irecv(self.data(), bytes, t.rank(), 4, reqs[1]);
    t.isend(out.data(), bytes, next, 3, reqs[2]);
    t.isend(out.data(), bytes, t.rank(), 4, reqs[3]);
    for (auto& r : reqs) waitFor(t, r);
    std::vector<unsigned char> expected(bytes);
    fillBytes(expected.data(), bytes, bytes, prev);
    EXPECT_TRUE(in == expected) << bytes << " bytes from rank " << prev;
    EXPECT_TRUE(self == out) << bytes << " bytes to self";
  }
}

TEST(MpiTransport, NativeCollectivesEveryDtypeAndOp) {
  Transport& t = *g_world;
  const int n = t.size();
  const int me = t.rank();
  int call = 0;
  for (DataType dtype : kDataTypes) {
    const std::size_t elemBytes = dataTypeSize(dtype);
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{100}, std::size_t{10000}}) {
      for (ReduceOp op : kOps) {
        const std::uint64_t seed = 11 + std::uint64_t(call);
        const bool nonBlocking = (call++ % 2) == 1;
        const bool inPlace = (call % 3) == 0;
        SCOPED_TRACE(::testing::Message() << toString(dtype) << " " << toString(op) << " count=" << count
                                          << (nonBlocking ? " nb" : "") << (inPlace ? " in-place" : ""));
        boostcomm::testing::checkNativeReductions(t, dtype, op, count, seed, nonBlocking, inPlace,
                                                  /*expectPending=*/true);
      }
      std::vector<int> counts(n);
      std::vector<int> displs(n);
      int offset = 0;
      for (int r = 0; r < n; ++r) {
        counts[r] = static_cast<int>(count) + r;
        displs[r] = offset;
        offset += counts[r] + 1;
      }
      const bool inPlace = (call % 2) == 0;
      std::vector<unsigned char> gathered(std::size_t(offset) * elemBytes, 0xAB);
      std::vector<unsigned char> mine(static_cast<std::size_t>(counts[me]) * elemBytes);
      fillBytes(mine.data(), mine.size(), call, me);
      unsigned char* myBlock = gathered.data() + std::size_t(displs[me]) * elemBytes;
      if (inPlace) std::copy(mine.begin(), mine.end(), myBlock);
      runNative(t, !inPlace, [&](Request* r) {
        t.nativeAllgatherv(inPlace ? myBlock : mine.data(), counts[me], gathered.data(), counts.data(),
                           displs.data(), dtype, r);
      });
      for (int r = 0; r < n; ++r) {
        std::vector<unsigned char> expected(std::size_t(counts[r]) * elemBytes);
        fillBytes(expected.data(), expected.size(), call, r);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), gathered.begin() + std::size_t(displs[r]) * elemBytes))
            << toString(dtype) << " allgatherv block of rank " << r;
        EXPECT_EQ(gathered[(std::size_t(displs[r]) + counts[r]) * elemBytes], 0xAB) << "gap after rank " << r;
      }
      const int root = call % n;
      std::vector<unsigned char> buf(count * elemBytes);
      std::vector<unsigned char> expected(buf.size());
      fillBytes(expected.data(), expected.size(), call, root);
      if (me == root) buf = expected;
      runNative(t, inPlace, [&](Request* r) { t.nativeBroadcast(buf.data(), count, dtype, root, r); });
      EXPECT_TRUE(buf == expected) << toString(dtype) << " broadcast from root " << root;
      ++call;
    }
  }
  runNative(t, false, [&](Request* r) { t.nativeBarrier(r); });
  runNative(t, true, [&](Request* r) { t.nativeBarrier(r); });
}

TEST(MpiTransport, TruncatedReceiveIsATransportError) {
  if (g_world->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Transport& t = *g_world;
  std::vector<char> buf(16);
  Request req;
  if (t.rank() == 0) {
    t.isend(buf.data(), 16, 1, 5, req);
    waitFor(t, req);
  } else if (t.rank() == 1) {
    t.irecv(buf.data(), 8, 0, 5, req);
    try {
      waitFor(t, req);
      ADD_FAILURE() << "16-byte message fit an 8-byte receive";
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), ErrorCategory::kTransport);
      EXPECT_EQ(e.rank(), 1);
      EXPECT_NE(e.detail().find("MPI_Test failed"), std::string::npos) << e.what();
      EXPECT_FALSE(req.active());
    }
  }
  t.nativeBarrier(nullptr);
}

TEST(MpiTransport, LocalArgumentErrors) {
  Transport& t = *g_world;
  float x = 0;
  try {
    t.nativeAllreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kAvg, nullptr);
    ADD_FAILURE() << "kAvg accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInternal);
  }
  try {
    t.nativeReduceScatter(&x, &x, std::size_t{1} << 31, DataType::kFloat16, ReduceOp::kSum, nullptr);
    ADD_FAILURE() << "count above INT_MAX accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_EQ(e.rank(), t.rank());
  }
  Request req;
  EXPECT_THROW(t.isend(&x, 4, t.size(), 0, req), Error);
  EXPECT_THROW(t.irecv(&x, 4, 0, -1, req), Error);
  EXPECT_THROW(t.nativeBroadcast(&x, 1, DataType::kFloat32, -1, nullptr), Error);
  EXPECT_FALSE(req.active());
}

TEST(MpiTransport, SplitFormsOrderedSubgroups) {
  Transport& t = *g_world;
  const int n = t.size();
  const int me = t.rank();
  // With 3+ ranks the last one opts out; the rest split into evens and odds, in descending rank order.
  const int color = (n >= 3 && me == n - 1) ? -1 : me % 2;
  std::unique_ptr<Transport> sub = t.split(color, -me);
  if (color < 0) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r) {
    if (r % 2 == color && !(n >= 3 && r == n - 1)) members.push_back(r);
  }
  ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[sub->rank()], me);
  std::int64_t value = me;
  std::int64_t sum = -1;
  sub->nativeAllreduce(&value, &sum, 1, DataType::kInt64, ReduceOp::kSum, nullptr);
  std::int64_t expected = 0;
  for (int m : members) expected += m;
  EXPECT_EQ(sum, expected);
}

TEST(MpiTransport, SplitSharedMemory) {
  std::unique_ptr<MpiTransport> local = g_world->splitSharedMemory();
  ASSERT_NE(local, nullptr);
  std::int32_t one = 1;
  std::int32_t count = 0;
  local->nativeAllreduce(&one, &count, 1, DataType::kInt32, ReduceOp::kSum, nullptr);
  EXPECT_EQ(count, local->size());
  EXPECT_LE(local->size(), g_world->size());
}

TEST(MpiTransport, FinalizeIsLeftToTheApplication) {
  finalizeMpiIfOwned();  // the test's main initialized MPI, so this must do nothing
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
  g_world->nativeBarrier(nullptr);
}

// Once the transport knows the nodes, a message to a rank on another node
// above BOOSTCOMM_MPI_PIECE_BYTES travels as a stream of eager messages
// (mpi_transport.h): sizes around the piece boundaries arrive intact, in
// both directions at once, streams on one tag keep their posting order, a
// split (hier's inter-node level) streams too, and a message sent whole
// matches one received into scattered pieces (hier's list calls). On one
// node the same calls go whole. Under the emulated cluster
// (emucluster.mpi_transport.np4, BC_TEST_EXPECT_NODES=2) the ranks are on
// two nodes.
TEST(MpiTransport, MessagesToOtherNodesAsEagerPieces) {
  if (g_world->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::vector<long long> nodes = g_world->nodeIdOfEachRank();
  ASSERT_EQ(nodes.size(), static_cast<std::size_t>(g_world->size()));
  if (const char* expect = std::getenv("BC_TEST_EXPECT_NODES")) {
    std::vector<long long> distinct = nodes;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    ASSERT_EQ(distinct.size(), static_cast<std::size_t>(std::atoi(expect))) << "the ranks' nodes";
  }
  const auto piece = static_cast<std::size_t>(core::tunableInt(core::kTunableMpiPieceBytes));
  ASSERT_GT(piece, 0u);
  std::unique_ptr<Transport> split = g_world->split(0, g_world->size() - g_world->rank());  // reversed order
  ASSERT_NE(split, nullptr);
  for (Transport* t : {static_cast<Transport*>(g_world.get()), split.get()}) {
    const int n = t->size();
    const int next = (t->rank() + 1) % n;
    const int prev = (t->rank() + n - 1) % n;
    for (std::size_t bytes : {piece - 1, piece, piece + 1, 3 * piece + 7, std::size_t{1} << 21}) {
      // Two messages per direction on one tag: the streams must not interleave.
      std::vector<unsigned char> out[2], in[2];
      Request reqs[4];
      for (int k = 0; k < 2; ++k) {
        out[k].resize(bytes);
        in[k].assign(bytes, 0);
        fillBytes(out[k].data(), bytes, bytes + k, t->rank());
        t->irecv(in[k].data(), bytes, prev, 5, reqs[k]);
      }
      for (int k = 0; k < 2; ++k) t->isend(out[k].data(), bytes, next, 5, reqs[2 + k]);
      if (t == g_world.get()) {
        // A stream marks its request's second slot with all ones (mpi_transport.cc).
        const bool otherNode = nodes[static_cast<std::size_t>(next)] != nodes[static_cast<std::size_t>(t->rank())];
        const bool streamed = reqs[2].slot[1] == ~std::uintptr_t{0};
        EXPECT_EQ(streamed, otherNode && bytes > piece) << bytes << " bytes to rank " << next;
      }
      for (auto& r : reqs) waitFor(*t, r);
      for (int k = 0; k < 2; ++k) {
        std::vector<unsigned char> expected(bytes);
        fillBytes(expected.data(), bytes, bytes + k, prev);
        EXPECT_TRUE(in[k] == expected) << bytes << " bytes, message " << k << " from rank " << prev;
      }
    }
    // Sent whole, received into three scattered pieces of other sizes, and back.
    const std::size_t bytes = 2 * piece + 1001;
    std::vector<unsigned char> out(bytes), in(bytes + 80, 0), expected(bytes);
    char* inAt = reinterpret_cast<char*>(in.data());
    char* outAt = reinterpret_cast<char*>(out.data());
    fillBytes(out.data(), bytes, 77, t->rank());
    fillBytes(expected.data(), bytes, 77, prev);
    const std::size_t cut1 = piece / 3, cut2 = piece + 5000;
    const core::Piece parts[3] = {{inAt, cut1}, {inAt + cut1 + 16, cut2 - cut1}, {inAt + cut2 + 64, bytes - cut2}};
    Request got, sent;
    t->irecvPieces(parts, 3, prev, 6, got);
    t->isend(out.data(), bytes, next, 6, sent);
    waitFor(*t, got);
    waitFor(*t, sent);
    std::vector<unsigned char> joined;
    for (const core::Piece& p : parts) joined.insert(joined.end(), p.data, p.data + p.bytes);
    EXPECT_TRUE(joined == expected) << "whole to scattered pieces, from rank " << prev;
    const core::Piece back[2] = {{outAt, cut2}, {outAt + cut2, bytes - cut2}};
    std::vector<unsigned char> whole(bytes, 0);
    t->irecv(whole.data(), bytes, prev, 7, got);
    t->isendPieces(back, 2, next, 7, sent);
    waitFor(*t, got);
    waitFor(*t, sent);
    EXPECT_TRUE(whole == expected) << "scattered pieces to whole, from rank " << prev;
  }
  split.reset();
  g_world->nativeBarrier(nullptr);
}

// Above INT_MAX bytes the message travels as a block-typed part plus a remainder.
TEST(MpiTransport, MessageAboveIntMax) {
  const char* enabled = std::getenv("BOOSTCOMM_TEST_LARGE");
  if (enabled == nullptr || std::string(enabled) != "1") GTEST_SKIP() << "set BOOSTCOMM_TEST_LARGE=1";
  if (g_world->size() < 2) GTEST_SKIP() << "needs 2 ranks";
  Transport& t = *g_world;
  const std::size_t bytes = (std::size_t{1} << 31) + 5;
  auto pattern = [](std::size_t i) { return static_cast<unsigned char>((i * 131) ^ (i >> 20)); };
  if (t.rank() <= 1) {
    std::vector<unsigned char> buf(bytes);
    Request req;
    if (t.rank() == 0) {
      for (std::size_t i = 0; i < bytes; ++i) buf[i] = pattern(i);
      t.isend(buf.data(), bytes, 1, 1, req);
    } else {
      t.irecv(buf.data(), bytes, 0, 1, req);
    }
    EXPECT_NE(req.slot[0], 0u);
    EXPECT_NE(req.slot[1], 0u);  // the 5-byte remainder
    waitFor(t, req);
    if (t.rank() == 1) {
      std::size_t bad = 0;
      for (std::size_t i = 0; i < bytes; ++i) bad += buf[i] != pattern(i);
      EXPECT_EQ(bad, 0u);
    }
  }
  t.nativeBarrier(nullptr);
}

}  // namespace
}  // namespace boostcomm::transport

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  boostcomm::testing::printOnlyFailuresOnNonRootRanks(rank);
  boostcomm::transport::g_world = boostcomm::transport::MpiTransport::createWorld();
  int failed = RUN_ALL_TESTS();
  boostcomm::transport::g_world.reset();  // frees the duplicated communicator before MPI_Finalize
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  // Our datatypes and ops were freed inside MPI_Finalize; using them now must be reported, not crash.
  try {
    boostcomm::transport::mpi::mpiDataType(boostcomm::DataType::kFloat16);
    std::fprintf(stderr, "[rank %d] float16 datatype still usable after MPI_Finalize\n", rank);
    anyFailed = 1;
  } catch (const boostcomm::Error& e) {
    if (e.category() != boostcomm::ErrorCategory::kFinalized) anyFailed = 1;
  }
  return anyFailed;
}
