#include "fusion_bench.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "cli_internal.h"

namespace boostcomm::tools {
namespace {

// Check inputs: element i on rank r is (i % 7 + 1) * (r + 1), so every sum is
// a small integer, exact in every float dtype, in any summation order.
double checkInput(std::size_t i, int rank) { return static_cast<double>(i % 7 + 1) * (rank + 1); }

void store(const View& v, std::size_t i, double value) {
  if (v.dtype == DataType::kFloat64)
    static_cast<double*>(v.data)[i] = value;
  else
    static_cast<float*>(v.data)[i] = static_cast<float>(value);
}

double load(const ConstView& v, std::size_t i) {
  return v.dtype == DataType::kFloat64 ? static_cast<const double*>(v.data)[i]
                                       : static_cast<const float*>(v.data)[i];
}

void fillCheck(const View& v, int rank) {
  for (std::size_t i = 0; i < v.count; ++i) store(v, i, checkInput(i, rank));
}

void fillSmall(const View& v) {
  if (v.dtype == DataType::kFloat64)
    std::fill_n(static_cast<double*>(v.data), v.count, 0.5);
  else
    std::fill_n(static_cast<float*>(v.data), v.count, 0.5f);
}

// "" when v holds the sum over `world` ranks of the check inputs.
std::string verifySum(const ConstView& v, int world, const std::string& what) {
  const double ranksSum = world * (world + 1) / 2.0;
  for (std::size_t i = 0; i < v.count; ++i) {
    const double expected = static_cast<double>(i % 7 + 1) * ranksSum;
    if (load(v, i) != expected)
      return what + " element " + std::to_string(i) + ": got " + std::to_string(load(v, i)) + ", expected " +
             std::to_string(expected);
  }
  return {};
}

MPI_Datatype mpiType(DataType dtype) { return dtype == DataType::kFloat64 ? MPI_DOUBLE : MPI_FLOAT; }

double maxOverRanks(double value) {
  double result = 0;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

}  // namespace

void timeMethods(Communicator& comm, std::vector<FusionMethod*> methods, const TimingOptions& options) {
  for (FusionMethod* m : methods) {
    if (m->refill) m->refill();
    for (int i = 0; i < options.warmup; ++i) m->step();
  }
  for (int round = 0; round < options.repeats; ++round) {
    for (FusionMethod* m : methods) {
      if (m->refill) m->refill();
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < options.iters; ++i) m->step();
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      m->stepUs.push_back(maxOverRanks(us) / options.iters);
    }
  }
}

GradientSet::GradientSet(const workloads::ModelProfile& model, int rank) : model_(model) {
  for (const workloads::TensorProfile& t : model.tensors) {
    BC_INVALID(t.dtype == DataType::kFloat32 || t.dtype == DataType::kFloat64, rank,
               "fusion benchmark: tensor " << t.name << " is " << toString(t.dtype) << "; float32/float64 only");
    storage_.push_back(std::make_unique<std::byte[]>(std::max<std::size_t>(t.bytes(), 1)));
  }
}

std::vector<View> GradientSet::views() const {
  // Gradients arrive in reverse declaration order (backward), so that is the
  // order of the group, as in DDP.
  std::vector<View> views;
  for (std::size_t i = model_.tensors.size(); i-- > 0;)
    views.emplace_back(storage_[i].get(), model_.tensors[i].count(), model_.tensors[i].dtype);
  return views;
}

namespace {

// Check and refill over a list of views (shared by every gradient method).
void attachChecks(FusionMethod& m, Communicator& comm, std::function<std::vector<View>()> views) {
  m.refill = [views] {
    for (const View& v : views()) fillSmall(v);
  };
  m.check = [&comm, views, step = m.step, name = m.name]() -> std::string {
    for (const View& v : views()) fillCheck(v, comm.rank());
    step();
    const std::vector<View> all = views();
    for (std::size_t t = 0; t < all.size(); ++t) {
      std::string e = verifySum(all[t], comm.size(), name + " tensor " + std::to_string(t));
      if (!e.empty()) return e;
    }
    return {};
  };
}

}  // namespace

FusionMethod mpiPerTensorMethod(Communicator& comm, GradientSet& set) {
  FusionMethod m;
  m.name = "mpi_per_tensor";
  const std::vector<View> views = set.views();
  m.launchesPerStep = views.size();
  m.step = [views] {
    for (const View& v : views)
      MPI_Allreduce(MPI_IN_PLACE, v.data, static_cast<int>(v.count), mpiType(v.dtype), MPI_SUM, MPI_COMM_WORLD);
  };
  attachChecks(m, comm, [views] { return views; });
  return m;
}

FusionMethod mpiPackedMethod(Communicator& comm, GradientSet& set) {
  // One persistent packed buffer (allocated once: a fresh 100 MB malloc per
  // step would add page faults to the baseline). Float64 tensors, if any,
  // would need a second buffer; the built-in models are float32 only.
  FusionMethod m;
  m.name = "mpi_packed";
  m.launchesPerStep = 1;
  const std::vector<View> views = set.views();
  std::size_t total = 0;
  for (const View& v : views) {
    BC_INVALID(v.dtype == DataType::kFloat32, comm.rank(), "mpi_packed: float32 tensors only");
    total += v.count;
  }
  auto packed = std::make_shared<std::vector<float>>(total);
  m.step = [views, packed] {
    float* p = packed->data();
    for (const View& v : views) p = std::copy_n(static_cast<const float*>(v.data), v.count, p);
    MPI_Allreduce(MPI_IN_PLACE, packed->data(), static_cast<int>(packed->size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    p = packed->data();
    for (const View& v : views) {
      std::copy_n(p, v.count, static_cast<float*>(v.data));
      p += v.count;
    }
  };
  attachChecks(m, comm, [views] { return views; });
  return m;
}

FusionMethod gradientGroupMethod(Communicator& comm, GradientSet& set, std::size_t bucketBytes, GroupMode mode) {
  GradientGroupOptions options;
  options.bucketBytes = bucketBytes;
  options.bucketView = mode == GroupMode::kView;
  options.packBuckets = mode == GroupMode::kPacked;
  const std::vector<View> views = set.views();
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  auto group = std::make_shared<GradientGroup>(comm, views, options);
  const double buildMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  FusionMethod m;
  m.buildMs = maxOverRanks(buildMs);
  const std::size_t bytes = bucketBytes ? bucketBytes : 0;
  m.name = mode == GroupMode::kView ? "group_view" : mode == GroupMode::kPacked ? "group_packed" : "group_list";
  if (bytes != 0) m.name.append("@").append(std::to_string(bytes >> 20)).append("M");
  m.launchesPerStep = group->stats().collectivesPerStep;
  m.step = [group] { group->allreduce(); };
  attachChecks(m, comm, [group] {
    std::vector<View> views;
    for (std::size_t t = 0; t < group->tensorCount(); ++t) views.push_back(group->tensorView(t));
    return views;
  });
  return m;
}

namespace {

struct ThreeRequestBuffers {
  std::vector<std::vector<float>> activations, gathered, gradients, parameters;
};

std::string checkThree(const ThreeRequestBuffers& b, int rank, int world) {
  for (std::size_t l = 0; l < b.gradients.size(); ++l) {
    std::string e = verifySum(ConstView(std::span(b.gradients[l])), world, "gradient " + std::to_string(l));
    if (!e.empty()) return e;
    const std::size_t a = b.activations[l].size();
    for (std::size_t i = 0; i < b.gathered[l].size(); ++i)
      if (b.gathered[l][i] != static_cast<float>(checkInput(i % a, static_cast<int>(i / a))))
        return "activation " + std::to_string(l) + " element " + std::to_string(i) + " wrong";
    for (std::size_t i = 0; i < b.parameters[l].size(); ++i)
      if (b.parameters[l][i] != static_cast<float>(i % 5 + 1))
        return "parameter " + std::to_string(l) + " element " + std::to_string(i) + " wrong on rank " +
               std::to_string(rank);
  }
  return {};
}

void fillThree(ThreeRequestBuffers& b, int rank, bool forCheck) {
  for (std::size_t l = 0; l < b.gradients.size(); ++l) {
    fillCheck(View(std::span(b.activations[l])), rank);
    if (forCheck)
      fillCheck(View(std::span(b.gradients[l])), rank);
    else
      fillSmall(View(std::span(b.gradients[l])));
    for (std::size_t i = 0; i < b.parameters[l].size(); ++i)
      b.parameters[l][i] = rank == 0 ? static_cast<float>(i % 5 + 1) : 0.0f;
  }
}

}  // namespace

std::vector<FusionMethod> threeRequestMethods(Communicator& comm, const ThreeRequestSizes& sizes,
                                              std::string& planText) {
  auto b = std::make_shared<ThreeRequestBuffers>();
  const std::size_t world = static_cast<std::size_t>(comm.size());
  for (int l = 0; l < sizes.layers; ++l) {
    b->activations.emplace_back(sizes.activationCount);
    b->gathered.emplace_back(sizes.activationCount * world);
    b->gradients.emplace_back(sizes.gradientCount);
    b->parameters.emplace_back(sizes.parameterCount);
  }
  const auto makeBatch = [&comm, b](bool fuse) {
    CollectiveFusionOptions options;
    options.fuse = fuse;
    auto fusion = std::make_shared<CollectiveFusion>(comm, options);
    for (std::size_t l = 0; l < b->gradients.size(); ++l) {
      fusion->allgather(std::span(b->activations[l]), std::span(b->gathered[l]));
      fusion->allreduce(std::span(b->gradients[l]), std::span(b->gradients[l]), ReduceOp::kSum);
      fusion->broadcast(std::span(b->parameters[l]), 0);
    }
    return fusion;
  };
  std::vector<FusionMethod> methods(3);
  methods[0].name = "separate_calls";
  methods[0].launchesPerStep = 3 * b->gradients.size();
  methods[0].step = [&comm, b] {
    for (std::size_t l = 0; l < b->gradients.size(); ++l) {
      comm.allgather(std::span(b->activations[l]), std::span(b->gathered[l]));
      comm.allreduce(std::span(b->gradients[l]), std::span(b->gradients[l]), ReduceOp::kSum);
      comm.broadcast(std::span(b->parameters[l]), 0);
    }
  };
  for (int fused = 0; fused < 2; ++fused) {
    auto fusion = makeBatch(fused == 1);
    FusionMethod& m = methods[1 + static_cast<std::size_t>(fused)];
    m.name = fused ? "fusion_fused" : "fusion_unfused_async";
    m.launchesPerStep = fusion->stats().launchesAfter;
    m.step = [fusion] { fusion->execute(); };
    if (fused) planText = fusion->describePlan();
  }
  for (FusionMethod& m : methods) {
    m.refill = [b, &comm] { fillThree(*b, comm.rank(), false); };
    m.check = [b, &comm, step = m.step] {
      fillThree(*b, comm.rank(), true);
      step();
      return checkThree(*b, comm.rank(), comm.size());
    };
  }
  return methods;
}

}  // namespace boostcomm::tools
