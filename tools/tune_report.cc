#include "tune_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "cli_util.h"

namespace boostcomm::tools {
namespace {

constexpr int kBarWidth = 30;

// Candidate names of `coll` across its entries, in first-seen order (native first).
std::vector<std::string> columnsOf(const std::vector<const TuningEntry*>& entries) {
  std::vector<std::string> names;
  for (const TuningEntry* e : entries) {
    for (const CandidateTime& c : e->candidates) {
      if (std::find(names.begin(), names.end(), c.algorithm) == names.end()) names.push_back(c.algorithm);
    }
  }
  return names;
}

std::string formatUs(double us) {
  char text[32];
  if (us >= 1e5) std::snprintf(text, sizeof text, "%.0f", us);
  else if (us >= 100) std::snprintf(text, sizeof text, "%.1f", us);
  else std::snprintf(text, sizeof text, "%.2f", us);
  return text;
}

}  // namespace

TuneProgress::TuneProgress(int totalSteps, bool enabled)
    : total_(std::max(1, totalSteps)), enabled_(enabled), terminal_(isatty(STDERR_FILENO) != 0) {}

void TuneProgress::step(const std::string& what) {
  if (!enabled_) return;
  ++done_;
  const int filled = done_ * kBarWidth / total_;
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kBarWidth - filled), '.');
  if (terminal_) {
    std::fprintf(stderr, "\r[%s] %3d/%d  %-40s", bar.c_str(), done_, total_, what.c_str());
  } else {
    std::fprintf(stderr, "[tune %3d/%d] %s\n", done_, total_, what.c_str());
  }
  std::fflush(stderr);
}

void TuneProgress::done() {
  if (enabled_ && terminal_) std::fprintf(stderr, "\n");
}

void printTuneTable(const std::vector<TuningEntry>& all, Collective coll, int ranks, int samples) {
  std::vector<const TuningEntry*> entries;
  for (const TuningEntry& e : all) {
    if (e.collective == coll) entries.push_back(&e);
  }
  if (entries.empty()) return;
  const std::vector<std::string> columns = columnsOf(entries);
  std::printf("\n# %s, %d ranks: median of %d samples of the slowest rank, in us; * = winner\n",
              std::string(toString(coll)).c_str(), ranks, samples);
  std::printf("%8s %-8s", "size", "dtype");
  for (const std::string& c : columns) std::printf(" %11s", c.c_str());
  std::printf("  %-8s %7s %9s  %-8s %10s  %-8s %10s\n", "winner", "margin", "x_native", "default", "x_default",
              "model", "model_us");
  for (const TuningEntry* e : entries) {
    std::printf("%8s %-8s", formatBytes(e->bytes).c_str(), std::string(toString(e->dtype)).c_str());
    for (const std::string& c : columns) {
      const CandidateTime* t = e->find(c);
      const std::string cell = t ? formatUs(t->timeUs) + (c == e->winner ? "*" : " ") : "-";
      std::printf(" %11s", cell.c_str());
    }
    const CandidateTime* modelled = e->find(e->modelChoice);
    std::printf("  %-8s %7.2f %9.2f  %-8s %10.2f  %-8s %10s\n", e->winner.c_str(), e->margin, e->speedupOverNative(),
                e->defaultAlgorithm.c_str(), e->speedupOverDefault(), e->modelChoice.c_str(),
                modelled && modelled->predictedUs > 0 ? formatUs(modelled->predictedUs).c_str() : "-");
  }
}

void printKnobTable(const char* title, const std::map<std::size_t, double>& timesUs, std::size_t chosen,
                    std::size_t previous) {
  if (timesUs.empty()) return;
  std::printf("\n# %s: median step time of the slowest rank, in us; * = chosen\n", title);
  std::printf("%10s %12s %9s\n", "bytes", "time_us", "x_default");
  const auto before = timesUs.find(previous);
  for (const auto& [bytes, us] : timesUs) {
    const double ratio = before != timesUs.end() && us > 0 ? before->second / us : 0.0;
    std::printf("%10s %12s %9s\n", (formatBytes(bytes) + (bytes == chosen ? "*" : " ")).c_str(), formatUs(us).c_str(),
                ratio > 0 ? formatUs(ratio).c_str() : "-");
  }
}

}  // namespace boostcomm::tools
