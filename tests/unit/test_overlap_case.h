// Shared by the overlap engine tests (in-process: test_overlap.cc; MPI:
// tests/mpi/test_overlap.cc): a gradient set, its per-step inputs and the
// float64-reference check, and one driver that runs the engine for a few
// steps in a given ready order.
//
// Inputs use the kExact pattern (quarters), so every partial sum is exact in
// float32/float64 and results must equal the float64 reference bit for bit,
// whatever bucket layout or reduction order the engine used.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "boostcomm/boostcomm.h"
#include "common/test_data.h"

namespace boostcomm::testing {

struct GradientSet {
  std::vector<std::vector<unsigned char>> storage;
  std::vector<GradientTensor> tensors;
};

inline GradientSet makeGradients(const std::vector<std::size_t>& counts, const std::vector<DataType>& dtypes) {
  GradientSet g;
  g.storage.resize(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const DataType dtype = dtypes[i % dtypes.size()];
    g.storage[i].assign(std::max<std::size_t>(1, counts[i]) * dataTypeSize(dtype), 0);
    g.tensors.push_back({"grad" + std::to_string(i), View(g.storage[i].data(), counts[i], dtype)});
  }
  return g;
}

inline std::uint64_t stepSeed(int step, std::size_t tensor) { return 1000003ull * static_cast<unsigned>(step) + tensor; }

inline void fillTensor(GradientSet& g, std::size_t i, int rank, int step, ReduceOp op) {
  const View& v = g.tensors[i].data;
  fillReduceInput(v.data, v.dtype, op, Pattern::kExact, stepSeed(step, i), rank, 0, v.count);
}

// The gradients as the engine sees them: in bucket-view mode the slots of its
// arena (no storage of their own), otherwise g itself.
inline GradientSet engineGradients(const OverlapEngine& engine, const GradientSet& g) {
  GradientSet views;
  for (std::size_t i = 0; i < g.tensors.size(); ++i) views.tensors.push_back({g.tensors[i].name, engine.tensorView(i)});
  return views;
}

// "" or the first failing tensors, named.
inline std::string checkStep(const GradientSet& g, int worldSize, int step, ReduceOp op) {
  std::string failures;
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    const View& v = g.tensors[i].data;
    const std::string why =
        checkReduction(v.data, v.dtype, op, Pattern::kExact, stepSeed(step, i), worldSize, 0, v.count);
    if (!why.empty() && failures.size() < 2000) failures += "step " + std::to_string(step) + " tensor " + std::to_string(i) + ": " + why + "\n";
  }
  return failures;
}

inline std::uint64_t hashGradients(const GradientSet& g) {
  std::uint64_t h = 1469598103934665603ull;
  for (const GradientTensor& t : g.tensors) h = h * 1099511628211ull ^ hashBytes(t.data.data, t.data.count * dataTypeSize(t.data.dtype));
  return h;
}

// A ready order: a random permutation drawn from `seed` (ranks that pass the
// same seed mark in the same order).
inline std::vector<std::size_t> readyOrder(std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

struct StepsResult {
  std::string failures;
  std::vector<std::uint64_t> hashes;  // per step, of every result byte
  OverlapStats stats;
  std::size_t buckets = 0;
};

// Runs `steps` steps; sameOrder: every rank marks in one order per step,
// else each rank in its own.
inline StepsResult runEngineSteps(Communicator& comm, GradientSet& g, const OverlapOptions& options, int steps,
                                  bool sameOrder) {
  StepsResult out;
  const ReduceOp op = options.average ? ReduceOp::kAvg : ReduceOp::kSum;
  OverlapEngine engine(comm, g.tensors, options);
  GradientSet views = engineGradients(engine, g);
  for (std::size_t i = 0; options.bucketView && i < g.tensors.size(); ++i) {
    // The gradients must really live in the buckets, not in the caller's buffers.
    if (views.tensors[i].data.count > 0 && views.tensors[i].data.data == g.tensors[i].data.data)
      out.failures += "tensor " + std::to_string(i) + ": tensorView is the caller's buffer in bucket-view mode\n";
  }
  for (int step = 0; step < steps; ++step) {
    const std::uint64_t seed = 77 + static_cast<std::uint64_t>(step) * 131 + (sameOrder ? 0 : 7919u * static_cast<unsigned>(comm.rank()));
    engine.beginBackward();
    // As backward: each gradient is written just before it is marked ready
    // (earlier buckets may already be on the wire).
    for (std::size_t t : readyOrder(g.tensors.size(), seed)) {
      fillTensor(views, t, comm.rank(), step, op);
      engine.markReady(t);
    }
    engine.finishBackward();
    out.failures += checkStep(views, comm.size(), step, op);
    out.hashes.push_back(hashGradients(views));
  }
  out.stats = engine.getOverlapStats();
  out.buckets = engine.bucketCount();
  return out;
}

// Mixed sizes: empty, tiny, odd, one larger than the test bucket limit.
inline std::vector<std::size_t> mixedCounts() {
  return {0, 1, 7, 1000, 4097, 3, 20000, 64, 5000, 1, 0, 333, 12345, 17, 2048, 9};
}

}  // namespace boostcomm::testing
