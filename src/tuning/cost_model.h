// Cost model: a latency-bandwidth (alpha-beta) estimate of every algorithm
// of every collective, for a payload size and a machine description.
//
// Terms: alpha = a message's latency (us), beta = time per byte on a link
// (us/B = 1 / (GB/s * 1e3)), gamma = time per byte of a reduction (two
// inputs, one output), S = payload bytes (nccl-tests convention, as in
// bench), n = ranks, N = nodes, L = ranks per node, p = largest power of two
// <= n. Formulas follow Thakur, Rabenseifner & Gropp (2005) and the
// schedules in src/algorithms/ (docs/ALGORITHMS.md lists steps and bytes).
//
// The model ranks algorithms; it does not replace measurement. It is used
// for sizes a tuning cache does not cover, and printed next to measurements
// by `boostcomm tune` so its error stays visible.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/topology.h"
#include "boostcomm/types.h"

namespace boostcomm::tuning {

struct CostParams {
  int ranks = 2;
  int nodes = 1;
  int ranksPerNode = 2;     // L (uneven layouts: the largest node)
  int coresPerNode = 0;     // 0: unknown (no oversubscription penalty)
  bool sharedMemory = false;  // one node with a shm segment: the shm algorithms exist
  // Links, one direction (detectTopology's probes, or the defaults below).
  double intraLatencyUs = 0.0;
  double intraGBps = 0.0;
  double interLatencyUs = 0.0;
  double interGBps = 0.0;
  double memcpyGBps = 0.0;  // one thread, large copies
  double reduceGBps = 0.0;  // output bytes per second of a two-input float32 sum
  std::size_t chunkBytes = std::size_t{1} << 20;  // ring pipelining unit (BOOSTCOMM_RING_CHUNK_BYTES)
};

// Defaults for what was not measured, then the measured links of `topo`
// where LinkModel::measured is set.
CostParams paramsFromTopology(const Topology& topo, bool sharedMemory);
CostParams paramsFor(int ranks, const std::vector<int>& ranksPerNode, int coresPerNode, bool sharedMemory,
                     const LinkModel& intra, const LinkModel& inter);

// Predicted time of `algorithm` for `coll` at `bytes`, in microseconds;
// +infinity when the model does not know the algorithm or it cannot run here
// (e.g. shm on several nodes, hier on one node).
double predictUs(const CostParams& params, Collective coll, std::string_view algorithm, std::size_t bytes);

// The same for a call whose algorithm carries a wire format
// (AlgorithmInfo::carriesWire: ring, rhd, hier, the latter on its inter-node
// phase) sending `wire` (kBf16/kFp16) messages: half the link bytes plus the
// conversions; other algorithms and kOff as predictUs above.
double predictUs(const CostParams& params, Collective coll, std::string_view algorithm, std::size_t bytes,
                 WireFormat wire);

struct Prediction {
  std::string algorithm;  // the fastest predicted, "native" when nothing is known
  double timeUs = 0.0;
};
// The fastest of `candidates`. Native keeps the choice unless another is
// predicted faster by more than `nativeMargin` (0.1 = 10%): the model is
// coarse and native is the safe default.
Prediction predictBest(const CostParams& params, Collective coll, std::size_t bytes,
                       const std::vector<std::string>& candidates, double nativeMargin = 0.1);

}  // namespace boostcomm::tuning
