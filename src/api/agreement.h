// Cross-rank agreement: every rank's words gathered and compared, so that
// ranks that differ fail together, naming each other, instead of hanging or
// computing with different settings. Below the Communicator, over the
// transport: gatherWords (the first call's configuration, the consistency
// check, the wire format, registered buffers' sizes); above it, over the
// Communicator: agreeAcrossRanks, the check every multi-tensor entry
// (allreduceMany, the *Many lists, GradientGroup, CollectiveFusion, the
// overlap engine's buckets) makes once before its first collective.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "boostcomm/communicator.h"

namespace boostcomm::transport {
class Transport;
}

namespace boostcomm::detail {

// Collective. Every rank's `fields` (> 0) words, rank r's at [r * fields,
// (r + 1) * fields), through the backend's blocking allgather.
std::vector<long long> gatherWords(transport::Transport& transport, const long long* mine, int fields);
// The same through the backend's nonblocking allgather, polled until it
// completes or `deadline` (none: no limit) has passed: then nullopt (the
// posted call cannot be cancelled: the caller's communicator is done). Every
// rank must use this form for the exchange (MPI does not match a blocking
// collective with a nonblocking one).
std::optional<std::vector<long long>> gatherWordsPosted(transport::Transport& transport, const long long* mine,
                                                        int fields, std::optional<std::chrono::milliseconds> deadline);
// The first rank whose `fields` (> 0) words in `all` (gatherWords) differ
// from `mine`, or -1 when every rank's are the same.
int firstDifferentRank(const std::vector<long long>& all, const long long* mine, int fields);

// Collective. Every rank contributes a signature of its input (core/hash.h)
// and its local error ("" when none). Throws on every rank when any rank had a
// local error (that rank with kInvalidArgument and its message, the others
// with kInvalidArgument naming it) or when signatures differ (kMismatch naming
// the ranks that differ from rank 0). `what` names the caller ("GradientGroup").
void agreeAcrossRanks(Communicator& comm, std::uint64_t signature, const std::string& localError, const char* what);

}  // namespace boostcomm::detail
