// Communicator constructors: PMPI unchanged, then
//  - created while the guard is active (by boostcomm itself): marked
//    internal, so that calls on it from boostcomm's progress thread bypass
//    the interposer too;
//  - created by the application: reserved for a set-up in the background,
//    here where every rank of it is (state.h, deferred_setup.h); and so is
//    MPI_COMM_WORLD in MPI_Init / MPI_Init_thread.
// Not intercepted (their communicators are set up at a first blocking call
// only): MPI_Comm_idup, MPI_Intercomm_merge, the topology constructors.
#include "interposer/state.h"

using namespace boostcomm::interposer;

namespace {
int marked(int rc, MPI_Comm* out) {
  if (rc != MPI_SUCCESS || out == nullptr) return rc;
  if (Guard::active()) markInternal(*out);
  else reserve(*out);
  return rc;
}
}  // namespace

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) reserve(MPI_COMM_WORLD);
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) reserve(MPI_COMM_WORLD);
  return rc;
}

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
