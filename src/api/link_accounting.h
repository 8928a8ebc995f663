// A communicator's link accounting (boostcomm/link_stats.h): the executor's
// LinkMeter plus the per-call model of backend collectives, cached by call
// shape (a schedule build per new shape, a map lookup after).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "algorithms/node_layout.h"
#include "boostcomm/link_stats.h"
#include "executor/link_meter.h"

namespace boostcomm { class Communicator; }
namespace boostcomm::detail {

// Link accounting on or off for this rank (local; the default is
// BOOSTCOMM_LINK_STATS): replay's on/off comparison (tools/cli_internal.h).
void setLinkAccounting(Communicator& comm, bool on);

class LinkAccounting {
 public:
  // Reads BOOSTCOMM_LINK_STATS. layout must outlive this object.
  void configure(const algorithms::NodeLayout& layout, int rank);
  // What a Binding carries: null when accounting is off.
  executor::LinkMeter* meter() { return meter_.enabled() ? &meter_ : nullptr; }
  executor::LinkMeter& raw() { return meter_; }
  LinkStats snapshot(bool reset);

 private:
  executor::LevelBytes model(const executor::NativeCall& call, int comm, DataType dtype);
  using Key = std::tuple<int, std::size_t, int, int, int>;  // collective, count, dtype, root, comm
  executor::LinkMeter meter_;
  const algorithms::NodeLayout* layout_ = nullptr;
  int rank_ = 0;
  std::map<Key, executor::LevelBytes> cache_;
  // The latest shape looked up, before the map: a loop of one call shape
  // (a training step's small calls, a benchmark) costs a compare, not a find.
  Key lastKey_{-1, 0, 0, 0, 0};
  executor::LevelBytes lastBytes_{};
};

}  // namespace boostcomm::detail
