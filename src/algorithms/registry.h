// The algorithm registry: every builder, by collective and name.
//
// A builder is a pure function: (request seen from one rank) -> Schedule. It
// never touches memory or the network; the executor runs what it returns.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/spec.h"
#include "executor/schedule.h"

namespace boostcomm::algorithms {

struct AlgorithmInfo {
  const char* name;
  Collective collective;
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
bool isHierarchical(const AlgorithmInfo& algo);
// The collectives a wire format applies to (on float32 payloads): allreduce,
// allgather(v) and reduce_scatter, the ones some algorithm carries it for.
bool wireCollective(Collective collective);

}  // namespace boostcomm::algorithms
