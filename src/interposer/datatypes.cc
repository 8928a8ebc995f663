#include "interposer/datatypes.h"

#include <climits>
#include <stdexcept>

namespace boostcomm::interposer {

std::optional<DataType> reductionType(MPI_Datatype type) {
  // Fortran's MPI_REAL / MPI_INTEGER ... reach us through the Fortran
  // wrappers (fortran.cc) as their C handles.
  if (type == MPI_FLOAT || type == MPI_REAL4) return DataType::kFloat32;
  if (type == MPI_DOUBLE || type == MPI_REAL8 || type == MPI_DOUBLE_PRECISION) return DataType::kFloat64;
  if (type == MPI_INT || type == MPI_INT32_T || type == MPI_INTEGER4) return DataType::kInt32;
  if (type == MPI_LONG_LONG || type == MPI_INT64_T || type == MPI_INTEGER8) return DataType::kInt64;
  if (type == MPI_LONG) return sizeof(long) == 8 ? std::optional(DataType::kInt64) : std::optional(DataType::kInt32);
  if (type == MPI_UNSIGNED_CHAR || type == MPI_UINT8_T) return DataType::kUInt8;  // min/max only: see below
  // MPI_REAL and MPI_INTEGER follow the Fortran compiler's default kinds.
  if (type == MPI_REAL || type == MPI_INTEGER) {
    int size = 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return std::nullopt;
    if (type == MPI_REAL) return size == 4 ? std::optional(DataType::kFloat32) : std::nullopt;
    if (size == 4) return DataType::kInt32;
    if (size == 8) return DataType::kInt64;
  }
  return std::nullopt;
}

bool reducesAlike(DataType dtype, ReduceOp op) {
  // Open MPI 4.1's op/avx component sums and multiplies 8-bit integers with
  // saturating vector instructions (open-mpi/ompi#8045, "wontfix"): 250 + 255
  // gives 255 where boostcomm, like C, wraps to 249. Routing would change the
  // result a program gets, so those pairs stay with MPI.
  return !(dtype == DataType::kUInt8 && (op == ReduceOp::kSum || op == ReduceOp::kProd));
}

std::optional<ReduceOp> reductionOp(MPI_Op op) {
  if (op == MPI_SUM) return ReduceOp::kSum;
  if (op == MPI_MAX) return ReduceOp::kMax;
  if (op == MPI_MIN) return ReduceOp::kMin;
  if (op == MPI_PROD) return ReduceOp::kProd;
  return std::nullopt;
}

namespace {

// Named types whose elements are contiguous in memory: the common ones by
// handle (no MPI call on the hot path), the rest by asking MPI.
bool namedContiguous(MPI_Datatype type, int size) {
  if (type == MPI_BYTE || type == MPI_CHAR || type == MPI_UNSIGNED_CHAR || type == MPI_SIGNED_CHAR ||
      type == MPI_FLOAT || type == MPI_DOUBLE || type == MPI_INT || type == MPI_LONG || type == MPI_LONG_LONG ||
      type == MPI_UNSIGNED || type == MPI_INT32_T || type == MPI_INT64_T || type == MPI_UINT8_T) {
    return true;
  }
  int integers = 0, addresses = 0, types = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS) return false;
  if (combiner != MPI_COMBINER_NAMED) return false;
  // Named pair types (MPI_SHORT_INT ...) can have padding between elements.
  MPI_Aint lb = 0, extent = 0, trueLb = 0, trueExtent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &trueLb, &trueExtent);
  return lb == 0 && trueLb == 0 && extent == size && trueExtent == size;
}

}  // namespace

bool byteLayout(MPI_Datatype type, int count, ByteLayout& out) {
  if (count < 0 || type == MPI_DATATYPE_NULL) return false;
  int size = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return false;
  MPI_Aint lb = 0, extent = 0;
  if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS) return false;
  out.direct = namedContiguous(type, size);
  out.bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(size);
  out.extent = static_cast<std::ptrdiff_t>(extent);
  return true;
}

// An empty payload moves nothing, and Open MPI 4.1 rejects a null buffer with
// MPI_ERR_ARG even for zero bytes (the data() of an empty staging vector).
void packBytes(const void* buf, int count, MPI_Datatype type, void* out, std::size_t bytes, MPI_Comm comm) {
  if (bytes == 0) return;
  if (bytes > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("derived datatype payload above INT_MAX bytes");
  int position = 0;
  if (PMPI_Pack(buf, count, type, out, static_cast<int>(bytes), &position, comm) != MPI_SUCCESS ||
      static_cast<std::size_t>(position) != bytes) {
    throw std::runtime_error("PMPI_Pack did not produce the type's size in bytes");
  }
}

void unpackBytes(const void* in, std::size_t bytes, void* buf, int count, MPI_Datatype type, MPI_Comm comm) {
  if (bytes == 0) return;
  if (bytes > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("derived datatype payload above INT_MAX bytes");
  int position = 0;
  if (PMPI_Unpack(in, static_cast<int>(bytes), &position, buf, count, type, comm) != MPI_SUCCESS ||
      static_cast<std::size_t>(position) != bytes) {
    throw std::runtime_error("PMPI_Unpack did not consume the type's size in bytes");
  }
}

}  // namespace boostcomm::interposer
