// `boostcomm simulate`: predictions on a described cluster, in one process
// (no MPI). Shared between simulate_cmd.cc (options, sweep) and
// simulate_report.cc (tables, JSON).
#pragma once

#include <string>
#include <vector>

#include "cli_internal.h"
#include "bench.h"

namespace boostcomm::tools {

// The tuned pseudo-algorithm: per size, the fastest simulated candidate.
inline constexpr const char* kAlgoTuned = "tuned";

struct SimulateSweep {
  simulate::ClusterSpec cluster;
  BenchOptions options;  // sizes, collective, dtype, op, root, algos, outputPath
  std::size_t chunkBytes = std::size_t{1} << 20;
  int maxChunks = 64;
  std::string interAlgorithm = "ring";
  // --wire: float32 allreduce, allgather and reduce_scatter messages of ring,
  // rhd and hier's inter-node phase as 16-bit (link bytes only; the
  // conversions' compute is not modelled).
  WireFormat wire = WireFormat::kOff;
};

// One predicted (size, algorithm): bench's record, with simulator details.
struct SimulateRecord {
  BenchRecord bench;  // time_us = predicted time of one call; check "skipped"
  double interBytes = 0;  // bytes over inter-node links, all ranks together
  double intraBytes = 0;
};

void printSimulateHeader(const SimulateSweep& sweep, const std::vector<std::string>& algos);
void printSimulateSize(const std::vector<SimulateRecord>& records);
void writeSimulateJson(const SimulateSweep& sweep, const std::vector<SimulateRecord>& records, double wallSeconds);

void printReplayTable(const simulate::ClusterSpec& cluster, const simulate::ReplaySimReport& report,
                      const simulate::ReplaySimOptions& options);
void writeReplayJson(const simulate::ClusterSpec& cluster, const simulate::ReplaySimReport& report,
                     const simulate::ReplaySimOptions& options, const std::string& path);

}  // namespace boostcomm::tools
