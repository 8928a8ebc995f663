// Tuner: times the candidates of one collective call and decides.
//
// Decision rule (the guarantee of docs/TUNING.md): the fastest median wins,
// except that native keeps the choice when it is within the noise margin of
// the fastest, or when the fastest beat it in fewer than 2/3 of the paired
// samples (a median can be won by luck on a shared machine: one slow
// scheduler slice in a few samples moves it); then the selection table's
// default keeps it by the same test. So a tuned choice is never slower than
// native by more than the noise, and tuning never replaces a choice for a
// gain the machine's noise could explain.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "algorithms/registry.h"
#include "api/access.h"
#include "api/communicator_impl.h"
#include "boostcomm/gradient_group.h"
#include "boostcomm/autotune.h"
#include "core/check.h"
#include "core/tunables.h"
#include "tuning/cost_model.h"
#include "autotune/measure.h"
#include "tuning/tuned_selection.h"

namespace boostcomm {
namespace {

// A challenger must beat the incumbent in at least this share of the paired samples.
constexpr double kConsistentWinFraction = 2.0 / 3.0;

void runCollective(Communicator& comm, Collective coll, ConstView send, View recv, ReduceOp op,
                   const std::string& algorithm) {
  CallOptions options;
  options.algorithm = algorithm;
  switch (coll) {
    case Collective::kAllreduce:
      return comm.allreduce(send, recv, op, options);
    case Collective::kAllgather:
      return comm.allgather(send, recv, options);
    case Collective::kBroadcast:
      return comm.broadcast(recv, 0, options);
    case Collective::kReduceScatter:
      return comm.reduceScatter(send, recv, op, options);
    case Collective::kBarrier:
      return comm.barrier(options);
  }
}

// Payload bytes, nccl-tests convention (as CollectiveSpec::payloadBytes).
std::size_t payloadOf(Collective coll, ConstView send, View recv) {
  const std::size_t element = dataTypeSize(recv.dtype);
  switch (coll) {
    case Collective::kReduceScatter:
      return send.count * element;
    case Collective::kBarrier:
      return 0;
    default:
      return recv.count * element;
  }
}

}  // namespace

Tuner::Tuner(Communicator& comm, TuneOptions options) : comm_(comm), options_(options) {
  if (options_.samples <= 0) {
    options_.samples = static_cast<int>(core::tunableInt(core::kTunableTuneSamples));
  }
  if (options_.margin < 0) {
    options_.margin = static_cast<double>(core::tunableInt(core::kTunableTuneMarginPercent)) / 100.0;
  }
  options_.warmup = std::max(0, options_.warmup);
  DetectOptions detect;
  detect.probe = options_.probeLinks;
  topology_ = detectTopology(comm, detect);
}

std::vector<std::string> Tuner::candidates(Collective coll) const {
  std::vector<std::string> names = comm_.algorithms(coll);
  if (!options_.hierarchical) {
    std::erase_if(names, [coll](const std::string& n) {
      const algorithms::AlgorithmInfo* a = algorithms::findAlgorithm(coll, n);
      return a != nullptr && algorithms::isHierarchical(*a);
    });
  }
  return names;
}

TuningEntry Tuner::tune(Collective coll, ConstView send, View recv, ReduceOp op) {
  BC_INVALID(coll != Collective::kBarrier, comm_.rank(), "Tuner::tune: barrier has no payload to tune");
  TuningEntry entry;
  entry.collective = coll;
  entry.dtype = recv.dtype;
  entry.bytes = payloadOf(coll, send, recv);
  entry.defaultAlgorithm = comm_.selectedAlgorithm(coll, entry.bytes);
  const std::vector<std::string> names = candidates(coll);
  const autotune::Timings timings =
      autotune::timeCandidates(comm_, static_cast<int>(names.size()), options_.warmup, options_.samples,
                             [&](int i) { runCollective(comm_, coll, send, recv, op, names[static_cast<std::size_t>(i)]); });
  const std::vector<double>& times = timings.medianUs;
  const tuning::CostParams params =
      tuning::paramsFromTopology(topology_, detail::implOf(comm_).describeSelf().sharedMemory);
  for (std::size_t i = 0; i < names.size(); ++i) {
    double predicted = tuning::predictUs(params, coll, names[i], entry.bytes);
    if (!std::isfinite(predicted)) predicted = 0.0;
    entry.candidates.push_back({names[i], times[i], predicted});
  }
  entry.modelChoice = tuning::predictBest(params, coll, entry.bytes, names).algorithm;

  // The decision, identical on every rank since the times are.
  auto indexOf = [&](const CandidateTime* c) { return static_cast<std::size_t>(c - entry.candidates.data()); };
  const CandidateTime* fastest = &entry.candidates.front();
  for (const CandidateTime& c : entry.candidates) {
    if (c.timeUs < fastest->timeUs) fastest = &c;
  }
  // `keep` stays unless the fastest is clearly and consistently faster.
  auto keeps = [&](const CandidateTime* keep) {
    if (keep == nullptr) return false;
    if (keep == fastest || keep->timeUs <= fastest->timeUs * (1.0 + options_.margin)) return true;
    return timings.winFraction(indexOf(fastest), indexOf(keep)) < kConsistentWinFraction;
  };
  const CandidateTime* native = entry.find("native");
  const CandidateTime* fallback = entry.find(entry.defaultAlgorithm);
  // The default may keep the choice only where it is not slower than native.
  const bool fallbackAllowed =
      fallback != nullptr && (native == nullptr || fallback->timeUs <= native->timeUs * (1.0 + options_.margin));
  const CandidateTime* winner = keeps(native) ? native : fallbackAllowed && keeps(fallback) ? fallback : fastest;
  entry.winner = winner->algorithm;
  double runnerUp = std::numeric_limits<double>::infinity();
  for (const CandidateTime& c : entry.candidates) {
    if (&c != winner) runnerUp = std::min(runnerUp, c.timeUs);
  }
  entry.margin = std::isfinite(runnerUp) && winner->timeUs > 0 ? runnerUp / winner->timeUs : 1.0;
  return entry;
}

TuningEntry Tuner::tune(Collective coll, DataType dtype, std::size_t bytes) {
  const std::size_t element = dataTypeSize(dtype);
  const auto ranks = static_cast<std::size_t>(comm_.size());
  // Whole-array payloads (allgather, reduce_scatter) are rounded down to a
  // multiple of ranks * element size.
  std::size_t count = std::max<std::size_t>(1, bytes / element);
  std::size_t sendCount = count;
  std::size_t recvCount = count;
  if (coll == Collective::kAllgather) {
    sendCount = std::max<std::size_t>(1, count / ranks);
    recvCount = sendCount * ranks;
  } else if (coll == Collective::kReduceScatter) {
    recvCount = std::max<std::size_t>(1, count / ranks);
    sendCount = recvCount * ranks;
  }
  // Zeros: every dtype and op reduce them without overflow or NaN, and the
  // timing of the reduction kernels does not depend on the values.
  std::vector<std::byte> send(sendCount * element);
  std::vector<std::byte> recv(recvCount * element);
  return tune(coll, ConstView(send.data(), sendCount, dtype), View(recv.data(), recvCount, dtype), ReduceOp::kSum);
}

std::size_t Tuner::tuneBucketBytes(const std::vector<std::size_t>& tensorCounts,
                                   const std::vector<std::size_t>& candidatesBytes,
                                   std::map<std::size_t, double>* timesUs) {
  BC_INVALID(!candidatesBytes.empty(), comm_.rank(), "tuneBucketBytes: no candidate bucket sizes");
  std::vector<std::vector<float>> tensors;
  tensors.reserve(tensorCounts.size());
  for (std::size_t count : tensorCounts) tensors.emplace_back(count, 0.0f);
  std::vector<View> views;
  for (auto& t : tensors) views.emplace_back(t.data(), t.size(), DataType::kFloat32);
  // One group per candidate (the plan is fixed at construction), each timed
  // on its own: groups hold registered memory, so only one lives at a time.
  std::vector<double> times;
  for (std::size_t bucket : candidatesBytes) {
    GradientGroupOptions options;
    options.bucketBytes = bucket;
    GradientGroup group(comm_, views, options);
    times.push_back(autotune::timeCandidates(comm_, 1, options_.warmup, options_.samples,
                                           [&](int) { group.allreduce(); }).medianUs[0]);
  }
  std::size_t best = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (timesUs) (*timesUs)[candidatesBytes[i]] = times[i];
    if (times[i] < times[best]) best = i;
  }
  return candidatesBytes[best];
}

std::size_t Tuner::tuneChunkBytes(std::size_t bytes, const std::vector<std::size_t>& candidatesBytes,
                                  std::map<std::size_t, double>* timesUs) {
  BC_INVALID(!candidatesBytes.empty(), comm_.rank(), "tuneChunkBytes: no candidate chunk sizes");
  detail::CommunicatorImpl& impl = detail::implOf(comm_);
  const std::shared_ptr<const tuning::TunedSelection> saved = impl.tunedSelection();
  // The chunk matters to the algorithms that pipeline with it: hier on
  // several nodes, ring otherwise (native and shm have their own units).
  const std::vector<std::string> names = candidates(Collective::kAllreduce);
  const std::string algorithm = std::find(names.begin(), names.end(), "hier") != names.end() ? "hier" : "ring";
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float));
  std::vector<float> send(count, 0.0f);
  std::vector<float> recv(count, 0.0f);
  std::vector<double> times;
  for (std::size_t chunk : candidatesBytes) {
    // A selection that changes only the chunk size (no rules from an empty cache).
    auto cache = std::make_shared<TuningCache>(saved ? saved->cache() : TuningCache());
    cache->chunkBytes = chunk;
    tuning::CostParams params;
    impl.setTunedSelection(
        std::make_shared<tuning::TunedSelection>(std::move(cache), params, impl.describeSelf(), false));
    times.push_back(autotune::timeCandidates(comm_, 1, options_.warmup, options_.samples, [&](int) {
      runCollective(comm_, Collective::kAllreduce, ConstView(std::span(send)), View(std::span(recv)), ReduceOp::kSum,
                    algorithm);
    }).medianUs[0]);
  }
  impl.setTunedSelection(saved);
  std::size_t best = 0;
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (timesUs) (*timesUs)[candidatesBytes[i]] = times[i];
    if (times[i] < times[best]) best = i;
  }
  return candidatesBytes[best];
}

}  // namespace boostcomm
