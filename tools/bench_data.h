// Deterministic bench inputs and the float64/int64 reference that checks the
// results (see docs/BENCH_JSON.md, "Result check").
//
// Input element i of rank r is a small integer v(r, i) derived from a hash of
// (r, i), so no two ranks and no nearby indices share a pattern a misplaced
// chunk could hide behind:
//   sum/avg/min/max: v in [-5, 5]  (uint8: [0, 10])
//   prod:            v in {-1, 1}  (uint8: {255, 1}, i.e. -1 mod 256)
// Sums of such values are exact in every float type for realistic rank
// counts (|sum| <= 5 * ranks; bfloat16 is exact up to 256, float16 to 2048),
// products never overflow, and integer types wrap exactly like the reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "boostcomm/types.h"

namespace boostcomm::tools {

std::int64_t inputValue(ReduceOp op, DataType dtype, int rank, std::size_t index);

// buf[j] = v(rank, firstIndex + j) for j < count, in dtype.
void fillInput(void* buf, std::size_t count, DataType dtype, ReduceOp op, int rank, std::size_t firstIndex);

// Fill with a value no correct result holds (NaN for floats, the type's max
// for integers), so a collective that writes nothing cannot pass the check.
void fillSentinel(void* buf, std::size_t count, DataType dtype);

// What this rank's result buffer must hold after one call.
struct Expectation {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int ranks = 1;
  int rank = 0;
  int root = 0;
  std::size_t countPerRank = 0;  // allgather/reduce_scatter; else the whole count
  // Unit roundoff of a 16-bit wire format the data crossed (0: float32 wire);
  // the tolerance uses the larger of it and the dtype's.
  double wireRoundoff = 0;
};

// Compares `count` elements of buf with the reference. Everything must match
// exactly except float avg (within 2u * |ref|, u = unit roundoff of dtype)
// and float sums too large to be exact (sum_r |v| > 1/u; then within
// (ranks + 1) * u * sum_r |v|). Returns the number of mismatches and prints
// the first few to stderr, naming rank and algorithm.
std::size_t verifyResult(const void* buf, std::size_t count, const Expectation& expect, const char* algorithm);

}  // namespace boostcomm::tools
