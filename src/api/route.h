// How a blocking call reaches the backend: the route, one of three.
//
//   kDirect  the backend's blocking collective, with no schedule: a native
//            allreduce, broadcast or barrier, not avg, an int count, without
//            an interruptible deadline (an explicit one: the built-in default
//            is the watchdog's, docs/RELIABILITY.md);
//   kSmall   the shm engine's small collective (shm/small_collective.cc):
//            one node, a payload within its slot, native or shm selected;
//   kEngine  the chosen algorithm's schedule on the progress engine (every
//            asynchronous call, and every blocking call the two above
//            cannot take).
//
// CommunicatorImpl::run is validate -> route -> execute. routeOf
// (communicator_impl.cc) is the one place that turns an algorithm's kind
// and the call's own asks (a deadline, avg, a segment list, an explicit
// algorithm) into a route. RouteTable precomputes, when a setting changes,
// the payloads whose default choice in the selection map is the backend's
// or shm's collective, so a call there routes without choosing; the MPI
// interposer asks it for the backend's range too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "algorithms/registry.h"
#include "algorithms/selection_map.h"

namespace boostcomm::detail {

enum class Route : std::uint8_t { kDirect, kSmall, kEngine };

class RouteTable {
 public:
  RouteTable() = default;
  // From the merged selection map. `trialFloor`: larger payloads may still
  // be tried by online selection, so they choose in full; `settled` false:
  // every call chooses in full (the first call's setup is pending, or the
  // consistency check compares every call).
  RouteTable(const algorithms::SelectionMap& map, std::size_t trialFloor, bool settled);

  // The kind of the map's default choice for a `bytes` payload where it is
  // the backend's or shm's collective and nothing but the call's own asks
  // can change it; nullopt: the call chooses in full (prepare). The backend
  // and shm ranges are prefixes of the map; a payload past the backend's
  // that is still within the shm prefix answers kSharedMemory even where
  // native is chosen there, which routes it to kSmall or to the full choice.
  std::optional<algorithms::AlgorithmKind> settledKind(Collective coll, std::size_t bytes) const {
    if (!settled_ || bytes > trialFloor_) return std::nullopt;
    const Limits& l = limits_[static_cast<std::size_t>(coll)];
    if (l.backend && bytes <= l.backendUpTo) return algorithms::AlgorithmKind::kBackend;
    if (l.local && bytes <= l.localUpTo) return algorithms::AlgorithmKind::kSharedMemory;
    return std::nullopt;
  }
  // The largest payload up to which the map's default is the backend's own
  // collective; nullopt when it is not even at 0 bytes.
  std::optional<std::size_t> backendUpTo(Collective coll) const {
    const Limits& l = limits_[static_cast<std::size_t>(coll)];
    return l.backend ? std::optional<std::size_t>(l.backendUpTo) : std::nullopt;
  }

 private:
  struct Limits {
    bool backend = false;  // native is the default at 0 bytes ...
    std::size_t backendUpTo = 0;  // ... and up to here
    bool local = false;  // native or shm is the default at 0 bytes ...
    std::size_t localUpTo = 0;  // ... and up to here
  };
  std::array<Limits, kNumCollectives> limits_{};
  std::size_t trialFloor_ = 0;
  bool settled_ = false;
};

}  // namespace boostcomm::detail
