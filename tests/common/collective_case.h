// One collective call as a test case: build inputs for this rank, run it on a
// Communicator, check the result against the reference. Shared by the
// in-process unit tests and the mpirun tests, so both check the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "boostcomm/communicator.h"
#include "common/test_data.h"

namespace boostcomm::testing {

// The collectives as tests see them: allgatherv is its own case although it
// shares Collective::kAllgather (and its algorithms) with allgather.
enum class TestCollective { kAllreduce, kAllgather, kAllgatherv, kBroadcast, kReduceScatter, kBarrier };
inline constexpr TestCollective kAllTestCollectives[] = {
    TestCollective::kAllreduce, TestCollective::kAllgather,     TestCollective::kAllgatherv,
    TestCollective::kBroadcast, TestCollective::kReduceScatter, TestCollective::kBarrier};
inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                             DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                                             DataType::kUInt8};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kProd};

std::string_view toString(TestCollective coll);
Collective baseCollective(TestCollective coll);
bool isReducing(TestCollective coll);

struct CaseSpec {
  TestCollective coll = TestCollective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // reducing collectives only
  std::string algorithm;         // "" = the default selection
  // Elements: allreduce / broadcast: the buffer; allgather: per rank;
  // allgatherv: base of allgathervCounts(); reduce_scatter: per-rank block.
  std::size_t count = 0;
  int root = 0;  // broadcast only
  Pattern pattern = Pattern::kExact;
  bool inPlace = false;  // allreduce (send == recv) and allgather (send at rank offset of recv)
  bool async = false;    // run through *Async(...).wait()
  std::uint64_t seed = 1;
};

// gtest prints parameters with these (instead of raw bytes) in failure lines.
void PrintTo(TestCollective coll, std::ostream* os);

// "allreduce dtype=bfloat16 op=sum algo=ring count=7 ws=4 [in-place] [async]"
std::string describe(const CaseSpec& spec, int worldSize);

// Per-rank counts of an allgatherv case: varying, with some ranks sending 0.
std::vector<std::size_t> allgathervCounts(std::size_t base, int worldSize);

// True when a correct library must reject the case (avg on integer dtypes)
// with Error{kInvalidArgument} on every rank.
bool expectsInvalidArgument(const CaseSpec& spec);

struct CaseOutcome {
  std::string error;                  // "" when the rank's result was right
  std::vector<unsigned char> result;  // the rank's result bytes, for cross-rank comparison
  std::string algorithmUsed;          // Work::algorithm() of async cases
};

// Runs spec on this rank. With checkReference false the reference comparison
// is skipped (callers then compare the bytes with a rank that did check);
// reduce_scatter results differ per rank and are always checked.
// Buffers carry guard bytes on both sides; a write outside the buffer is an error.
CaseOutcome runCase(Communicator& comm, const CaseSpec& spec, bool checkReference = true);

// Whether every rank's result of this case must be bitwise identical.
bool resultsReplicated(const CaseSpec& spec);

// Cases of a sweep: for each algorithm (plus "" for the default), op (for
// reducing collectives), count and root (every root for broadcast).
std::vector<CaseSpec> sweepCases(TestCollective coll, DataType dtype, const std::vector<std::string>& algorithms,
                                 const std::vector<ReduceOp>& ops, const std::vector<std::size_t>& counts,
                                 int worldSize, bool everyRoot);

// "" plus every name in algorithms, without duplicates.
std::vector<std::string> withDefault(const std::vector<std::string>& algorithms);

}  // namespace boostcomm::testing

namespace boostcomm {
void PrintTo(DataType dtype, std::ostream* os);
void PrintTo(ReduceOp op, std::ostream* os);
}  // namespace boostcomm
