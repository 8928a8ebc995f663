#include "tuning/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithms/registry.h"
#include "core/backend_facts.h"

namespace boostcomm::tuning {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// ---- Hardware facts (defaults for what detectTopology did not measure) ----
// Open MPI 4.1.4 shared-memory (vader) ping-pong, half round trip, on the
// 2-vCPU test VMs: 0.3-0.5 us (`boostcomm topo`: 0.34 us).
constexpr double kDefaultIntraLatencyUs = 0.5;
// Point-to-point over shared memory with CMA single copy, 1-4 MiB messages:
// ~5-6 GB/s (osu_allreduce 4 MiB on 2 ranks takes 1.0 ms; Rabenseifner moves
// S/2 twice and reduces S/2, which leaves ~6 GB/s for the transfers).
constexpr double kDefaultIntraGBps = 5.0;
// Between hosts: a RoCE/TCP-class link, ~10 us and 10 Gbit/s (1.25 GB/s).
constexpr double kDefaultInterLatencyUs = 10.0;
constexpr double kDefaultInterGBps = 1.25;
// Single-thread memcpy of large buffers on these VMs: 9-18 GB/s (9.4 GB/s in
// docs/PERFORMANCE_HISTORY.md; up to 18 GB/s when the data is in L2/L3).
constexpr double kDefaultMemcpyGBps = 9.4;
// A float32 sum reads two streams and writes one where memcpy reads one and
// writes one: ~2/3 of memcpy bandwidth in output bytes (AVX2 kernel, memory bound).
constexpr double kDefaultReduceGBps = 6.0;
// Open MPI 4.1.4 allreduce faults in a fresh temporary of S bytes per call
// from core::kFreshAllocationBytes (core/backend_facts.h). 2 GB/s is a
// bare-metal figure (~1 us per 4 KiB page including the zeroing); `boostcomm
// topo` measures 0.2-0.3 GB/s in these VMs. Either way native ranks last from
// 32 MiB, which is all the model needs it for.
constexpr double kFirstTouchGBps = 2.0;
// Open MPI 4.1.4's allreduce between nodes over its TCP btl, on the emulated
// 2 x 1 cluster at 1 Gbit/s (scripts/emucluster.sh; issue "Right by
// default"): 14.4 / 62.6 / 257 ms at 1 / 4 / 16 MiB where boostcomm's rd
// schedule takes 8.8 / 35.1 / 144 ms over the same link (1.6-1.8x), and
// 5-8x slower than rd at 256 KiB; at 64 KiB and below (the btl's eager
// limit) it is on par. The model charges native that factor above the eager
// limit; online selection (tuning/online_selection.h) times native in place
// anyway, so a link where MPI does better costs a few calls.
constexpr double kNativeInterPenalty = 1.7;
constexpr std::size_t kTcpEagerBytes = std::size_t{64} << 10;
// boostcomm's schedule path (validate, cached schedule, executor) per call,
// on top of the messages: ~1 us here (the direct route skips it).
constexpr double kScheduleCallUs = 1.0;
// Shared-memory engine: one flag round trip per chunk of 256 KiB
// (BOOSTCOMM_SHM_CHUNK_BYTES), ~0.5 us each on these VMs.
constexpr double kShmSyncUs = 0.5;
constexpr std::size_t kShmChunkBytes = std::size_t{256} << 10;
// Wire formats (core/wire.h): float32 bytes per us one thread encodes or
// decodes (AVX2/F16C where present, measured by test_wire's throughput
// line on these 2-vCPU hosts: see docs/PERFORMANCE_HISTORY.md §14). Not overlapped with
// the link in the model (conservative: auto compresses only where the link
// saving clearly exceeds it).
constexpr double kWireBf16ConvertGBps = 8.0;
constexpr double kWireFp16ConvertGBps = 2.5;
// A 256 KiB chunk is copied in, reduced and copied out while it sits in L2,
// so the engine's copies run near the top of the 9-18 GB/s single-thread
// range, and its reductions at ~2/3 of that (docs/PERF_SHM.md: 1.5-1.8x
// over MPI at 0.5-16 MiB on 2 ranks).
constexpr double kShmCopyGBps = 18.0;
constexpr double kShmReduceGBps = 12.0;
// Hierarchical algorithms cut the payload into up to 4 pipeline pieces (hier.cc).
constexpr int kHierMaxPieces = 4;

// us per byte of a link of `GBps` (1 GB/s = 1e3 bytes per us).
double usPerByte(double GBps) { return 1.0 / (GBps * 1e3); }

int log2Ceil(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}
int pow2AtMost(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// The machine seen by one algorithm: the slowest link its messages cross.
struct Link {
  double alpha;  // us
  double beta;   // us per byte
};

struct Model {
  const CostParams& p;
  double gamma;    // us per reduced byte (with the oversubscription factor)
  double copy;     // us per copied byte (large buffers)
  double shmCopy;   // us per copied byte of a cache-resident shm chunk
  double shmGamma;  // us per reduced byte of a cache-resident shm chunk
  Link intra;
  Link inter;
  // Wire formats: link bytes per float32 byte (0.5 for 16-bit) and us per
  // float32 byte converted (encode or decode), on the links that compress.
  double wireRatio = 1.0;
  double wireConvert = 0.0;

  explicit Model(const CostParams& params) : p(params) {
    // More ranks than cores on a node: compute-bound phases share the cores.
    const double oversub =
        p.coresPerNode > 0 ? std::max(1.0, static_cast<double>(p.ranksPerNode) / p.coresPerNode) : 1.0;
    gamma = usPerByte(p.reduceGBps) * oversub;
    copy = usPerByte(p.memcpyGBps) * oversub;
    shmCopy = usPerByte(std::max(p.memcpyGBps, kShmCopyGBps)) * oversub;
    shmGamma = usPerByte(std::max(p.reduceGBps, kShmReduceGBps)) * oversub;
    intra = {p.intraLatencyUs, usPerByte(p.intraGBps)};
    inter = {p.interLatencyUs, usPerByte(p.interGBps)};
  }
  // Flat algorithms on several nodes: a ring crosses each node boundary with
  // one flow; butterflies (rd, rhd) send all L ranks of a node across at once.
  Link ringLink() const { return p.nodes > 1 ? inter : intra; }
  Link butterflyLink() const {
    return p.nodes > 1 ? Link{inter.alpha, inter.beta * p.ranksPerNode} : intra;
  }

  // Ring reduce-scatter of S over n ranks: n-1 steps of S/n, the reduction of
  // one chunk overlapping the transfer of the next (ring.cc).
  double ringReduceScatter(double S, int n, Link l) const {
    if (n <= 1) return 0.0;
    const double seg = S / n;
    const double chunk = std::min(seg, static_cast<double>(p.chunkBytes));
    return (n - 1) * (l.alpha + seg * std::max(l.beta, gamma)) + chunk * std::min(l.beta, gamma);
  }
  double ringAllgather(double S, int n, Link l) const {
    return n <= 1 ? 0.0 : (n - 1) * (l.alpha + S / n * l.beta);
  }
  // Non-powers of two: the first 2(n-p) ranks fold in pairs before and after (fold.cc).
  double fold(double S, int n, Link l) const {
    return n == pow2AtMost(n) ? 0.0 : 2 * (l.alpha + S * l.beta) + S * gamma;
  }
  double rhdAllreduce(double S, int n, Link l) const {
    const int q = pow2AtMost(n);
    const int k = log2Ceil(q);
    const double moved = (q - 1.0) / q * S;
    return fold(S, n, l) + 2 * k * l.alpha + 2 * moved * l.beta + moved * gamma;
  }
  double rdAllreduce(double S, int n, Link l) const {
    const int k = log2Ceil(pow2AtMost(n));
    return fold(S, n, l) + k * (l.alpha + S * l.beta + S * gamma);
  }
  double rhdReduceScatter(double S, int n, Link l) const {
    const int q = pow2AtMost(n);
    const double moved = (q - 1.0) / q * S;
    return fold(S, n, l) + log2Ceil(q) * l.alpha + moved * (l.beta + gamma);
  }
  // Binomial tree pipelined per chunk: depth + chunks - 1 stages of one chunk.
  double binomialBroadcast(double S, int n, Link l) const {
    if (n <= 1) return 0.0;
    const double chunk = std::min(S, static_cast<double>(p.chunkBytes));
    const double chunks = std::ceil(S / std::max(chunk, 1.0));
    return (log2Ceil(n) + chunks - 1) * (l.alpha + chunk * l.beta);
  }
  // Recursive doubling of block windows (power-of-two ranks).
  double rdAllgather(double S, int n, Link l) const {
    return log2Ceil(n) * l.alpha + (n - 1.0) / n * S * l.beta;
  }

  // Shared-memory engine (one node): memory-bandwidth bound phases, one flag
  // round trip per chunk. copyIn/reduced/copyOut are bytes per rank.
  double shm(double copyIn, double reduced, double copyOut, double S) const {
    const double chunks = std::max(1.0, std::ceil(S / kShmChunkBytes));
    return kScheduleCallUs + chunks * kShmSyncUs + (copyIn + copyOut) * shmCopy + reduced * shmGamma;
  }

  // Hierarchical: intra-node phase(s) and inter-node phase, overlapped across
  // up to kHierMaxPieces pipeline pieces: the longer phase is paid in full,
  // the shorter one for one piece only.
  double pipelined(double intraUs, double interUs, double S) const {
    const double pieces = std::clamp(std::ceil(S / static_cast<double>(p.chunkBytes)), 1.0, double(kHierMaxPieces));
    return intraUs + interUs - (1.0 - 1.0 / pieces) * std::min(intraUs, interUs);
  }
  // Every rank of a node shares the node's link: per-node bytes on the inter link.
  Link nodeLink() const { return Link{inter.alpha, inter.beta * p.ranksPerNode}; }

  double allreduce(std::string_view a, double S) const {
    const int n = p.ranks;
    if (a == "native") {
      // Open MPI's repertoire (recursive doubling, Rabenseifner, ring), assuming
      // its decision rules pick the best of them, plus its per-call temporary.
      const Link l = butterflyLink();
      double t = std::min({rdAllreduce(S, n, l), rhdAllreduce(S, n, l),
                           ringReduceScatter(S, n, ringLink()) + ringAllgather(S, n, ringLink())});
      if (p.nodes > 1 && S > static_cast<double>(kTcpEagerBytes)) t *= kNativeInterPenalty;
      if (S >= static_cast<double>(core::kFreshAllocationBytes)) t += S * usPerByte(kFirstTouchGBps);
      return t;
    }
    if (a == "ring") {
      const Link l = compressed(ringLink());
      return kScheduleCallUs + ringReduceScatter(S, n, l) + ringAllgather(S, n, l) + converted(S, n, 2);
    }
    if (a == "rhd") {
      return kScheduleCallUs + rhdAllreduce(S, n, compressed(butterflyLink())) + converted(S, pow2AtMost(n), 2);
    }
    if (a == "rd") return kScheduleCallUs + rdAllreduce(S, n, butterflyLink());
    if (a == "shm") return p.nodes == 1 && p.sharedMemory ? shm(S, (n - 1.0) / n * S, S, S) : kInfinity;
    if (a == "hier") {
      if (p.nodes < 2) return kInfinity;
      const int L = p.ranksPerNode;
      const int N = p.nodes;
      const double intraUs = ringReduceScatter(S, L, intra) + ringAllgather(S, L, intra);
      // Each local rank allreduces its shard S/L across nodes (ring), all L at once.
      const Link nl = compressed(nodeLink());
      const double interUs = ringReduceScatter(S / L, N, nl) + ringAllgather(S / L, N, nl) + converted(S / L, N, 2);
      return kScheduleCallUs + pipelined(intraUs, interUs, S);
    }
    return kInfinity;
  }
  // A link carrying 16-bit instead of float32 bytes.
  Link compressed(Link l) const { return Link{l.alpha, l.beta * wireRatio}; }
  // Conversions of `phases` ring-like phases (reduce-scatter, allgather) of
  // S over n ranks: every byte sent encoded and every byte received decoded,
  // (n-1)/n S each way per phase.
  double converted(double S, int n, int phases) const {
    return n <= 1 ? 0.0 : 2.0 * phases * (n - 1) / n * S * wireConvert;
  }

  double allgather(std::string_view a, double S) const {
    const int n = p.ranks;
    const bool pow2 = n == pow2AtMost(n);
    if (a == "native") {
      // Open MPI: Bruck / recursive doubling for small, ring for large messages.
      return std::min(rdAllgather(S, n, butterflyLink()), ringAllgather(S, n, ringLink()));
    }
    if (a == "ring") return kScheduleCallUs + ringAllgather(S, n, compressed(ringLink())) + converted(S, n, 1);
    if (a == "rd") return pow2 ? kScheduleCallUs + rdAllgather(S, n, butterflyLink()) : kInfinity;
    if (a == "shm") return p.nodes == 1 && p.sharedMemory ? shm(S / n, 0.0, S, S) : kInfinity;
    if (a == "hier") {
      if (p.nodes < 2) return kInfinity;
      const int L = p.ranksPerNode;
      // The inter-node ring, then the intra-node rings (allgather_hier.cc: no pipeline pieces).
      const double interUs = ringAllgather(S / L, p.nodes, compressed(nodeLink())) + converted(S / L, p.nodes, 1);
      return kScheduleCallUs + ringAllgather(S, L, intra) + interUs;
    }
    return kInfinity;
  }

  double broadcast(std::string_view a, double S) const {
    const int n = p.ranks;
    if (a == "native") return binomialBroadcast(S, n, ringLink());
    if (a == "binomial") return kScheduleCallUs + binomialBroadcast(S, n, ringLink());
    if (a == "shm") return p.nodes == 1 && p.sharedMemory ? shm(S / n, 0.0, S, S) : kInfinity;
    if (a == "hier") {
      if (p.nodes < 2) return kInfinity;
      return kScheduleCallUs + pipelined(binomialBroadcast(S, p.ranksPerNode, intra),
                                         binomialBroadcast(S, p.nodes, inter), S);
    }
    return kInfinity;
  }

  double reduceScatter(std::string_view a, double S) const {
    const int n = p.ranks;
    if (a == "native") return rhdReduceScatter(S, n, butterflyLink());
    if (a == "ring") return kScheduleCallUs + ringReduceScatter(S, n, compressed(ringLink())) + converted(S, n, 1);
    if (a == "shm") return p.nodes == 1 && p.sharedMemory ? shm(S, (n - 1.0) / n * S, S / n, S) : kInfinity;
    if (a == "hier") {
      if (p.nodes < 2) return kInfinity;
      const int L = p.ranksPerNode;
      // The intra-node rings, then the inter-node ring (reduce_scatter_hier.cc: no pipeline pieces).
      const double interUs =
          ringReduceScatter(S / L, p.nodes, compressed(nodeLink())) + converted(S / L, p.nodes, 1);
      return kScheduleCallUs + ringReduceScatter(S, L, intra) + interUs;
    }
    return kInfinity;
  }

  double barrier(std::string_view a) const {
    return a == "native" || a == "dissemination"
               ? log2Ceil(p.ranks) * ringLink().alpha + (a == "native" ? 0.0 : kScheduleCallUs)
               : kInfinity;
  }

  // `a`'s time for `coll` at S bytes (with this model's wire settings).
  double predict(Collective coll, std::string_view a, double S) const {
    switch (coll) {
      case Collective::kAllreduce:
        return allreduce(a, S);
      case Collective::kAllgather:
        return allgather(a, S);
      case Collective::kBroadcast:
        return broadcast(a, S);
      case Collective::kReduceScatter:
        return reduceScatter(a, S);
      case Collective::kBarrier:
        return barrier(a);
    }
    return kInfinity;
  }
};

}  // namespace

CostParams paramsFor(int ranks, const std::vector<int>& ranksPerNode, int coresPerNode, bool sharedMemory,
                     const LinkModel& intra, const LinkModel& inter) {
  CostParams p;
  p.ranks = std::max(1, ranks);
  p.nodes = std::max<int>(1, static_cast<int>(ranksPerNode.size()));
  p.ranksPerNode = ranksPerNode.empty() ? p.ranks : *std::max_element(ranksPerNode.begin(), ranksPerNode.end());
  p.coresPerNode = coresPerNode;
  p.sharedMemory = sharedMemory;
  p.intraLatencyUs = kDefaultIntraLatencyUs;
  p.intraGBps = kDefaultIntraGBps;
  p.interLatencyUs = kDefaultInterLatencyUs;
  p.interGBps = kDefaultInterGBps;
  p.memcpyGBps = kDefaultMemcpyGBps;
  p.reduceGBps = kDefaultReduceGBps;
  // A measured link replaces the default only where the fit is usable.
  if (intra.measured && intra.bandwidthGBps > 0) {
    p.intraLatencyUs = std::max(0.0, intra.latencyUs);
    p.intraGBps = intra.bandwidthGBps;
  }
  if (inter.measured && inter.bandwidthGBps > 0) {
    p.interLatencyUs = std::max(0.0, inter.latencyUs);
    p.interGBps = inter.bandwidthGBps;
  }
  return p;
}

CostParams paramsFromTopology(const Topology& topo, bool sharedMemory) {
  const int cores = topo.cores.empty() ? 0 : *std::min_element(topo.cores.begin(), topo.cores.end());
  return paramsFor(topo.worldSize, topo.ranksPerNode, cores, sharedMemory, topo.intraNode, topo.interNode);
}

double predictUs(const CostParams& params, Collective coll, std::string_view algorithm, std::size_t bytes,
                 WireFormat wire) {
  const algorithms::AlgorithmInfo* algo = algorithms::findAlgorithm(coll, algorithm);
  if (algo == nullptr || !algo->carriesWire || wire == WireFormat::kOff || wire == WireFormat::kAuto ||
      params.ranks <= 1) {
    return predictUs(params, coll, algorithm, bytes);
  }
  Model m(params);
  m.wireRatio = 0.5;
  m.wireConvert = usPerByte(wire == WireFormat::kBf16 ? kWireBf16ConvertGBps : kWireFp16ConvertGBps);
  return m.predict(coll, algorithm, static_cast<double>(bytes));
}

double predictUs(const CostParams& params, Collective coll, std::string_view algorithm, std::size_t bytes) {
  if (params.ranks <= 1) return algorithm == "native" ? 0.0 : kScheduleCallUs;
  return Model(params).predict(coll, algorithm, static_cast<double>(bytes));
}

Prediction predictBest(const CostParams& params, Collective coll, std::size_t bytes,
                       const std::vector<std::string>& candidates, double nativeMargin) {
  const bool nativeListed = std::find(candidates.begin(), candidates.end(), "native") != candidates.end();
  Prediction best{"", kInfinity};
  if (nativeListed) best = {"native", predictUs(params, coll, "native", bytes)};
  for (const std::string& name : candidates) {
    if (name == "native") continue;
    const double t = predictUs(params, coll, name, bytes);
    const bool beatsBest = best.algorithm == "native" ? t < best.timeUs * (1.0 - nativeMargin) : t < best.timeUs;
    if (std::isfinite(t) && beatsBest) best = {name, t};
  }
  if (best.algorithm.empty()) best = {"native", predictUs(params, coll, "native", bytes)};
  return best;
}

}  // namespace boostcomm::tuning
