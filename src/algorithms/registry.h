// The algorithm registry: every builder, by collective and name.
//
// A builder is a pure function: (request seen from one rank) -> Schedule. It
// never touches memory or the network; the executor runs what it returns.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

// How an algorithm moves its data; what the communicator routes a call by
// (api/route.h), so no caller compares builder pointers.
enum class AlgorithmKind : std::uint8_t {
  kBackend,        // the backend's own collective ("native")
  kSharedMemory,   // the shm engine's collective, one node ("shm")
  kPointToPoint,   // a schedule of sends, receives and reductions
  kHierarchical,   // point-to-point phases over the intra- and inter-node communicators
};

struct AlgorithmInfo {
  const char* name;
  Collective collective;
  AlgorithmKind kind;
  // Empty string when the algorithm can run `spec`, else the reason it cannot.
  std::string (*unsupportedReason)(const CollectiveSpec& spec);
  void (*build)(const CollectiveSpec& spec, executor::Schedule& schedule);
  const char* summary;
  // Applies CollectiveSpec::wire (16-bit messages on its links, or on the
  // inter-node links of a hierarchical one): ring, rhd and hier allreduce,
  // ring and hier allgather and reduce_scatter.
  bool carriesWire = false;
};

std::span<const AlgorithmInfo> allAlgorithms();
const AlgorithmInfo* findAlgorithm(Collective collective, std::string_view name);
// Names registered for a collective, native first.
std::vector<std::string> algorithmNames(Collective collective);

// Builders (one file each).
void buildNative(const CollectiveSpec& spec, executor::Schedule& schedule);
std::string nativeUnsupported(const CollectiveSpec& spec);
void buildAllreduceRing(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllreduceRhd(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllreduceRecursiveDoubling(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllgatherRing(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllgatherRecursiveDoubling(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildBroadcastBinomial(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildReduceScatterRing(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildShm(const CollectiveSpec& spec, executor::Schedule& schedule);
std::string shmUnsupported(const CollectiveSpec& spec);
void buildBarrierDissemination(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllreduceHier(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildBroadcastHier(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildAllgatherHier(const CollectiveSpec& spec, executor::Schedule& schedule);
void buildReduceScatterHier(const CollectiveSpec& spec, executor::Schedule& schedule);
// True for the hierarchical algorithms (they need the intra/inter communicators).
inline bool isHierarchical(const AlgorithmInfo& algo) { return algo.kind == AlgorithmKind::kHierarchical; }
// The collectives a wire format applies to (on float32 payloads): allreduce,
// allgather(v) and reduce_scatter, the ones some algorithm carries it for.
bool wireCollective(Collective collective);

}  // namespace boostcomm::algorithms
