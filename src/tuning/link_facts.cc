#include "tuning/link_facts.h"

#include <array>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/tunables.h"
#include "topology/probe.h"

namespace boostcomm::tuning {
namespace {

// Timed round trips per probe size (after one warm-up that pays connection
// setup); the fit uses the fastest, which on a shared host is the closest
// to what the link can do.
constexpr int kLinkProbeReps = 3;
constexpr std::size_t kLinkProbeSizes[] = {8, std::size_t{2} << 20};

}  // namespace

LinkFacts learnLinkFacts(transport::Transport& world, const algorithms::NodeLayout& layout) {
  LinkFacts facts;
  if (layout.nodes() < 2 || !core::tunableBool(core::kTunableLinkProbe)) return facts;
  const auto start = std::chrono::steady_clock::now();
  const int a = layout.members[0].front();
  const int b = layout.members[1].front();
  // {latency us, bandwidth GB/s, cores}; a negative bandwidth: the fit failed.
  std::array<double, 3> fit{0.0, -1.0, 0.0};
  if (world.rank() == a || world.rank() == b) {
    const auto points = topology::pingPong(world, world.rank() == a ? b : a, world.rank() == a, kLinkProbeSizes,
                                           kLinkProbeReps);
    if (world.rank() == a && points.size() == 2 && points[1].timeUs > 0) {
      // Latency from the 8 B round trip, bandwidth from what the 2 MiB one
      // added. Not the weighted fit of `boostcomm topo`: with two points it
      // is the same line, and with a mid-size point inside a shaper's burst
      // its 1/t^2 weights let that point set the slope (1.8 GB/s fitted on
      // a 1 Gbit/s link).
      // When noise in the small round trip swamps what 2 MiB added (a link
      // too fast to resolve, e.g. threads of one process), the whole 2 MiB
      // time gives a lower bound on the bandwidth.
      const double bytes = static_cast<double>(points[1].bytes - points[0].bytes);
      double addedUs = points[1].timeUs - points[0].timeUs;
      if (addedUs < 0.1 * points[1].timeUs) addedUs = points[1].timeUs;
      fit = {points[0].timeUs, bytes / addedUs * 1e-3, static_cast<double>(std::thread::hardware_concurrency())};
    } else if (world.rank() == a) {
      fit[2] = static_cast<double>(std::thread::hardware_concurrency());
    }
  }
  world.nativeBroadcast(fit.data(), fit.size(), DataType::kFloat64, a, nullptr);
  if (fit[1] > 0) {
    facts.inter.latencyUs = fit[0];
    facts.inter.bandwidthGBps = fit[1];
    facts.inter.measured = true;
    facts.inter.hops = 2;
  }
  facts.coresPerNode = static_cast<int>(fit[2]);
  facts.probeMs = core::msSince(start);
  return facts;
}

}  // namespace boostcomm::tuning
