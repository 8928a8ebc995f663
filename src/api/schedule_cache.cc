#include "api/schedule_cache.h"

#include <functional>

namespace boostcomm::detail {

std::size_t hashScheduleKey(const ScheduleKey& key) {
  std::size_t h = std::hash<const void*>()(key.algorithm);
  auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(static_cast<std::size_t>(key.collective));
  mix(static_cast<std::size_t>(key.dtype));
  mix(static_cast<std::size_t>(key.op));
  mix(static_cast<std::size_t>(key.root));
  mix(key.count);
  mix(static_cast<std::size_t>(key.wire));
  for (std::size_t c : key.counts) mix(c);
  return h;
}

ScheduleCache::ScheduleCache(std::size_t limit, Hash hash) : limit_(limit), entries_(0, HashOf{hash}) {}

std::shared_ptr<const executor::Schedule> ScheduleCache::find(const algorithms::AlgorithmInfo& algorithm,
                                                              const algorithms::CollectiveSpec& spec) {
  lookup_.algorithm = &algorithm;
  lookup_.collective = spec.collective;
  lookup_.dtype = spec.dtype;
  lookup_.op = spec.op;
  lookup_.root = spec.root;
  lookup_.count = spec.count;
  lookup_.wire = spec.wire;
  lookup_.counts.assign(spec.counts.begin(), spec.counts.end());
  auto it = entries_.find(lookup_);
  return it == entries_.end() ? nullptr : it->second;
}

void ScheduleCache::insert(std::shared_ptr<const executor::Schedule> schedule) {
  if (limit_ == 0) return;
  if (entries_.size() >= limit_) entries_.clear();  // in-flight users hold their own reference
  entries_.insert_or_assign(lookup_, std::move(schedule));
}

}  // namespace boostcomm::detail
