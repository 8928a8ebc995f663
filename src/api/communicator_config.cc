// CommunicatorImpl::agreeOnConfiguration (declared in communicator_impl.h):
// the settings that steer which algorithm a call runs, compared across ranks
// at the first collective call; and checkConsistency, the optional exchange
// of every call's fingerprint (BOOSTCOMM_CHECK_CONSISTENCY).
//
// Why: every rank picks its algorithm locally from the same settings. A rank
// started with another BOOSTCOMM_ALGO, strategy, selection table, chunk size,
// tuning cache or wire format runs a different schedule for the same call
// (ring on one rank, the backend's allreduce on the other): the fingerprints
// agree, so nothing names the cause, and the job hangs until the deadline or
// mixes a nonblocking with a blocking backend call. One small allgather at
// the first call (of words: one hash per setting) turns that into
// Error{kMismatch} on every rank naming the variable and both values. A
// second exchange, only when they differ, carries the values' text.
//
// Processes only: an async first call waits here until every rank made its
// first call (MPI ranks issue collectives in one order, so they all come).
//
// Compared as the ranks see them: the parsed value where two spellings mean
// one thing (strategy), "set"/"unset" where only rank 0's value is used
// (BOOSTCOMM_TUNING_CACHE: rank 0 reads the file and broadcasts it) or where
// only presence matters (BOOSTCOMM_TIMEOUT_MS: an explicit deadline makes
// native calls nonblocking; its value may differ per rank).
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/agreement.h"
#include "api/communicator_impl.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/tunables.h"

namespace boostcomm::detail {
namespace {

// Text of a value in the second exchange: enough to recognise it.
constexpr std::size_t kValueWords = 8;
constexpr std::size_t kValueChars = kValueWords * sizeof(long long) - 1;
// The settings exchange's timeout (gatherWithin).
constexpr const char* kSetupWhat = "the first call's setup";
constexpr const char* kSetupWhy =
    "every rank exchanges its settings at its first collective call, and some rank has not made one (or has stopped)";

std::string strategyName(Strategy s) {
  return s == Strategy::kFlat ? "flat" : s == Strategy::kTopologyAware ? "topology_aware" : "auto";
}

std::string quoted(const std::string& value) { return value.empty() ? "unset" : "'" + value + "'"; }

}  // namespace

std::vector<std::pair<const char*, std::string>> CommunicatorImpl::configurationItems() const {
  using namespace core;
  auto text = [](TunableKey key) { return tunableIsSet(key) ? tunableValue(key) : std::string(); };
  return {
      {kTunableAlgo, text(kTunableAlgo)},
      {kTunableSelectionTable, text(kTunableSelectionTable)},
      {kTunableStrategy, strategyName(strategy_)},
      {kTunableHierMinBytes, std::to_string(hierMinBytes_)},
      {kTunableHierIntraAlgo, intraAlgorithm_},
      {kTunableHierInterAlgo, interAlgorithm_},
      {kTunableRingChunkBytes, std::to_string(tunableInt(kTunableRingChunkBytes))},
      {kTunableMaxChunksPerSegment, std::to_string(maxChunks_)},
      {kTunableCheckConsistency, checkConsistency_ ? "1" : "0"},
      {kTunableWireDtype, std::string(tunableEnum(kTunableWireDtype))},
      {kTunableTuningCache, tunableString(kTunableTuningCache).empty() ? "" : "set"},
      {kTunableTuningModel, tunableBool(kTunableTuningModel) ? "1" : "0"},
      {kTunableSelectionTrials, tunableBool(kTunableSelectionTrials) ? "1" : "0"},
      {kTunableLinkProbe, tunableBool(kTunableLinkProbe) ? "1" : "0"},
      {kTunableTimeoutMs, explicitTimeout_ ? "set" : ""},
      {kTunableRanksPerNode, text(kTunableRanksPerNode)},
      {kTunableNodeLayout, text(kTunableNodeLayout)},
      {kTunableShm, tunableBool(kTunableShm) ? "1" : "0"},
      {kTunableShmCma, tunableBool(kTunableShmCma) ? "1" : "0"},
      {kTunableShmChunkBytes, std::to_string(tunableInt(kTunableShmChunkBytes))},
      {kTunableShmSlotBytes, std::to_string(tunableInt(kTunableShmSlotBytes))},
      // What travels on the wire and which path a small allreduce takes:
      // ranks that differ would wait on different paths without a mismatch.
      // The effective limit (auto or set), so equal limits reached either way agree.
      {kTunableShmSmallBytes, std::to_string(smallAllreduceBytes_)},
      {kTunableFingerprints, record_.fingerprints() ? "1" : "0"},
      // How the MPI transport cuts messages between nodes: both sides must cut alike.
      {kTunableMpiPieceBytes, std::to_string(tunableInt(kTunableMpiPieceBytes))},
  };
}

std::vector<long long> CommunicatorImpl::gatherWithin(const long long* mine, int fields,
                                                      std::optional<std::chrono::milliseconds> deadline,
                                                      const char* what, const char* why) {
  std::optional<std::vector<long long>> all = gatherWordsPosted(*transport_, mine, fields, deadline);
  if (all) return std::move(*all);
  // The posted collective cannot be cancelled: the communicator is done.
  const Error timeout(ErrorCategory::kTimeout, rank_,
                      std::string(what) + " hit its timeout after " + std::to_string(deadline->count()) + " ms: " + why);
  engine_->fail(std::make_exception_ptr(timeout));
  throw timeout;
}

void CommunicatorImpl::agreeOnConfiguration(std::optional<std::chrono::milliseconds> deadline) {
  // Ranks that are threads of one process (the in-process transport of the
  // tests) read one environment: nothing to compare, and their first calls
  // may come from one thread (rank 0's async call, then rank 1's), which an
  // exchange here would deadlock.
  if (size_ < 2 || transport_->name() == "inproc") {
    configAgreementPending_ = false;
    rebuildSelection();
    return;
  }
  const auto items = configurationItems();
  const int fields = static_cast<int>(items.size());
  std::vector<long long> mine(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) mine[i] = static_cast<long long>(core::fnv1a(items[i].second));
  const std::vector<long long> all = gatherWithin(mine.data(), fields, deadline, kSetupWhat, kSetupWhy);
  // The first setting on which some rank differs from rank 0: every rank
  // sees the same words, so every rank picks the same one.
  int differing = -1;
  for (int i = 0; i < fields && differing < 0; ++i) {
    for (int r = 1; r < size_; ++r) {
      if (all[static_cast<std::size_t>(r * fields + i)] != all[static_cast<std::size_t>(i)]) {
        differing = i;
        break;
      }
    }
  }
  if (differing < 0) {
    configAgreementPending_ = false;
    rebuildSelection();  // the route table settled no call until now
    return;
  }
  // Still pending: every later call exchanges again and fails alike.
  const auto& [name, value] = items[static_cast<std::size_t>(differing)];
  std::array<long long, kValueWords> text{};
  std::memcpy(text.data(), value.data(), std::min(value.size(), kValueChars));
  const std::vector<long long> texts = gatherWithin(text.data(), static_cast<int>(kValueWords), deadline, kSetupWhat, kSetupWhy);
  const long long myHash = mine[static_cast<std::size_t>(differing)];
  int other = 0;
  for (int r = 0; r < size_; ++r) {
    if (all[static_cast<std::size_t>(r * fields + differing)] != myHash) {
      other = r;
      break;
    }
  }
  char theirs[kValueChars + 1] = {};
  std::memcpy(theirs, texts.data() + static_cast<std::ptrdiff_t>(other) * kValueWords, kValueChars);
  const bool wire = std::strcmp(name, core::kTunableWireDtype) == 0;
  BC_CHECK(false, ErrorCategory::kMismatch, rank_,
           "ranks are configured differently: rank " << rank_ << " has " << name << " " << quoted(value) << ", rank "
               << other << " has " << name << " " << quoted(theirs)
               << (wire ? " (ranks disagree on the wire format)" : "")
               << "; every rank must run with the same settings that steer algorithm selection "
                  "(docs/RELIABILITY.md)");
}

void CommunicatorImpl::checkConsistency(const algorithms::CollectiveSpec& spec) {
  // Every rank's fingerprint and wire format, compared everywhere: a mismatch
  // becomes an error on all ranks instead of a hang (the full-exchange mode;
  // the always-on checks are the shm descriptors and the stall inspector).
  constexpr int kFields = 3;
  const core::Fingerprint f = fingerprintOf(spec);
  const long long mine[kFields] = {static_cast<long long>(f.word()), static_cast<long long>(f.count),
                                   static_cast<long long>(spec.wire)};
  // The exchange is a blocking backend call: finish earlier asynchronous
  // work first, as before any blocking call (a peer may be waiting in
  // Work::wait for our part of it, and we could not progress it from inside).
  engine_->drain(deadlineFor({}), "consistency check", rank_);
  const std::vector<long long> all = gatherWords(*transport_, mine, kFields);
  const int r = firstDifferentRank(all, mine, kFields);
  if (r < 0) return;
  const long long* at = all.data() + static_cast<std::ptrdiff_t>(kFields * r);
  const core::Fingerprint theirs =
      core::Fingerprint::fromWord(static_cast<std::uint64_t>(at[0]), static_cast<std::uint64_t>(at[1]));
  BC_CHECK(theirs == f, ErrorCategory::kMismatch, rank_, core::describeMismatch(rank_, f, r, theirs, sequence_));
  BC_CHECK(at[2] == mine[2], ErrorCategory::kMismatch, rank_,
           "rank " << rank_ << ": " << core::describe(f) << " wire " << toString(spec.wire) << ", seq " << sequence_
                   << "; rank " << r << ": wire " << toString(static_cast<WireFormat>(at[2]))
                   << " (ranks disagree on the wire format: BOOSTCOMM_WIRE_DTYPE or CallOptions::wire)");
}

}  // namespace boostcomm::detail
