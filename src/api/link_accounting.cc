#include "api/link_accounting.h"

#include "algorithms/native_model.h"
#include "core/tunables.h"

namespace boostcomm::detail {

namespace {

constexpr std::size_t kMaxCachedShapes = 4096;

LinkLevelStats toPublic(const executor::LevelCounters& c) {
  LinkLevelStats s;
  s.bytes = c.bytes();
  s.observedBytes = c.observedBytes;
  s.modelledBytes = c.modelledBytes;
  s.messages = c.messages;
  s.collectives = c.collectives;
  s.busySeconds = c.busySeconds;
  return s;
}

}  // namespace

void LinkAccounting::configure(const algorithms::NodeLayout& layout, int rank) {
  layout_ = &layout;
  rank_ = rank;
  cache_.clear();
  lastKey_ = Key{-1, 0, 0, 0, 0};
  meter_.configure(layout.nodeOfRank, rank,
                   [this](const executor::NativeCall& call, int comm, DataType dtype) { return model(call, comm, dtype); });
  meter_.setEnabled(core::tunableBool(core::kTunableLinkStats));
}

executor::LevelBytes LinkAccounting::model(const executor::NativeCall& call, int comm, DataType dtype) {
  const Key key{static_cast<int>(call.collective), call.count, static_cast<int>(dtype), call.root, comm};
  if (key == lastKey_) return lastBytes_;
  executor::LevelBytes bytes;
  if (auto it = cache_.find(key); it != cache_.end()) {
    bytes = it->second;
  } else {
    if (cache_.size() >= kMaxCachedShapes) cache_.clear();
    bytes = algorithms::nativeLinkBytes(call, comm, dtype, *layout_, rank_);
    cache_.emplace(key, bytes);
  }
  lastKey_ = key;
  lastBytes_ = bytes;
  return bytes;
}

LinkStats LinkAccounting::snapshot(bool reset) {
  LinkStats s;
  s.enabled = meter_.enabled();
  const auto r = static_cast<std::size_t>(rank_);
  s.node = layout_ != nullptr && r < layout_->nodeOfRank.size() ? layout_->nodeOfRank[r] : 0;
  s.intraNode = toPublic(meter_.counters(executor::kIntraLevel));
  s.interNode = toPublic(meter_.counters(executor::kInterLevel));
  s.interNodeIntervalsNs = meter_.intervals(executor::kInterLevel);
  s.droppedIntervals = meter_.droppedIntervals();
  if (reset) meter_.reset();
  return s;
}

}  // namespace boostcomm::detail
