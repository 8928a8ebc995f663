#include "topology/probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "core/check.h"
#include "core/clock.h"

namespace boostcomm::topology {
namespace {

constexpr int kProbeTag = 7;
constexpr int kMaxReps = 50;
// At least 8 repetitions per size: the simulator predicts from the median of
// them (ProbeSample::medianUs), and 4 left it swinging by 30 % between runs.
constexpr int kMinReps = 8;
// Per size, about this many bytes cross the link each way (bounds probe time:
// 32 MiB at 1 Gbit/s is 0.27 s; sizes above 4 MiB run kMinReps times).
constexpr std::size_t kBytesPerSize = std::size_t{32} << 20;

void spin(transport::Transport& t, transport::Request& req) {
  while (!t.test(req)) {
  }
}

int repsFor(std::size_t bytes) {
  const std::size_t reps = kBytesPerSize / std::max<std::size_t>(bytes, 1);
  return static_cast<int>(std::clamp<std::size_t>(reps, kMinReps, kMaxReps));
}

}  // namespace

std::vector<std::size_t> defaultProbeSizes() {
  return {8, std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{4} << 20};
}

LinkModel fitLinkModel(std::span<const ProbePoint> points) {
  // Minimise sum w_i (alpha + x_i * b - t_i)^2 with w_i = 1/t_i^2, b = 1/beta.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    BC_INVALID(p.timeUs > 0 && std::isfinite(p.timeUs), -1,
               "probe point " << i << " (" << p.bytes << " bytes) has time " << p.timeUs << " us; must be > 0");
    const double w = 1.0 / (p.timeUs * p.timeUs);
    const double x = static_cast<double>(p.bytes);
    sw += w;
    sx += w * x;
    sy += w * p.timeUs;
    sxx += w * x * x;
    sxy += w * x * p.timeUs;
    if (i == 0 || p.bytes != points[0].bytes) ++distinct;
  }
  BC_INVALID(distinct >= 2, -1, "fitting a latency-bandwidth model needs points at >= 2 distinct sizes, got "
                                    << points.size() << " point(s)");
  const double det = sw * sxx - sx * sx;
  double slope = (sw * sxy - sx * sy) / det;   // us per byte
  double alpha = (sy - slope * sx) / sw;       // us
  if (slope <= 0) {
    // Time did not grow with size (noise swamped a fast link): keep the
    // smallest time as latency and credit the largest message with all the
    // rest, which underestimates bandwidth rather than reporting none.
    const auto [small, large] = std::minmax_element(points.begin(), points.end(),
                                                    [](const ProbePoint& x, const ProbePoint& y) { return x.bytes < y.bytes; });
    alpha = small->timeUs;
    slope = large->timeUs / static_cast<double>(large->bytes);
  } else if (alpha < 0) {
    // Noise can push the intercept below zero: refit the slope through the origin.
    alpha = 0;
    slope = sxy / sxx;
  }
  LinkModel model;
  model.latencyUs = alpha;
  // us per byte -> 1e9 bytes per second: bytes/us = 1e6 B/s = 1e-3 GB/s.
  model.bandwidthGBps = slope > 0 ? 1e-3 / slope : 0.0;
  model.measured = true;
  model.samples.assign(points.begin(), points.end());
  return model;
}

std::vector<ProbePoint> pingPong(transport::Transport& t, int peer, bool initiator,
                                 std::span<const std::size_t> sizes) {
  return pingPong(t, peer, initiator, sizes, 0);
}

std::vector<ProbePoint> pingPong(transport::Transport& t, int peer, bool initiator,
                                 std::span<const std::size_t> sizes, int fixedReps) {
  const std::size_t maxBytes = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  std::vector<unsigned char> buffer(std::max<std::size_t>(maxBytes, 1), 0x5a);
  std::vector<ProbePoint> points;
  std::vector<double> roundTripsUs;
  for (const std::size_t bytes : sizes) {
    const int reps = fixedReps > 0 ? fixedReps : repsFor(bytes);
    roundTripsUs.clear();
    for (int rep = -1; rep < reps; ++rep) {  // rep -1: warm-up (connection setup, page faults)
      transport::Request req;
      const auto start = std::chrono::steady_clock::now();
      if (initiator) {
        t.isend(buffer.data(), bytes, peer, kProbeTag, req);
        spin(t, req);
        t.irecv(buffer.data(), bytes, peer, kProbeTag, req);
        spin(t, req);
      } else {
        t.irecv(buffer.data(), bytes, peer, kProbeTag, req);
        spin(t, req);
        t.isend(buffer.data(), bytes, peer, kProbeTag, req);
        spin(t, req);
      }
      if (rep >= 0) roundTripsUs.push_back(core::usSince(start));
    }
    // The fastest round trip, not the median: on a shared, oversubscribed
    // host other processes only ever add time, so the minimum is the
    // closest estimate of what the link itself can do.
    std::sort(roundTripsUs.begin(), roundTripsUs.end());
    if (initiator) points.push_back({bytes, roundTripsUs.front() / 2, roundTripsUs[roundTripsUs.size() / 2] / 2});
  }
  return points;
}

void waitQuietly(transport::Transport& t, transport::Request& req) {
  while (!t.test(req)) std::this_thread::sleep_for(std::chrono::microseconds(500));
}

}  // namespace boostcomm::topology
