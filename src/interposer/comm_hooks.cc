// Communicator constructors: PMPI unchanged, and a communicator created while
// the guard is active (by boostcomm itself) is marked internal, so that calls
// on it from boostcomm's progress thread bypass the interposer too.
#include "interposer/state.h"

using namespace boostcomm::interposer;

namespace {
int marked(int rc, MPI_Comm* out) {
  if (rc == MPI_SUCCESS && out != nullptr && Guard::active()) markInternal(*out);
  return rc;
}
}  // namespace

extern "C" {

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) { return marked(PMPI_Comm_dup(comm, newcomm), newcomm); }

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  return marked(PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return marked(PMPI_Comm_split(comm, color, key, newcomm), newcomm);
}

int MPI_Comm_split_type(MPI_Comm comm, int splitType, int key, MPI_Info info, MPI_Comm* newcomm) {
  return marked(PMPI_Comm_split_type(comm, splitType, key, info, newcomm), newcomm);
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return marked(PMPI_Comm_create(comm, group, newcomm), newcomm);
}

int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return marked(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm);
}

}  // extern "C"
