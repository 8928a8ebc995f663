// BusyMeter: overlap statistics for a client that cannot see when its caller
// waits (the c10d backend: DDP waits on a torch future, a final class).
//
// The one definition (docs/OVERLAP.md, and telemetry/stats.h for the overlap
// engine): comm = the union of the intervals with at least one collective in
// flight; exposed = the part of comm during which the caller was blocked
// waiting for communication; hidden = comm - exposed; efficiency = hidden /
// comm. The overlap engine knows its caller's wait (finishBackward) and
// computes exposed from intervals (computeStepStats). Here the caller's wait
// is inferred from its CPU clock: inside each busy period, the CPU time the
// submitting thread consumed counts as hidden (it was computing), the rest as
// exposed. On a machine with more busy threads than cores the caller also
// loses CPU to others while computing, so hidden is a lower bound.
#pragma once

#include <time.h>

#include <cstdint>
#include <mutex>

namespace boostcomm::telemetry {

struct BusyTotals {
  double commSeconds = 0;
  double hiddenSeconds = 0;
  double exposedSeconds = 0;
  std::uint64_t ops = 0;
  std::uint64_t busyPeriods = 0;
};

class BusyMeter {
 public:
  // The calling thread (the submitter) started a collective.
  void opStarted();
  // A collective finished (any thread).
  void opFinished();
  std::uint64_t inFlight() const;
  BusyTotals totals(bool reset);

 private:
  mutable std::mutex mutex_;
  std::uint64_t inFlight_ = 0;
  double busyStartSeconds_ = 0;
  double busyStartCpuSeconds_ = 0;
  clockid_t callerClock_{};
  bool callerClockValid_ = false;
  BusyTotals totals_;
};

}  // namespace boostcomm::telemetry
