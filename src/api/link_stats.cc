// Communicator::linkStats and nodeLinkStats (boostcomm/link_stats.h), and
// CommunicatorImpl's link accounting switches.
#include <algorithm>
#include <cstring>

#include "api/communicator_impl.h"
#include "api/access.h"
#include "api/link_accounting.h"
#include "boostcomm/link_stats.h"

namespace boostcomm {

namespace detail {

LinkStats CommunicatorImpl::linkStats(bool reset) {
  executor::EngineLock lock(*engine_);
  return links_.snapshot(reset);
}

void CommunicatorImpl::setLinkAccounting(bool on) {
  executor::EngineLock lock(*engine_);
  links_.raw().setEnabled(on);
}

}  // namespace detail

LinkStats Communicator::linkStats(bool reset) { return impl_->linkStats(reset); }

namespace {

// Fixed-size part of one rank's stats, exchanged as float64 (exact for byte
// counts below 2^53).
constexpr int kFields = 13;

void pack(const LinkStats& s, double* out) {
  const LinkLevelStats* levels[2] = {&s.intraNode, &s.interNode};
  int k = 0;
  out[k++] = s.node;
  for (const LinkLevelStats* l : levels) {
    out[k++] = static_cast<double>(l->observedBytes);
    out[k++] = static_cast<double>(l->modelledBytes);
    out[k++] = static_cast<double>(l->messages);
    out[k++] = static_cast<double>(l->collectives);
    out[k++] = l->busySeconds;
  }
  out[k++] = static_cast<double>(s.interNodeIntervalsNs.size());
  out[k++] = static_cast<double>(s.droppedIntervals);
}

void add(LinkLevelStats& into, const double* f) {
  into.observedBytes += static_cast<std::uint64_t>(f[0]);
  into.modelledBytes += static_cast<std::uint64_t>(f[1]);
  into.bytes = into.observedBytes + into.modelledBytes;
  into.messages += static_cast<std::uint64_t>(f[2]);
  into.collectives += static_cast<std::uint64_t>(f[3]);
  into.busySeconds += f[4];  // rank sum; the inter level's is replaced by the union below
}

}  // namespace

std::vector<NodeLinkStats> nodeLinkStats(Communicator& comm, bool reset) {
  std::vector<NodeLinkStats> out = mergeNodeLinkStats(comm, comm.linkStats(reset));
  // The exchange's own messages are not part of what the caller measures.
  if (reset) comm.linkStats(true);
  return out;
}

namespace detail {
void setLinkAccounting(Communicator& comm, bool on) {
  CommunicatorImpl& impl = implOf(comm);
  impl.setLinkAccounting(on);
}
}  // namespace detail

std::vector<NodeLinkStats> mergeNodeLinkStats(Communicator& comm, const LinkStats& mine) {
  const int n = comm.size();
  std::vector<double> fields(static_cast<std::size_t>(kFields) * static_cast<std::size_t>(n));
  double own[kFields] = {};
  pack(mine, own);
  comm.allgather(ConstView(own, kFields, DataType::kFloat64), View(fields.data(), fields.size(), DataType::kFloat64));
  // Intervals: int64 pairs, each rank's count from the first exchange.
  std::vector<std::size_t> counts(static_cast<std::size_t>(n));
  std::size_t total = 0;
  for (int r = 0; r < n; ++r) {
    counts[static_cast<std::size_t>(r)] = 2 * static_cast<std::size_t>(fields[static_cast<std::size_t>(r) * kFields + 11]);
    total += counts[static_cast<std::size_t>(r)];
  }
  std::vector<std::int64_t> flat(total);
  std::vector<std::int64_t> ownFlat(2 * mine.interNodeIntervalsNs.size());
  for (std::size_t i = 0; i < mine.interNodeIntervalsNs.size(); ++i) {
    ownFlat[2 * i] = mine.interNodeIntervalsNs[i].first;
    ownFlat[2 * i + 1] = mine.interNodeIntervalsNs[i].second;
  }
  comm.allgatherv(ConstView(ownFlat.data(), ownFlat.size(), DataType::kInt64), View(flat.data(), flat.size(), DataType::kInt64),
                  counts);
  int nodes = 0;
  for (int r = 0; r < n; ++r) nodes = std::max(nodes, static_cast<int>(fields[static_cast<std::size_t>(r) * kFields]) + 1);
  std::vector<NodeLinkStats> out(static_cast<std::size_t>(nodes));
  std::vector<std::vector<executor::LinkInterval>> intervals(static_cast<std::size_t>(nodes));
  std::size_t at = 0;
  for (int r = 0; r < n; ++r) {
    const double* f = &fields[static_cast<std::size_t>(r) * kFields];
    const auto node = static_cast<std::size_t>(f[0]);
    NodeLinkStats& s = out[node];
    s.node = static_cast<int>(node);
    ++s.ranks;
    add(s.intraNode, f + 1);
    add(s.interNode, f + 6);
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; i += 2) intervals[node].emplace_back(flat[at + i], flat[at + i + 1]);
    at += counts[static_cast<std::size_t>(r)];
  }
  for (std::size_t node = 0; node < out.size(); ++node) {
    const executor::IntervalOccupancy o = executor::occupancy(intervals[node]);
    out[node].interNode.busySeconds = o.busySeconds;
    out[node].interCongestedSeconds = o.congestedSeconds;
  }
  return out;
}

}  // namespace boostcomm
