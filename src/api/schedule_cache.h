// The schedule cache: one built Schedule per call shape, so a repeated call
// binds fresh pointers to a schedule built once (no allocation after warm-up).
//
// A shape is (algorithm, collective, dtype, op, root, count, wire) and, for
// allgatherv, the exact counts of every rank: two count vectors differ in
// their schedules, so the key stores the vector itself and compares it (a
// hash of the counts alone could collide and hand one call another's
// schedule). The settings a schedule also depends on (chunk size, strategy)
// are the communicator's; it clears the cache when they change.
#pragma once

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "algorithms/registry.h"
#include "executor/schedule.h"

namespace boostcomm::detail {

struct ScheduleKey {
  const algorithms::AlgorithmInfo* algorithm = nullptr;
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  std::size_t count = 0;
  WireFormat wire = WireFormat::kOff;
  std::vector<std::size_t> counts;  // allgatherv: every rank's count; empty otherwise
  bool operator==(const ScheduleKey&) const = default;
};

std::size_t hashScheduleKey(const ScheduleKey& key);

class ScheduleCache {
 public:
  using Hash = std::size_t (*)(const ScheduleKey&);
  // limit: entries kept (0: none; when full the cache starts over). `hash`
  // is replaceable so tests can make every key collide.
  explicit ScheduleCache(std::size_t limit = 0, Hash hash = hashScheduleKey);

  // The cached schedule of `spec` run by `algorithm`, or null; remembers the
  // key for insert(). A hit allocates nothing (the key's storage is reused).
  std::shared_ptr<const executor::Schedule> find(const algorithms::AlgorithmInfo& algorithm,
                                                 const algorithms::CollectiveSpec& spec);
  // Caches `schedule` under the key of the last find().
  void insert(std::shared_ptr<const executor::Schedule> schedule);
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct HashOf {
    Hash hash;
    std::size_t operator()(const ScheduleKey& key) const { return hash(key); }
  };
  std::size_t limit_;
  ScheduleKey lookup_;
  std::unordered_map<ScheduleKey, std::shared_ptr<const executor::Schedule>, HashOf> entries_;
};

}  // namespace boostcomm::detail
