// The one place where MPI return codes become boostcomm errors.
//
// Every MPI call in boostcomm goes through checkMpi(): the communicators we own
// use MPI_ERRORS_RETURN, so a failure comes back as a code and is thrown as
// Error{kTransport} carrying MPI's own text and the name of the call.
#pragma once

#include "transport/mpi/mpi_c.h"

#include <string>

namespace boostcomm::transport::mpi {

// MPI_Error_string text for rc, with its error class when that differs.
std::string mpiErrorText(int rc);

[[noreturn]] void raiseMpiError(int rc, const char* call, int rank);

// rank: the caller's rank in the communicator involved (-1 when not known).
inline void checkMpi(int rc, const char* call, int rank) {
  if (rc != MPI_SUCCESS) raiseMpiError(rc, call, rank);
}

}  // namespace boostcomm::transport::mpi
