#include "seed_table.h"

#include <cstdio>

namespace boostcomm::tools {

namespace {

struct Row {
  const char* label;
  double SeedColumn::*field;
  double scale;
  const char* format;
};

constexpr Row kRows[] = {
    {"throughput (samples/s)", &SeedColumn::throughput, 1, "%12.1f"},
    {"end-to-end speedup (x)", &SeedColumn::speedup, 1, "%12.3f"},
    {"communication share (%)", &SeedColumn::commShare, 100, "%12.1f"},
    {"inter-node bw utilisation (%)", &SeedColumn::interUtilisation, 100, "%12.1f"},
    {"gradient sync per epoch (s)", &SeedColumn::syncSecondsPerEpoch, 1, "%12.1f"},
    {"overlap efficiency (%)", &SeedColumn::overlapEfficiency, 100, "%12.1f"},
    {"intra-node link utilisation (%)", &SeedColumn::intraUtilisation, 100, "%12.1f"},
    {"inter-node congestion rate (%)", &SeedColumn::interCongestion, 100, "%12.1f"},
};

}  // namespace

void printSeedTable(const std::vector<SeedColumn>& columns, const std::string& title) {
  std::printf("# %s\n%-32s", title.c_str(), "metric");
  for (const SeedColumn& c : columns) std::printf("%12s", c.mode.c_str());
  std::printf("\n");
  for (const Row& r : kRows) {
    std::printf("%-32s", r.label);
    for (const SeedColumn& c : columns) std::printf(r.format, c.*(r.field) * r.scale);
    std::printf("\n");
  }
  std::fflush(stdout);
}

nlohmann::json seedJson(const SeedColumn& c) {
  return {{"throughput", c.throughput},
          {"speedup", c.speedup},
          {"comm_share", c.commShare},
          {"inter_node_utilisation", c.interUtilisation},
          {"sync_time_per_epoch_s", c.syncSecondsPerEpoch},
          {"overlap_efficiency", c.overlapEfficiency},
          {"intra_node_utilisation", c.intraUtilisation},
          {"inter_node_congestion", c.interCongestion}};
}

}  // namespace boostcomm::tools
