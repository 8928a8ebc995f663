// Reduction kernels: the arithmetic every reducing algorithm runs.
//
// out[i] = a[i] op b[i] for i < count. out may alias a or b exactly (not
// partially). kAvg reduces like kSum; the average is finished by divideBy()
// once, after the last reduction step, so every algorithm divides exactly once.
// float16/bfloat16 are widened to float32, combined, and rounded to nearest
// even once per call. Integer sum/prod wrap around (two's complement).
#pragma once

#include <cstddef>

#include "boostcomm/types.h"

namespace boostcomm::core {

void reduce(void* out, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op);

// buf[i] /= divisor, for floating-point dtypes (the kAvg finish).
void divideBy(void* buf, std::size_t count, DataType dtype, int divisor);

// Name of the instruction set the kernels dispatched to at run time
// (e.g. "avx512", "avx2", "sse2"), for bench output and docs.
const char* reduceKernelIsa();

}  // namespace boostcomm::core
