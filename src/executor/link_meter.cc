#include "executor/link_meter.h"

#include <utility>

#include "core/intervals.h"
#include "executor/schedule.h"

namespace boostcomm::executor {

void LinkMeter::configure(std::vector<int> nodeOfRank, int rank, NativeLinkModel model) {
  nodeOfRank_ = std::move(nodeOfRank);
  rank_ = rank;
  node_ = rank >= 0 && static_cast<std::size_t>(rank) < nodeOfRank_.size() ? nodeOfRank_[static_cast<std::size_t>(rank)] : 0;
  model_ = std::move(model);
  for (Level& l : levels_) l.intervals.reserve(kIntervalCapacity);
  reset();
}

int LinkMeter::levelOf(int comm, int peer) const {
  if (comm == kIntraComm) return kIntraLevel;
  if (comm == kInterComm) return kInterLevel;
  if (peer < 0 || static_cast<std::size_t>(peer) >= nodeOfRank_.size()) return kIntraLevel;
  return nodeOfRank_[static_cast<std::size_t>(peer)] == node_ ? kIntraLevel : kInterLevel;
}

void LinkMeter::fold(int level) {
  Level& l = levels_[static_cast<std::size_t>(level)];
  l.foldedBusySeconds += 1e-9 * static_cast<double>(core::unionLength(l.intervals));  // in place: no allocation
  if (level == kInterLevel) dropped_ += l.intervals.size();
  l.intervals.clear();  // capacity kept
}

void LinkMeter::record(int level, std::int64_t startNs, std::int64_t endNs) {
  std::vector<LinkInterval>& v = levels_[static_cast<std::size_t>(level)].intervals;
  if (v.size() >= kIntervalCapacity) fold(level);
  v.emplace_back(startNs, endNs);
}

void LinkMeter::sendFinished(int level, std::size_t bytes, std::int64_t startNs, std::int64_t endNs) {
  LevelCounters& c = levels_[static_cast<std::size_t>(level)].counters;
  c.observedBytes += bytes;
  ++c.messages;
  record(level, startNs, endNs);
}

LevelBytes LinkMeter::modelled(const NativeCall& call, int comm, DataType dtype) const {
  if (!model_) return LevelBytes{};
  return model_(call, comm, dtype);
}

void LinkMeter::collectiveFinished(const LevelBytes& bytes, std::int64_t startNs, std::int64_t endNs) {
  for (int l = 0; l < kNumLinkLevels; ++l) {
    const std::uint64_t b = bytes[static_cast<std::size_t>(l)];
    if (b == 0) continue;
    LevelCounters& c = levels_[static_cast<std::size_t>(l)].counters;
    c.modelledBytes += b;
    ++c.collectives;
    record(l, startNs, endNs);
  }
}

LevelCounters LinkMeter::counters(int level) const {
  const Level& l = levels_[static_cast<std::size_t>(level)];
  LevelCounters c = l.counters;
  c.busySeconds = l.foldedBusySeconds + occupancy(l.intervals).busySeconds;
  return c;
}

void LinkMeter::reset() {
  for (Level& l : levels_) {
    l.counters = LevelCounters{};
    l.intervals.clear();  // capacity kept
    l.foldedBusySeconds = 0;
  }
  dropped_ = 0;
}

IntervalOccupancy occupancy(const std::vector<LinkInterval>& intervals) {
  const core::Occupancy<std::int64_t> ns = core::occupancy(intervals);
  return {1e-9 * static_cast<double>(ns.busy), 1e-9 * static_cast<double>(ns.congested)};
}

LinkRows linkRows(const std::vector<NodeLinkSample>& nodes, double intraBytesPerSecond, double interBytesPerSecond,
                  double commSeconds) {
  LinkRows rows;
  if (nodes.empty() || commSeconds <= 0) return rows;
  double busy = 0;
  double congested = 0;
  for (const NodeLinkSample& n : nodes) {
    if (interBytesPerSecond > 0) rows.interUtilisation += n.interBytes / (interBytesPerSecond * commSeconds);
    if (intraBytesPerSecond > 0 && n.ranks > 0) {
      rows.intraUtilisation += n.intraBytes / (n.ranks * intraBytesPerSecond * commSeconds);
    }
    busy += n.interBusySeconds;
    congested += n.interCongestedSeconds;
  }
  rows.interUtilisation /= static_cast<double>(nodes.size());
  rows.intraUtilisation /= static_cast<double>(nodes.size());
  rows.interCongestion = busy > 0 ? congested / busy : 0;
  return rows;
}

}  // namespace boostcomm::executor
