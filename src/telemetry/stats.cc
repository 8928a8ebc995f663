#include "telemetry/stats.h"

#include <algorithm>
#include <cstdio>

namespace boostcomm::telemetry {

OverlapStepStats computeStepStats(const StepTimes& t) {
  OverlapStepStats s;
  constexpr double kSecondsPerUs = 1e-6;
  s.stepSeconds = std::max(0.0, t.waitEndUs - t.stepStartUs) * kSecondsPerUs;
  s.computeSeconds = std::max(0.0, t.lastReadyUs - t.stepStartUs) * kSecondsPerUs;
  std::vector<IntervalUs> comm = t.comm;
  s.commSeconds = core::unionLength(comm) * kSecondsPerUs;
  s.exposedSeconds = std::max(0.0, t.waitEndUs - t.waitStartUs) * kSecondsPerUs;
  s.hiddenSeconds = std::max(0.0, s.commSeconds - s.exposedSeconds);
  s.efficiency = s.commSeconds > 0 ? s.hiddenSeconds / s.commSeconds : 1.0;
  s.buckets = t.buckets;
  s.bytes = t.bytes;
  return s;
}

void accumulate(OverlapStats& stats, const OverlapStepStats& step) {
  const double n = static_cast<double>(stats.steps);
  auto mix = [n](double mean, double x) { return (mean * n + x) / (n + 1); };
  OverlapStepStats& m = stats.mean;
  m.stepSeconds = mix(m.stepSeconds, step.stepSeconds);
  m.computeSeconds = mix(m.computeSeconds, step.computeSeconds);
  m.commSeconds = mix(m.commSeconds, step.commSeconds);
  m.exposedSeconds = mix(m.exposedSeconds, step.exposedSeconds);
  m.hiddenSeconds = mix(m.hiddenSeconds, step.hiddenSeconds);
  m.efficiency = m.commSeconds > 0 ? m.hiddenSeconds / m.commSeconds : 1.0;
  m.buckets = step.buckets;
  m.bytes = step.bytes;
  stats.last = step;
  ++stats.steps;
}

std::string formatStepLine(std::size_t step, const OverlapStepStats& s) {
  char line[256];
  std::snprintf(line, sizeof line,
                "overlap step %zu: step %.1f ms, compute %.1f ms, comm %.1f ms, exposed %.1f ms, hidden %.1f ms "
                "(%.1f%%), %zu buckets, %.1f MiB",
                step, s.stepSeconds * 1e3, s.computeSeconds * 1e3, s.commSeconds * 1e3, s.exposedSeconds * 1e3,
                s.hiddenSeconds * 1e3, s.efficiency * 100.0, s.buckets, static_cast<double>(s.bytes) / (1 << 20));
  return line;
}

}  // namespace boostcomm::telemetry
