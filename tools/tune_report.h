// What `boostcomm tune` prints: a progress line per step on stderr and, per
// collective, a table of every candidate's time with the winner, the margin,
// the speedups and the cost model's prediction (docs/TUNING.md explains the
// columns). Rank 0 only.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "boostcomm/autotune.h"

namespace boostcomm::tools {

// A progress bar on a terminal (rewritten in place), one line per step
// otherwise, so a log file stays readable.
class TuneProgress {
 public:
  TuneProgress(int totalSteps, bool enabled);
  void step(const std::string& what);
  void done();

 private:
  int total_;
  int done_ = 0;
  bool enabled_;
  bool terminal_;
};

void printTuneTable(const std::vector<TuningEntry>& entries, Collective coll, int ranks, int samples);
void printKnobTable(const char* title, const std::map<std::size_t, double>& timesUs, std::size_t chosen,
                    std::size_t previous);

}  // namespace boostcomm::tools
