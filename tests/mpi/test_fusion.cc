// GradientGroup and CollectiveFusion under mpirun (real MPI, shared-memory
// segment and registered buckets where the ranks share a node). Own main;
// every failure is printed with its rank, and the program exits non-zero when
// any rank saw one.
//
// Covers: mixed dtypes (float32/64, float16, bfloat16, int32/64, uint8),
// empty tensors, sizes 0, 1, 7 and primes, several bucket limits, copy and
// bucket-view modes, sum and average, blocking and async steps; results
// against the float64 / wraparound reference and bitwise identical on every
// rank (hash allgather); the model gradient sets (ResNet-50 tensor shapes);
// CollectiveFusion's three-request pattern with a dependency, fused and not;
// bad input (mismatched tensor lists, a cycle) failing on every rank.
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/test_data.h"
#include "workloads/model_profile.h"

namespace {

using namespace boostcomm;
using namespace boostcomm::testing;

int gFailures = 0;

void fail(const Communicator& comm, const std::string& what) {
  ++gFailures;
  std::fprintf(stderr, "rank %d: FAIL %s\n", comm.rank(), what.c_str());
}

// Every rank's hash equal to rank 0's.
void expectSameOnAllRanks(Communicator& comm, std::uint64_t hash, const std::string& what) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 1; r < comm.size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      fail(comm, what + ": rank " + std::to_string(r) + " differs bitwise from rank 0");
}

struct Tensor {
  std::size_t count;
  DataType dtype;
};

void runGroup(Communicator& comm, const std::vector<Tensor>& specs, const GradientGroupOptions& options,
              const std::string& label) {
  const ReduceOp op = options.average ? ReduceOp::kAvg : ReduceOp::kSum;
  std::vector<std::vector<std::byte>> storage;
  std::vector<View> views;
  for (const Tensor& t : specs) {
    storage.emplace_back(t.count * dataTypeSize(t.dtype));
    views.emplace_back(storage.back().data(), t.count, t.dtype);
  }
  GradientGroup group(comm, views, options);
  for (std::uint64_t step = 0; step < 2; ++step) {
    for (std::size_t t = 0; t < specs.size(); ++t) {
      const View v = group.tensorView(t);
      fillReduceInput(v.data, v.dtype, op, Pattern::kExact, 7919 * step + t, comm.rank(), 0, v.count);
    }
    if (step == 0) {
      group.allreduce();
    } else {
      GradientWork work = group.allreduceAsync();
      work.wait();
    }
    std::uint64_t hash = 1469598103934665603ull;
    for (std::size_t t = 0; t < specs.size(); ++t) {
      const View v = group.tensorView(t);
      const std::string e = checkReduction(v.data, v.dtype, op, Pattern::kExact, 7919 * step + t, comm.size(), 0,
                                           v.count);
      if (!e.empty()) {
        fail(comm, label + " step " + std::to_string(step) + " tensor " + std::to_string(t) + ": " + e);
        break;
      }
      hash = hash * 1099511628211ull ^ hashBytes(v.data, v.count * dataTypeSize(v.dtype));
    }
    expectSameOnAllRanks(comm, hash, label);
  }
}

void gradientGroups(Communicator& comm) {
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
                             DataType::kInt32,   DataType::kUInt8,   DataType::kInt64};
  const std::size_t counts[] = {0, 1, 7, 13, 31, 0, 97, 1009, 65537, 1, 7, 300007};
  for (bool average : {false, true}) {
    std::vector<Tensor> specs;
    for (std::size_t t = 0; t < 29; ++t) {
      DataType dtype = dtypes[t % std::size(dtypes)];
      if (average && !isFloatingPoint(dtype)) dtype = DataType::kFloat32;
      specs.push_back({counts[t % std::size(counts)], dtype});
    }
    // Modes: segment lists (default), packed buckets, bucket view.
    for (const char* mode : {"list", "packed", "view"}) {
      for (std::size_t bucketBytes : {std::size_t{256}, std::size_t{64} << 10, std::size_t{4} << 20}) {
        GradientGroupOptions options;
        options.average = average;
        options.bucketView = std::string(mode) == "view";
        options.packBuckets = std::string(mode) == "packed";
        options.bucketBytes = bucketBytes;
        runGroup(comm, specs, options,
                 std::string(mode) + (average ? " avg" : " sum") + " bucket " + std::to_string(bucketBytes));
      }
    }
  }
  // The ResNet-50 gradient set (161 float32 tensors, 25.6 M elements) at the default bucket limit.
  std::vector<Tensor> resnet;
  for (const workloads::TensorProfile& t : workloads::resnet50().tensors) resnet.push_back({t.count(), t.dtype});
  GradientGroupOptions options;
  runGroup(comm, resnet, options, "resnet50 list");
  options.packBuckets = true;
  runGroup(comm, resnet, options, "resnet50 packed");
  options.packBuckets = false;
  options.bucketView = true;
  runGroup(comm, resnet, options, "resnet50 view");
}

void collectiveFusion(Communicator& comm) {
  const std::size_t w = static_cast<std::size_t>(comm.size());
  for (bool fuse : {true, false}) {
    const std::string label = fuse ? "fusion fused" : "fusion unfused";
    std::vector<float> act1(1031), act2(7), gathered1(1031 * w), gathered2(7 * w);
    std::vector<float> grad1(100003), grad2(13), params(4099), reduced(13 * w);
    CollectiveFusionOptions options;
    options.fuse = fuse;
    CollectiveFusion fusion(comm, options);
    fusion.allgather(std::span(act1), std::span(gathered1));
    const auto g1 = fusion.allreduce(std::span(grad1), std::span(grad1), ReduceOp::kSum);
    fusion.allreduce(std::span(grad2), std::span(grad2), ReduceOp::kSum);
    fusion.broadcast(std::span(params), static_cast<int>(w - 1));
    fusion.allgather(std::span(act2), std::span(gathered2));
    // Reads grad2 after it was reduced: an allgather of the reduced values.
    const auto late = fusion.allgather(std::span(grad2), std::span(reduced));
    fusion.dependsOn(late, 2);
    (void)g1;
    for (int round = 0; round < 2; ++round) {
      const int r = comm.rank();
      for (std::size_t i = 0; i < act1.size(); ++i) act1[i] = static_cast<float>(i * 3 + r);
      for (std::size_t i = 0; i < act2.size(); ++i) act2[i] = static_cast<float>(i + 100 * r);
      for (std::size_t i = 0; i < grad1.size(); ++i) grad1[i] = static_cast<float>(i % 11 + r);
      for (std::size_t i = 0; i < grad2.size(); ++i) grad2[i] = static_cast<float>(i + r);
      for (std::size_t i = 0; i < params.size(); ++i)
        params[i] = r == comm.size() - 1 ? static_cast<float>(i % 9) : -1.0f;
      fusion.execute();
      const float ranksSum = static_cast<float>(w * (w - 1) / 2);
      bool ok = true;
      for (std::size_t j = 0; j < w && ok; ++j) {
        for (std::size_t i = 0; i < act1.size() && ok; ++i) ok = gathered1[j * act1.size() + i] == float(i * 3 + j);
        for (std::size_t i = 0; i < act2.size() && ok; ++i) ok = gathered2[j * act2.size() + i] == float(i + 100 * j);
        for (std::size_t i = 0; i < grad2.size() && ok; ++i)
          ok = reduced[j * grad2.size() + i] == float(w * i) + ranksSum;
      }
      if (!ok) fail(comm, label + ": allgather results wrong");
      for (std::size_t i = 0; i < grad1.size() && ok; ++i)
        if (grad1[i] != float(w * (i % 11)) + ranksSum) ok = false, fail(comm, label + ": allreduce result wrong");
      for (std::size_t i = 0; i < params.size() && ok; ++i)
        if (params[i] != float(i % 9)) ok = false, fail(comm, label + ": broadcast result wrong");
    }
    const CollectiveFusionStats st = fusion.stats();
    if (st.launchesBefore != 6 || st.launchesAfter != (fuse ? 4u : 6u))
      fail(comm, label + ": launches " + std::to_string(st.launchesAfter) + "\n" + fusion.describePlan());
  }
}

template <typename Fn>
void expectErrorEverywhere(Communicator& comm, ErrorCategory category, const std::string& what, Fn&& fn) {
  int threw = 0;
  try {
    fn();
  } catch (const Error& e) {
    threw = e.category() == category ? 1 : 0;
    if (!threw) fail(comm, what + ": wrong category: " + e.what());
  }
  int all = 0;
  MPI_Allreduce(&threw, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (all != comm.size()) fail(comm, what + ": only " + std::to_string(all) + " ranks threw");
}

void badInput(Communicator& comm) {
  expectErrorEverywhere(comm, ErrorCategory::kMismatch, "tensor lists differ", [&] {
    std::vector<float> a(64);
    const std::size_t count = comm.rank() == comm.size() - 1 ? 63 : 64;
    GradientGroup group(comm, {View(a.data(), count, DataType::kFloat32)});
  });
  expectErrorEverywhere(comm, ErrorCategory::kInvalidArgument, "cycle", [&] {
    std::vector<float> a(4), b(4);
    CollectiveFusion f(comm);
    const auto x = f.allreduce(std::span(a), std::span(a), ReduceOp::kSum);
    const auto y = f.allreduce(std::span(b), std::span(b), ReduceOp::kSum);
    f.dependsOn(x, y);
    f.dependsOn(y, x);
    f.execute();
  });
  // Still usable afterwards: nothing moved.
  std::vector<float> x(5, 1.0f);
  GradientGroup group(comm, {View(std::span(x))});
  group.allreduce();
  if (x[4] != static_cast<float>(comm.size())) fail(comm, "communicator unusable after bad input");
}

}  // namespace

int main() {
  auto comm = Communicator::createMpiWorld();
  try {
    gradientGroups(*comm);
    collectiveFusion(*comm);
    badInput(*comm);
  } catch (const std::exception& e) {
    fail(*comm, std::string("unexpected exception: ") + e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int total = 0;
  MPI_Allreduce(&gFailures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (comm->rank() == 0)
    std::printf("test_fusion: %d ranks, %s\n", comm->size(), total == 0 ? "all passed" : "FAILED");
  comm->finalize();
  return total == 0 ? 0 : 1;
}
