// CollectiveFusion on in-process communicators, world sizes 1, 2, 3 and 5:
// the three-request pattern (allgather of activations, allreduce of
// gradients, broadcast of parameters), seeded random batches of all four
// kinds with dependencies where one request reads what another wrote, fused
// and unfused, executed twice (packed buffers reused). Reductions are checked
// against the float64 / wraparound reference, data movement byte for byte.
// Bad input (cycle, overlapping writers, too-small buffer, mismatched lists):
// every rank throws before data moves.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/inproc_harness.h"
#include "common/test_data.h"
#include "testing/inproc_group.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

struct Spec {
  Collective kind;
  DataType dtype;
  ReduceOp op;
  int root;
  std::size_t count;  // allreduce/broadcast: elements; allgather: per rank; reduce-scatter: per block
  int readsFrom;      // -1, or the request whose result this one's input is (a dependency)
};

// One rank's side of a batch: buffers, registration, checks.
struct Batch {
  std::vector<Spec> specs;
  std::vector<std::vector<std::byte>> send, recv;

  std::string run(Communicator& comm, bool fuse, std::uint64_t seed) {
    const int world = comm.size();
    const std::size_t w = static_cast<std::size_t>(world);
    CollectiveFusionOptions options;
    options.fuse = fuse;
    CollectiveFusion fusion(comm, options);
    send.assign(specs.size(), {});
    recv.assign(specs.size(), {});
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const Spec& s = specs[i];
      const std::size_t es = dataTypeSize(s.dtype);
      const std::size_t sendCount = s.kind == Collective::kReduceScatter ? s.count * w : s.count;
      const std::size_t recvCount = s.kind == Collective::kAllgather ? s.count * w : s.count;
      send[i].resize(sendCount * es + 1);  // +1: never a zero-size vector (distinct addresses)
      recv[i].resize(recvCount * es + 1);
      const View sv(send[i].data(), sendCount, s.dtype), rv(recv[i].data(), recvCount, s.dtype);
      switch (s.kind) {
        case Collective::kAllreduce: fusion.allreduce(sv, rv, s.op); break;
        case Collective::kAllgather: fusion.allgather(sv, rv); break;
        case Collective::kBroadcast: fusion.broadcast(rv, s.root); break;
        case Collective::kReduceScatter: fusion.reduceScatter(sv, rv, s.op); break;
        default: break;
      }
      if (s.readsFrom >= 0) fusion.dependsOn(i, static_cast<std::size_t>(s.readsFrom));
    }
    std::string failures;
    for (std::uint64_t round = 0; round < 2; ++round) {
      fill(comm.rank(), world, seed + round);
      fusion.execute();
      failures += check(comm.rank(), world, seed + round);
      if (!failures.empty()) return failures + "\n" + fusion.describePlan();
    }
    if (fuse && fusion.stats().launchesAfter > fusion.stats().launchesBefore) failures += "more launches after fusion";
    return failures;
  }

  // Inputs: a request that reads another's result gets no input of its own
  // (its input buffer *is* the other's output, see the dependent test).
  void fill(int rank, int world, std::uint64_t seed) {
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const Spec& s = specs[i];
      const View sv(send[i].data(), send[i].size() / dataTypeSize(s.dtype), s.dtype);
      if (s.kind == Collective::kAllreduce || s.kind == Collective::kReduceScatter)
        fillReduceInput(send[i].data(), s.dtype, s.op, Pattern::kExact, seed * 131 + i, rank, 0, sv.count);
      else if (s.kind == Collective::kAllgather)
        fillBytes(send[i].data(), send[i].size() - 1, seed * 131 + i, rank);
      else  // broadcast: only the root's bytes matter; others hold garbage
        fillBytes(recv[i].data(), recv[i].size() - 1, seed * 131 + i, rank == s.root ? -1 : rank);
    }
    (void)world;
  }

  std::string check(int rank, int world, std::uint64_t seed) {
    std::string out;
    const std::size_t w = static_cast<std::size_t>(world);
    for (std::size_t i = 0; i < specs.size() && out.empty(); ++i) {
      const Spec& s = specs[i];
      const std::size_t es = dataTypeSize(s.dtype);
      const std::string where = "request " + std::to_string(i) + " (" + std::string(toString(s.kind)) + " " +
                                std::string(toString(s.dtype)) + " x" + std::to_string(s.count) + "): ";
      std::string e;
      if (s.kind == Collective::kAllreduce) {
        e = checkReduction(recv[i].data(), s.dtype, s.op, Pattern::kExact, seed * 131 + i, world, 0, s.count);
      } else if (s.kind == Collective::kReduceScatter) {
        e = checkReduction(recv[i].data(), s.dtype, s.op, Pattern::kExact, seed * 131 + i, world,
                           static_cast<std::size_t>(rank) * s.count, s.count);
      } else if (s.kind == Collective::kAllgather) {
        std::vector<std::byte> expected(s.count * es * w + 1);
        for (int j = 0; j < world; ++j)
          fillBytes(expected.data() + static_cast<std::size_t>(j) * s.count * es, s.count * es, seed * 131 + i, j);
        e = compareBytes(recv[i].data(), expected.data(), s.count * es * w, es);
      } else {
        std::vector<std::byte> expected(recv[i].size());
        fillBytes(expected.data(), expected.size() - 1, seed * 131 + i, -1);
        e = compareBytes(recv[i].data(), expected.data(), s.count * es, es);
      }
      if (!e.empty()) out = "rank " + std::to_string(rank) + " " + where + e;
    }
    return out;
  }
};

std::vector<Spec> randomSpecs(std::mt19937& rng, int world) {
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kInt32, DataType::kFloat64};
  const std::size_t counts[] = {0, 1, 7, 13, 100, 1031};
  std::vector<Spec> specs;
  const std::size_t n = 1 + rng() % 9;
  for (std::size_t i = 0; i < n; ++i) {
    const Collective kind = static_cast<Collective>(rng() % 4);
    const ReduceOp op = rng() % 2 ? ReduceOp::kSum : ReduceOp::kMax;
    specs.push_back({kind, dtypes[rng() % 4], op, static_cast<int>(rng() % static_cast<unsigned>(world)),
                     counts[rng() % 6], -1});
  }
  return specs;
}

std::string runEverywhere(int world, const std::vector<Spec>& specs, bool fuse, std::uint64_t seed) {
  std::mutex mutex;
  std::string failures;
  detail::runInProcess(world, [&](Communicator& comm) {
    Batch batch{specs, {}, {}};
    const std::string f = batch.run(comm, fuse, seed);
    std::lock_guard lock(mutex);
    if (!f.empty() && failures.empty()) failures = "world " + std::to_string(world) + (fuse ? " fused" : " unfused") +
                                                   " seed " + std::to_string(seed) + ": " + f;
  });
  return failures;
}

TEST(CollectiveFusion, ThreeRequestPattern) {
  for (int world : {1, 2, 3, 5}) {
    const std::vector<Spec> specs = {
        {Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 257, -1},   // activations
        {Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 1031, -1},  // gradients
        {Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 0, 13, -1},
        {Collective::kBroadcast, DataType::kFloat32, ReduceOp::kSum, 0, 499, -1},   // parameters
        {Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum, 0, 31, -1}};
    for (bool fuse : {true, false}) EXPECT_EQ(runEverywhere(world, specs, fuse, 7), "");
  }
}

TEST(CollectiveFusion, RandomBatches) {
  for (int world : {1, 2, 3, 5}) {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
      std::mt19937 rng(static_cast<std::uint32_t>(seed * 17 + static_cast<std::uint64_t>(world)));
      const std::vector<Spec> specs = randomSpecs(rng, world);
      for (bool fuse : {true, false}) {
        const std::string f = runEverywhere(world, specs, fuse, seed);
        ASSERT_EQ(f, "");
      }
    }
  }
}

TEST(CollectiveFusion, DependentRequestSeesTheResult) {
  // A: allreduce g -> r. B: allgather of r (reads A's output) -> z. C: an
  // independent allreduce that fuses with nothing at B's level.
  for (int world : {1, 2, 3, 5}) {
    detail::runInProcess(world, [world](Communicator& comm) {
      const std::size_t w = static_cast<std::size_t>(world);
      std::vector<float> g(37), r(37), z(37 * w), h(11), hr(11);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i + comm.rank());
      for (std::size_t i = 0; i < h.size(); ++i) h[i] = 1.0f;
      CollectiveFusion fusion(comm);
      const auto a = fusion.allreduce(std::span(g), std::span(r), ReduceOp::kSum);
      const auto b = fusion.allgather(std::span(r), std::span(z));
      fusion.allreduce(std::span(h), std::span(hr), ReduceOp::kSum);
      fusion.dependsOn(b, a);
      fusion.execute();
      const CollectiveFusionStats st = fusion.stats();
      EXPECT_EQ(st.launchesBefore, 3u);
      EXPECT_EQ(st.launchesAfter, 2u) << fusion.describePlan();
      for (std::size_t j = 0; j < w; ++j)
        for (std::size_t i = 0; i < g.size(); ++i)
          ASSERT_EQ(z[j * g.size() + i], static_cast<float>(w * i + w * (w - 1) / 2)) << "rank block " << j;
      for (float v : hr) ASSERT_EQ(v, static_cast<float>(world));
    });
  }
}

TEST(CollectiveFusion, BadInputFailsOnEveryRankBeforeDataMoves) {
  const int world = 3;
  // A cycle.
  for (const Error& e : errorsOnEveryRank(world, [](Communicator& comm) {
         std::vector<float> a(4), b(4), c(4), d(4);
         CollectiveFusion f(comm);
         const auto x = f.allreduce(std::span(a), std::span(b), ReduceOp::kSum);
         const auto y = f.allreduce(std::span(c), std::span(d), ReduceOp::kSum);
         f.dependsOn(x, y);
         f.dependsOn(y, x);
         f.execute();
       }))
    EXPECT_NE(e.detail().find("cycle"), std::string::npos) << e.what();
  // Two writers of one buffer; a too-small allgather buffer (on rank 1 only).
  for (const Error& e : errorsOnEveryRank(world, [](Communicator& comm) {
         std::vector<float> a(4), b(4), out(4);
         CollectiveFusion f(comm);
         f.allreduce(std::span(a), std::span(out), ReduceOp::kSum);
         f.allreduce(std::span(b), std::span(out), ReduceOp::kSum);
         f.execute();
       }))
    EXPECT_NE(e.detail().find("write overlapping memory"), std::string::npos) << e.what();
  for (const Error& e : errorsOnEveryRank(world, [](Communicator& comm) {
         std::vector<float> a(4), out(12);
         CollectiveFusion f(comm);
         f.allgather(std::span(a), View(out.data(), comm.rank() == 1 ? 11 : 12, DataType::kFloat32));
         f.execute();
       })) {
    EXPECT_EQ(e.category(), ErrorCategory::kInvalidArgument);
    EXPECT_NE(e.detail().find(e.rank() == 1 ? "the result needs 12" : "invalid input on rank(s) 1"),
              std::string::npos)
        << e.what();
  }
  // Different request lists across ranks.
  for (const Error& e : errorsOnEveryRank(world, [](Communicator& comm) {
         std::vector<float> a(4 + static_cast<std::size_t>(comm.rank() == 2)), b(a.size());
         CollectiveFusion f(comm);
         f.allreduce(std::span(a), std::span(b), ReduceOp::kSum);
         f.execute();
       })) {
    EXPECT_EQ(e.category(), ErrorCategory::kMismatch);
    EXPECT_NE(e.detail().find("rank(s) 2"), std::string::npos) << e.what();
  }
}

}  // namespace
