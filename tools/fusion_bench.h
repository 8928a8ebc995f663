// Building blocks of `boostcomm fusion`: the methods it compares (each a
// "step" that synchronises one set of gradient tensors, or runs one batch of
// mixed requests) and the interleaved timing loop.
//
// Terms. A *step* is one synchronisation of every tensor. A *block* is
// `iters` consecutive steps of one method, timed as one interval (per step:
// interval / iters, the max over ranks). A *round* runs one block of every
// method, in turn, so machine noise hits all methods alike; the reported time
// is the median over `repeats` rounds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli_internal.h"
#include "boostcomm/boostcomm.h"

namespace boostcomm::tools {

struct FusionMethod {
  std::string name;
  std::size_t launchesPerStep = 0;
  std::function<void()> step;
  // Writes the check inputs, runs one step and verifies every element;
  // returns "" or the first mismatch.
  std::function<std::string()> check;
  // Rewrites small inputs before a timed block (repeated in-place sums grow).
  std::function<void()> refill;
  std::vector<double> stepUs;  // one per round
  double buildMs = 0;          // constructing the method's group (max over ranks); 0: none
};

struct TimingOptions {
  int iters = 20;
  int warmup = 3;
  int repeats = 5;
};

// Runs warm-up steps, then `repeats` rounds over all methods; fills stepUs.
void timeMethods(Communicator& comm, std::vector<FusionMethod*> methods, const TimingOptions& options);

// Gradient tensors of a model, one allocation per tensor (as a framework
// holds them), float dtypes only.
class GradientSet {
 public:
  GradientSet(const workloads::ModelProfile& model, int rank);
  std::vector<View> views() const;
  const workloads::ModelProfile& model() const { return model_; }

 private:
  const workloads::ModelProfile& model_;
  std::vector<std::unique_ptr<std::byte[]>> storage_;
};

// The gradient methods. The groups are created here and kept alive by the
// returned methods; `bucketBytes` 0 takes the library default.
// GradientGroup modes: list (the default: segment lists, no copies), packed
// (pack/unpack into registered buckets), view (the tensors live in the buckets).
enum class GroupMode { kList, kPacked, kView };
FusionMethod mpiPerTensorMethod(Communicator& comm, GradientSet& set);
FusionMethod mpiPackedMethod(Communicator& comm, GradientSet& set);
FusionMethod gradientGroupMethod(Communicator& comm, GradientSet& set, std::size_t bucketBytes, GroupMode mode);

// The three-request pattern, per layer: an allgather of activations, an
// allreduce of gradients and a broadcast of parameters. Methods: one blocking
// call per request, CollectiveFusion unfused (every request async at once) and
// fused (one collective per kind).
struct ThreeRequestSizes {
  int layers = 24;
  std::size_t activationCount = 32 << 10;  // floats per rank per layer
  std::size_t gradientCount = 256 << 10;
  std::size_t parameterCount = 64 << 10;
};
std::vector<FusionMethod> threeRequestMethods(Communicator& comm, const ThreeRequestSizes& sizes,
                                              std::string& planText);

}  // namespace boostcomm::tools
