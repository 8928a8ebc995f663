#include "transport/mpi/mpi_errors.h"

#include "core/check.h"
#include "transport/transport.h"

namespace boostcomm::transport::mpi {

std::string mpiErrorText(int rc) {
  // MPI_Error_string and MPI_Error_class are callable before MPI_Init and after
  // MPI_Finalize, so this never needs its own error path.
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  std::string out;
  if (MPI_Error_string(rc, text, &length) == MPI_SUCCESS) {
    out.assign(text, static_cast<std::size_t>(length));
  } else {
    out = "unknown MPI error";
  }
  int errorClass = rc;
  if (MPI_Error_class(rc, &errorClass) == MPI_SUCCESS && errorClass != rc) {
    char classText[MPI_MAX_ERROR_STRING] = {};
    int classLength = 0;
    if (MPI_Error_string(errorClass, classText, &classLength) == MPI_SUCCESS) {
      out += " (class: ";
      out.append(classText, static_cast<std::size_t>(classLength));
      out += ")";
    }
  }
  out += " [code " + std::to_string(rc) + "]";
  return out;
}

void raiseMpiError(int rc, const char* call, int rank) {
  const std::string message = std::string(call) + " failed: " + mpiErrorText(rc);
  int errorClass = rc;
  if (MPI_Error_class(rc, &errorClass) == MPI_SUCCESS && errorClass == MPI_ERR_TRUNCATE) {
    throw TruncationError(ErrorCategory::kTransport, rank, message);
  }
  core::raise(ErrorCategory::kTransport, rank, message);
}

}  // namespace boostcomm::transport::mpi
