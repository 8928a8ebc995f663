// `boostcomm replay`: a training step replayed from a model's gradient
// profile, with backward compute emulated per layer in proportion to its
// FLOPs, in three modes (docs/PERF_REPLAY.md):
//   baseline - backward, then one allreduce per gradient tensor (flat strategy)
//   fused    - backward, then the OverlapEngine's buckets (fusion, no overlap)
//   boosted  - OverlapEngine with overlap on, topology-aware strategy
// Calibration (commShare > 0): the baseline's gradient-sync time is measured
// first and the emulated compute set to syncTime * (1 - c) / c, so the
// baseline spends the fraction c of its step communicating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"
#include "boostcomm/overlap.h"

namespace boostcomm::tools {

enum class ComputeEmulation {
  kSleep,  // the host thread sleeps until each layer's deadline: an accelerator computes, the CPU is free
  kSpin,   // the host thread busy-waits: CPU training, compute competes with communication for cores
};

struct ReplayOptions {
  std::string model = "resnet50";
  double commShare = 0.28;        // 0: no calibration, use computeSeconds
  double computeSeconds = 0;      // backward compute per step without calibration
  int steps = 5;                  // timed steps per mode
  int warmup = 1;                 // untimed steps per mode
  int calibrationSteps = 3;
  std::vector<std::string> modes = {"baseline", "fused", "boosted"};
  std::string outputPath;
  std::string timelinePath;
  ComputeEmulation compute = ComputeEmulation::kSleep;
  int batchPerRank = 32;          // for throughput (samples/s)
  OverlapOptions overlap;         // bucket size, stages, buffers for fused / boosted
  // fused / boosted keep the gradients inside the buckets (OverlapOptions::bucketView):
  // no pack / unpack copies, as DDP users run with gradient_as_bucket_view=True.
  bool bucketView = true;
  // Link rows (docs/OVERLAP.md, "Link accounting"): link bandwidths from this
  // `boostcomm topo` file; empty: probed at the start (detectTopology).
  std::string topologyPath;
  double epochSamples = 1281167;  // samples per epoch, all ranks (ImageNet-1k train set)
  // Also run every step with link accounting off (interleaved) and report
  // the step-time difference: the accounting's overhead, same run.
  bool linkOverhead = false;
};

struct ModeResult {
  std::string mode;
  double stepSeconds = 0;       // median over steps of the slowest rank's step
  double computeSeconds = 0;    // emulated backward, median
  double syncSeconds = 0;       // communication busy time (see docs/PERF_REPLAY.md)
  double exposedSeconds = 0;    // waited for communication after backward
  double overlapEfficiency = 0;
  double throughput = 0;        // samples/s over all ranks
  double speedup = 0;           // baseline step / this step
  double commShare = 0;         // exposed / step
  double busBandwidthGBs = 0;   // gradient bytes moved per sync second, nccl-tests bus convention
  std::size_t collectivesPerStep = 0;
  std::string algorithm;        // what the largest collective ran on
  std::vector<double> stepSamples;
  // Link rows, medians over steps (commSeconds of a step = its syncSeconds).
  double syncSecondsPerEpoch = 0;
  double interUtilisation = 0;
  double intraUtilisation = 0;
  double interCongestion = 0;
  double interBytesPerNode = 0;  // per step, mean over nodes
  double intraBytesPerNode = 0;
  double modelledShare = 0;      // of all link bytes: modelled (backend/shm calls), not observed
  // With linkOverhead: the same steps with accounting off.
  double stepSecondsAccountingOff = 0;
  std::vector<double> stepSamplesAccountingOff;
};

struct ReplayReport {
  std::string model;
  std::size_t tensors = 0;
  std::size_t gradientBytes = 0;
  int ranks = 0;
  double commShareTarget = 0;
  double calibratedSyncSeconds = 0;  // baseline sync measured during calibration
  // The tail floor: the last gradient of backward is ready only when backward
  // ends, so its allreduce (timed alone, median over the calibration steps)
  // stays exposed whatever the overlap; 0 when not measured.
  std::string tailTensor;
  std::size_t tailBytes = 0;
  double tailSeconds = 0;
  double computeSeconds = 0;         // emulated backward per step
  double intraBytesPerSecond = 0;    // link bandwidths the link rows divide by
  double interBytesPerSecond = 0;
  std::string bandwidthSource;       // the topology file, or "probed"
  std::uint64_t droppedIntervals = 0;  // > 0: some step's congestion undercounts (LinkStats)
  std::vector<ModeResult> modes;
};

// Collective: every rank calls it with the same options.
ReplayReport runReplay(Communicator& comm, const ReplayOptions& options);

}  // namespace boostcomm::tools
