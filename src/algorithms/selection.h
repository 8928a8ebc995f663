// Algorithm selection: a table per collective of byte ranges -> algorithm.
//
// The built-in table (docs/ALGORITHMS.md gives the measurements behind it)
// can be replaced per collective with BOOSTCOMM_SELECTION, and bypassed per
// collective with BOOSTCOMM_ALGO or per call with CallOptions::algorithm.
// Every rank must see the same settings: the choice depends only on the
// collective, the payload size and the settings.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::algorithms {

// The upper end of an open byte range ([lo, kOpenEnd]: every size from lo).
inline constexpr std::size_t kOpenEnd = std::numeric_limits<std::size_t>::max();

struct SelectionRule {
  std::size_t minBytes = 0;
  std::size_t maxBytes = kOpenEnd;  // inclusive
  std::string algorithm;
  const struct AlgorithmInfo* resolved = nullptr;  // registry entry of `algorithm`, set by the table
};

class SelectionTable {
 public:
  // sharedMemory: the communicator has a shared-memory engine (one node), so
  // the "shm" algorithms can run and the table uses them where they win.
  // transport: Transport::name() ("mpi", "gloo"), whose natives the table
  // weighs shm against.
  static SelectionTable builtIn(bool sharedMemory = false, std::string_view transport = "mpi");
  // "allreduce:0-65535=native;65536-=ring|broadcast:0-=binomial" — collectives
  // separated by '|', rules by ';'. Throws kInvalidArgument naming the bad part.
  void applyOverride(std::string_view text);
  const std::vector<SelectionRule>& rules(Collective coll) const;
  std::string describe() const;

 private:
  void resolve();
  std::array<std::vector<SelectionRule>, kNumCollectives> rules_;
};

// BOOSTCOMM_ALGO: "allreduce:ring,broadcast:binomial", or a bare name applied
// to every collective that has an algorithm of that name. Unknown names throw
// kInvalidArgument listing the valid ones. Empty entries mean "no override".
std::array<std::string, kNumCollectives> parseAlgoOverride(std::string_view text);

}  // namespace boostcomm::algorithms
