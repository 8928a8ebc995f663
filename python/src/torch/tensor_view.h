// at::Tensor -> boostcomm view (no copy) and c10d ReduceOp -> ReduceOp.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "boostcomm/buffer.h"
#include "boostcomm/communicator.h"
#include "boostcomm/types.h"

namespace boostcomm::python {

// The tensor's memory as a view. Errors (TORCH_CHECK, so Python sees a
// RuntimeError naming the argument `what` and this process's `rank` in the
// group): not on the CPU, not contiguous, or a dtype outside
// float32/float64/float16/bfloat16/int32/int64/uint8.
View viewOf(const at::Tensor& tensor, const char* what, int rank);
// For ops that only move data (broadcast, allgather, gather, scatter,
// send / recv): any dtype, as its bytes (a uint8 view) when it is not one
// of the above (int8, int16, bool, complex ...). Same device and layout checks.
View bytesOf(const at::Tensor& tensor, const char* what, int rank);
// Any dtype as its raw bytes (a uint8 view of nbytes): for list collectives
// that only move data, so tensors of different dtypes can share one list.
View rawBytesOf(const at::Tensor& tensor, const char* what, int rank);
// Options of the ops that run on an allgather but must move values exactly
// whatever the group's wire format (set_wire): gather, the list all_gather
// and alltoall. all_gather_into_tensor (FSDP's parameters, DTensor) and the
// reduce-scatters carry the wire as allreduce does.
inline CallOptions exactValues() {
  CallOptions options;
  options.wire = WireFormat::kOff;
  return options;
}
// Whether the memory of a and b overlaps (an in-place use of an op).
bool overlaps(const at::Tensor& a, const at::Tensor& b);
DataType dataTypeOf(at::ScalarType type, const char* what, int rank);
// PREMUL_SUM maps to kSum: its factor is applied to the input first
// (premultiplied / premultiplyInPlace), as NCCL multiplies before it sums.
ReduceOp reduceOpOf(const c10d::ReduceOp& op, int rank);
// PREMUL_SUM: input * factor in the input's dtype (a new tensor); any other
// op: the input itself. For ops whose input must stay as the caller left it.
// A non-floating tensor is an error naming the rank. Call after the
// tensor's other checks, so a rejected call leaves it untouched.
at::Tensor premultiplied(const at::Tensor& input, const c10d::ReduceOp& op, int rank);
// PREMUL_SUM: tensor *= factor (for in-place ops: allreduce, reduce).
void premultiplyInPlace(const at::Tensor& tensor, const c10d::ReduceOp& op, int rank);

}  // namespace boostcomm::python
