// The seed's before/after table: eight rows, one column per mode, printed the
// same way by `boostcomm replay` (measured) and `boostcomm simulate ... replay`
// (simulated). Row definitions: docs/OVERLAP.md, "Link accounting" and
// docs/PERF_REPLAY.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace boostcomm::tools {

struct SeedColumn {
  std::string mode;
  double throughput = 0;           // samples/s, all ranks
  double speedup = 0;              // baseline step / this step
  double commShare = 0;            // exposed communication / step
  double interUtilisation = 0;     // fraction of the inter-node link bandwidth, during the communication phase
  double syncSecondsPerEpoch = 0;  // gradient-sync (communication busy) time x steps per epoch
  double overlapEfficiency = 0;    // hidden / communication busy time
  double intraUtilisation = 0;     // fraction of the intra-node link bandwidth, during the communication phase
  double interCongestion = 0;      // share of the inter-node links' busy time with two or more transfers at once
};

// The column of one mode result (the replay's measured modes and the
// simulator's modes carry the same eight fields under the same names).
template <class ModeResult>
SeedColumn seedColumnOf(const ModeResult& m) {
  SeedColumn c;
  c.mode = m.mode;
  c.throughput = m.throughput;
  c.speedup = m.speedup;
  c.commShare = m.commShare;
  c.interUtilisation = m.interUtilisation;
  c.syncSecondsPerEpoch = m.syncSecondsPerEpoch;
  c.overlapEfficiency = m.overlapEfficiency;
  c.intraUtilisation = m.intraUtilisation;
  c.interCongestion = m.interCongestion;
  return c;
}

void printSeedTable(const std::vector<SeedColumn>& columns, const std::string& title);
// {"throughput": ..., ...}: the JSON keys of one column.
nlohmann::json seedJson(const SeedColumn& c);

}  // namespace boostcomm::tools
