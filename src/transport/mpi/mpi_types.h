// MPI handles for boostcomm's element types and reduction operations.
//
// float16 and bfloat16 have no MPI type, so we create two committed 2-byte
// datatypes and one commutative user MPI_Op per ReduceOp whose callback runs
// core::reduce (the callback derives the dtype from the MPI_Datatype it gets;
// the same ops serve pairs MPI gets wrong, see mpiOp()). These, plus the block type used to send messages larger than
// INT_MAX bytes, are created once per process on first use (thread-safe) and
// freed inside MPI_Finalize by a delete callback on an MPI_COMM_SELF attribute,
// so cleanup happens whether boostcomm or the application finalizes MPI.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <cstddef>

#include "boostcomm/types.h"

namespace boostcomm::transport::mpi {

// Messages above INT_MAX bytes are sent as (bytes / kBlockBytes) blocks of this
// contiguous type plus a remainder of MPI_BYTE.
inline constexpr std::size_t kBlockBytes = std::size_t{1} << 20;

MPI_Datatype mpiDataType(DataType dtype);
// The MPI_Op reducing dtype with op: a predefined op when MPI supports the pair,
// else one of our user ops. kAvg is rejected (callers reduce with kSum).
MPI_Op mpiOp(DataType dtype, ReduceOp op);
// Committed contiguous type of kBlockBytes bytes.
MPI_Datatype mpiBlockType();

}  // namespace boostcomm::transport::mpi
