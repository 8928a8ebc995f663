#include "autotune/measure.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "core/clock.h"

namespace boostcomm::autotune {
namespace {
// A sample is a batch of back-to-back calls lasting about this long: single
// short calls between barriers measure the barrier's exit skew and the
// scheduler (a 2-core machine shared by several jobs hands out ~4 ms time
// slices), not the collective.
constexpr double kSampleTargetUs = 2000.0;
constexpr int kMaxBatch = 200;
}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  return (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2.0;
}

double Timings::winFraction(std::size_t a, std::size_t b) const {
  const std::vector<double>& x = samplesUs[a];
  const std::vector<double>& y = samplesUs[b];
  if (x.empty()) return 0.0;
  std::size_t wins = 0;
  for (std::size_t s = 0; s < x.size(); ++s) wins += x[s] < y[s];
  return static_cast<double>(wins) / static_cast<double>(x.size());
}

Timings timeCandidates(Communicator& comm, int candidates, int warmup, int samples,
                       const std::function<void(int)>& call) {
  using Clock = std::chrono::steady_clock;
  // Control traffic uses the backend directly, whatever the selection says.
  CallOptions native;
  native.algorithm = "native";
  const auto k = static_cast<std::size_t>(candidates);
  // Warm-up, the last call timed: it sizes the batches (agreed by a max-allreduce).
  std::vector<double> once(k, 0.0);
  for (std::size_t i = 0; i < k; ++i) {
    for (int w = 0; w < warmup; ++w) call(static_cast<int>(i));
    comm.barrier(native);
    const auto start = Clock::now();
    call(static_cast<int>(i));
    once[i] = core::usSince(start);
  }
  comm.allreduce(std::span(once), std::span(once), ReduceOp::kMax, native);
  std::vector<int> batch(k);
  for (std::size_t i = 0; i < k; ++i) {
    batch[i] = static_cast<int>(std::clamp(kSampleTargetUs / std::max(once[i], 0.1), 1.0, double(kMaxBatch)));
  }
  std::vector<double> times(k * static_cast<std::size_t>(samples), 0.0);
  for (int s = 0; s < samples; ++s) {
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t i = (j + static_cast<std::size_t>(s)) % k;
      comm.barrier(native);
      const auto start = Clock::now();
      for (int b = 0; b < batch[i]; ++b) call(static_cast<int>(i));
      times[static_cast<std::size_t>(s) * k + i] = core::usSince(start) / batch[i];
    }
  }
  comm.allreduce(std::span(times), std::span(times), ReduceOp::kMax, native);
  Timings out;
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<double> mine;
    for (int s = 0; s < samples; ++s) mine.push_back(times[static_cast<std::size_t>(s) * k + i]);
    out.medianUs.push_back(median(mine));
    out.samplesUs.push_back(std::move(mine));
  }
  return out;
}

}  // namespace boostcomm::autotune
