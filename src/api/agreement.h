// Cross-rank agreement on a driver's input: the check every multi-tensor entry
// (allreduceMany, the *Many lists, GradientGroup, CollectiveFusion, the
// overlap engine's buckets) makes once before its first collective.
#pragma once

#include <cstdint>
#include <string>

#include "boostcomm/communicator.h"

namespace boostcomm::detail {

// Collective. Every rank contributes a signature of its input (core/hash.h)
// and its local error ("" when none). Throws on every rank when any rank had a
// local error (that rank with kInvalidArgument and its message, the others
// with kInvalidArgument naming it) or when signatures differ (kMismatch naming
// the ranks that differ from rank 0). `what` names the caller ("GradientGroup").
void agreeAcrossRanks(Communicator& comm, std::uint64_t signature, const std::string& localError, const char* what);

}  // namespace boostcomm::detail
