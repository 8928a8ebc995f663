// MPI datatypes and ops as boostcomm sees them.
//
// Reductions (allreduce, reduce_scatter): MPI requires the same count,
// datatype and op on every rank, so "this type/op is one boostcomm reduces"
// is the same answer everywhere and may decide routing.
// Data movement (bcast, allgather[v]): ranks may describe the same type
// signature with different datatypes (4 x MPI_FLOAT here, one contiguous
// derived type there), so the datatype must NOT decide routing. These calls
// move bytes: a named contiguous type is used in place, any other type is
// packed (PMPI_Pack) into a staging buffer and unpacked after; the byte
// counts agree across ranks because the type signatures do.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstddef>
#include <optional>

#include "boostcomm/types.h"

namespace boostcomm::interposer {

// The boostcomm type that reduces exactly like MPI reduces `type`, if any.
std::optional<DataType> reductionType(MPI_Datatype type);
std::optional<ReduceOp> reductionOp(MPI_Op op);
// False for pairs where MPI's own answer differs from the exact one (so
// routing would change results): they fall through with Reason::kDatatype.
bool reducesAlike(DataType dtype, ReduceOp op);

// How `count` elements of `type` lie in memory, as bytes.
struct ByteLayout {
  bool direct = false;        // one contiguous run of `bytes` in type-map order at buf
  std::size_t bytes = 0;      // packed size (count * MPI_Type_size)
  std::ptrdiff_t extent = 0;  // of one element (displacements in allgatherv count in it); may be 0 or negative
};
// False for an invalid type or negative count (PMPI then reports it).
bool byteLayout(MPI_Datatype type, int count, ByteLayout& out);

// PMPI_Pack / PMPI_Unpack of count elements into or out of exactly `bytes`
// (nothing at all for 0 bytes).
void packBytes(const void* buf, int count, MPI_Datatype type, void* out, std::size_t bytes, MPI_Comm comm);
void unpackBytes(const void* in, std::size_t bytes, void* buf, int count, MPI_Datatype type, MPI_Comm comm);

}  // namespace boostcomm::interposer
