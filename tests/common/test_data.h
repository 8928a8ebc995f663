// Test data for collective tests: input patterns, an independent reference
// reduction and the tolerance rules (see docs/TESTING.md).
//
// Terms used here:
//   pattern  - how input element values are chosen (kExact or kRandom).
//   element  - one value of the collective's dtype; `index` is its position
//              in the rank's *send* buffer (for reduce_scatter the whole
//              size * count send buffer).
//
// The conversions to float16 / bfloat16 are written here on purpose instead of
// reusing src/core/half.h: a reference that shares code with the library
// cannot catch a bug in that code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "boostcomm/types.h"

namespace boostcomm::testing {

// kExact: values chosen so that every partial result of every reduction order
//   is exactly representable in the dtype (small integers / quarters for
//   sum, bounded powers of two for prod). Results must match the float64
//   reference exactly, except avg, whose one final division rounds once.
// kRandom: uniform values in [-1, 1] rounded to the dtype; sums are checked
//   against the float64 reference with the rounding-error bound of
//   toleranceFor().
enum class Pattern { kExact, kRandom };

// Unit roundoff of a floating dtype: 2^-53 float64, 2^-24 float32,
// 2^-11 float16, 2^-8 bfloat16. 0 for integer types.
double unitRoundoff(DataType dtype);

// Encode / decode one element. Integer dtypes go through int64 (uint8 as
// 0..255); floating dtypes through double (rounded to nearest even).
void storeDouble(void* base, std::size_t index, DataType dtype, double value);
double loadDouble(const void* base, std::size_t index, DataType dtype);
void storeInt(void* base, std::size_t index, DataType dtype, std::int64_t value);
std::int64_t loadInt(const void* base, std::size_t index, DataType dtype);

// float <-> binary16 / bfloat16 bit patterns, round to nearest even.
std::uint16_t toHalfBits(float value);
float fromHalfBits(std::uint16_t bits);
std::uint16_t toBFloat16Bits(float value);
float fromBFloat16Bits(std::uint16_t bits);

// splitmix64 of (seed, rank, index): the source of every pseudo-random input.
std::uint64_t mix(std::uint64_t seed, std::uint64_t rank, std::uint64_t index);

// Input value of element `index` on `rank` for a reduction with `op`.
// Floating dtypes only (see inputInt for integers).
double inputFloat(DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed, int rank, std::size_t index);
// Integer dtypes: full-range values where wraparound is part of the test.
std::int64_t inputInt(DataType dtype, ReduceOp op, std::uint64_t seed, int rank, std::size_t index);

// Writes elements [first, first + count) of rank's reduction input into
// dst[0 .. count).
void fillReduceInput(void* dst, DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed, int rank,
                     std::size_t first, std::size_t count);

// Raw pseudo-random bytes for data-movement collectives (allgather,
// broadcast): any bit pattern, NaNs included, must arrive unchanged.
void fillBytes(void* dst, std::size_t bytes, std::uint64_t seed, int rank);

// Compares got[0 .. count) with the reduction over `worldSize` ranks of
// elements [first, first + count). Returns "" or a description of the first
// few mismatches (element, got, expected, tolerance).
std::string checkReduction(const void* got, DataType dtype, ReduceOp op, Pattern pattern, std::uint64_t seed,
                           int worldSize, std::size_t first, std::size_t count);

// First mismatching byte of two buffers, described; "" when equal.
std::string compareBytes(const void* got, const void* expected, std::size_t bytes, std::size_t elemBytes);

// Segment-list test shapes: `segments` lengths cycling through 0, 1, odd
// and prime values, every third one multiplied by `scale`.
std::vector<std::size_t> listShape(std::size_t segments, std::size_t scale);

// FNV-1a of a byte range: cheap cross-rank identity check under MPI.
std::uint64_t hashBytes(const void* data, std::size_t bytes);

}  // namespace boostcomm::testing
