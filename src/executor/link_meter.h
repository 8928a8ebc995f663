// LinkMeter: what one rank put on the links of each level, and when.
//
// Terms (docs/OVERLAP.md, "Link accounting"):
//   level      - intra-node (to a rank of the same node) or inter-node (to
//                another node); a world step's level comes from the node of
//                its peer, a step on the intra-/inter-node communicator of a
//                hierarchical schedule has that communicator's level.
//   observed   - bytes of boostcomm's own send steps: counted as posted.
//   modelled   - bytes of backend (MPI) and shared-memory collectives, whose
//                messages boostcomm cannot see: the per-level send bytes of
//                the algorithm the simulator models that backend call as
//                (algorithms::nativeModelOf), for this rank. Reported apart.
//   in flight  - a send step from its post to its completion as the executor
//                saw it; a backend/shm step from start to completion, on each
//                level its model puts bytes on.
//   busy       - time with at least one step in flight on the level (this
//                rank): the union of the level's in-flight intervals. A step
//                that never completes (its call failed) adds nothing.
// The intervals are kept in a buffer of kIntervalCapacity per level, reserved
// once: ranks of one node merge their inter-node ones to find how long the
// node's link carried several transfers at once (congestion). A full buffer
// is folded in place (sorted, its union added to the busy time) and emptied;
// folded inter-node intervals are lost to congestion and counted as dropped
// (reset() regularly, e.g. per step, to keep them all).
//
// Cost: two steady_clock reads (vDSO, no system call) and a few additions per
// step; no allocation after the interval buffer has grown. Guarded by the
// owning communicator's lock, as the executor is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "boostcomm/types.h"
#include "core/clock.h"
#include "core/intervals.h"

namespace boostcomm::executor {

struct NativeCall;

enum LinkLevel : int { kIntraLevel = 0, kInterLevel = 1, kNumLinkLevels = 2 };

struct LevelCounters {
  std::uint64_t observedBytes = 0;  // send steps
  std::uint64_t modelledBytes = 0;  // backend / shm collectives (see above)
  std::uint64_t messages = 0;       // send steps
  std::uint64_t collectives = 0;    // backend / shm steps that put bytes on this level
  double busySeconds = 0;
  std::uint64_t bytes() const { return observedBytes + modelledBytes; }
};

// [start, end) in steady_clock nanoseconds.
using LinkInterval = core::Interval<std::int64_t>;

// Per-level send bytes of one backend/shm call on this rank.
using LevelBytes = std::array<std::uint64_t, kNumLinkLevels>;
// (call, communicator of the step, dtype) -> this rank's modelled bytes.
using NativeLinkModel = std::function<LevelBytes(const NativeCall&, int comm, DataType dtype)>;

class LinkMeter {
 public:
  static constexpr std::size_t kIntervalCapacity = 4096;  // per level: 64 KiB

  // nodeOfRank: node of every world rank; rank: this rank.
  void configure(std::vector<int> nodeOfRank, int rank, NativeLinkModel model);
  bool enabled() const { return enabled_; }
  void setEnabled(bool on) { enabled_ = on; }

  int levelOf(int comm, int peer) const;

  // A send step of `bytes` on `level`, posted at startNs, completed at endNs.
  void sendFinished(int level, std::size_t bytes, std::int64_t startNs, std::int64_t endNs);
  // A backend/shm step: its modelled bytes per level (none on a level: not in flight there).
  LevelBytes modelled(const NativeCall& call, int comm, DataType dtype) const;
  void collectiveFinished(const LevelBytes& bytes, std::int64_t startNs, std::int64_t endNs);

  // busySeconds filled in from the intervals (a sort: call at snapshot time).
  LevelCounters counters(int level) const;
  const std::vector<LinkInterval>& intervals(int level) const { return levels_[static_cast<std::size_t>(level)].intervals; }
  std::uint64_t droppedIntervals() const { return dropped_; }
  void reset();

 private:
  void record(int level, std::int64_t startNs, std::int64_t endNs);
  void fold(int level);
  struct Level {
    LevelCounters counters;
    std::vector<LinkInterval> intervals;  // capacity kIntervalCapacity, reserved by configure()
    double foldedBusySeconds = 0;
  };
  bool enabled_ = false;
  int rank_ = 0;
  int node_ = 0;
  std::vector<int> nodeOfRank_;
  NativeLinkModel model_;
  std::array<Level, kNumLinkLevels> levels_{};
  std::uint64_t dropped_ = 0;
};

// In-flight intervals (any order, from the ranks of one node): how long at
// least one was in flight (busy) and how long two or more were (congested),
// in seconds (core::occupancy).
struct IntervalOccupancy {
  double busySeconds = 0;
  double congestedSeconds = 0;
};
IntervalOccupancy occupancy(const std::vector<LinkInterval>& intervals);

// The seed table's link rows (docs/OVERLAP.md, "Link accounting"), computed
// the same way from a measured run (nodeLinkStats) and a simulated one
// (simulate/sim_network.h NodeLinkLog):
//   inter-node utilisation = mean over nodes of interBytes / (inter bandwidth x commSeconds)
//   intra-node utilisation = mean over nodes of intraBytes / (ranks x intra bandwidth x commSeconds)
//   inter-node congestion  = sum over nodes of congested time / sum of busy time
// Bandwidths are bytes per second, one direction (a rank's or NIC's egress).
struct NodeLinkSample {
  int ranks = 1;
  double intraBytes = 0;
  double interBytes = 0;
  double interBusySeconds = 0;
  double interCongestedSeconds = 0;
};
struct LinkRows {
  double interUtilisation = 0;
  double intraUtilisation = 0;
  double interCongestion = 0;
};
LinkRows linkRows(const std::vector<NodeLinkSample>& nodes, double intraBytesPerSecond, double interBytesPerSecond,
                  double commSeconds);

}  // namespace boostcomm::executor
