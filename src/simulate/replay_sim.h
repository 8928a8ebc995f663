// A training step replayed on a simulated cluster: backward compute from a
// model's gradient profile, and the gradient synchronisation of three modes
// (the same modes as `boostcomm replay`, which measures them on real ranks):
//   baseline - backward, then one flat allreduce per gradient tensor, one at a
//              time (the backend's own allreduce, modelled as in program.h);
//   fused    - backward, then fusion buckets (planner/bucketing.h planBuckets),
//              one backend allreduce per bucket;
//   boosted  - each bucket starts as soon as its last gradient is computed, so
//              it overlaps the rest of backward, with the fastest simulated
//              algorithm for its size (hierarchical on multi-node clusters).
// Step time = backward compute + communication still running after backward
// (forward is the same in every mode and left out, as in `boostcomm replay`).
//
// Compute model: tensor i's gradient is ready when the backward pass, walking
// the tensors in reverse declaration order, has done the backward FLOPs of all
// tensors up to it, at deviceFlops per second for batchPerRank samples.
// Fusion costs a copy into the bucket and one out of it at memory bandwidth.
// Not modelled: compute and communication competing for the device (NCCL
// kernels take SMs), and jitter between ranks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "workloads/model_profile.h"
#include "simulate/sim_cluster.h"

namespace boostcomm::simulate {

struct ReplaySimOptions {
  int batchPerRank = 32;
  double deviceFlopsPerSecond = 100e12;  // sustained, e.g. a V100/A100 at 30-50% of fp16 peak
  // > 0: instead of deviceFlopsPerSecond, set backward compute so that the
  // baseline spends this fraction of its step communicating (as `boostcomm replay --comm-share`).
  double commShare = 0;
  std::size_t bucketBytes = std::size_t{25} << 20;
  std::size_t firstBucketBytes = std::size_t{1} << 20;
  std::size_t chunkBytes = std::size_t{1} << 20;  // BOOSTCOMM_RING_CHUNK_BYTES default
  int maxChunks = 64;
  std::vector<std::string> modes = {"baseline", "fused", "boosted"};
  double epochSamples = 1281167;  // samples per epoch, all ranks (ImageNet-1k train set)
};

struct ReplaySimMode {
  std::string mode;
  double stepSeconds = 0;
  double computeSeconds = 0;
  double syncSeconds = 0;     // time some collective of the step was running
  double exposedSeconds = 0;  // step - compute
  double throughput = 0;      // samples/s over all ranks
  double speedup = 0;         // baseline step / this step
  double commShare = 0;       // exposed / step
  double overlapEfficiency = 0;     // (sync - exposed) / sync
  double syncSecondsPerEpoch = 0;   // syncSeconds x steps per epoch
  // From the simulator's link accounting (executor::linkRows over
  // simulate::NodeLinkLog); commSeconds = syncSeconds.
  double interUtilisation = 0;
  double intraUtilisation = 0;
  double interCongestion = 0;
  std::size_t collectives = 0;
  std::string algorithms;     // e.g. "native(rhd)" or "hier x3, ring x1"
};

struct ReplaySimReport {
  std::string model;
  std::size_t tensors = 0;
  std::size_t gradientBytes = 0;
  int ranks = 0;
  double computeSeconds = 0;
  std::vector<ReplaySimMode> modes;
};

ReplaySimReport simulateReplay(const simulate::ClusterSpec& cluster, const workloads::ModelProfile& profile,
                               const ReplaySimOptions& options);

}  // namespace boostcomm::simulate
