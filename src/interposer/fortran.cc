// Fortran bindings. Open MPI 4.1's Fortran wrappers (libmpi_mpifh: mpif.h and
// `use mpi`; libmpi_usempif08 reaches the same code as ompi_<name>_f) convert
// the handles and call PMPI_<Name> directly (nm -D libmpi_mpifh.so: "U
// PMPI_Allreduce", no MPI_Allreduce), so a C-level MPI_Allreduce never sees a
// Fortran program's calls. We therefore define the Fortran entry points as
// well: every spelling Open MPI exports (mpi_allreduce_, mpi_allreduce,
// mpi_allreduce__, MPI_ALLREDUCE) and ompi_allreduce_f for `use mpi_f08`.
// Each converts its handles like Open MPI's own wrapper and calls our C
// entry point, which routes or falls through.
#include "transport/mpi/mpi_c.h"

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are addresses of these common blocks
// (defined in libmpi.so), as Open MPI's OMPI_F2C_IN_PLACE / OMPI_F2C_BOTTOM test.
extern "C" int mpi_fortran_in_place_;
extern "C" int mpi_fortran_bottom_;

namespace {

const void* inPlace(const void* buf) {
  if (buf == static_cast<const void*>(&mpi_fortran_in_place_)) return MPI_IN_PLACE;
  if (buf == static_cast<const void*>(&mpi_fortran_bottom_)) return MPI_BOTTOM;
  return buf;
}
void* bottom(void* buf) { return buf == static_cast<void*>(&mpi_fortran_bottom_) ? MPI_BOTTOM : buf; }
void setError(MPI_Fint* ierr, int rc) {
  if (ierr != nullptr) *ierr = static_cast<MPI_Fint>(rc);
}

void allreduceF(const void* send, void* recv, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* op,
                const MPI_Fint* comm, MPI_Fint* ierr) {
  setError(ierr, MPI_Allreduce(inPlace(send), bottom(recv), static_cast<int>(*count), PMPI_Type_f2c(*type),
                               PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}
void bcastF(void* buf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* root, const MPI_Fint* comm,
            MPI_Fint* ierr) {
  setError(ierr, MPI_Bcast(bottom(buf), static_cast<int>(*count), PMPI_Type_f2c(*type), static_cast<int>(*root),
                           PMPI_Comm_f2c(*comm)));
}
void allgatherF(const void* send, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recv,
                const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  setError(ierr, MPI_Allgather(inPlace(send), static_cast<int>(*sendcount), PMPI_Type_f2c(*sendtype), bottom(recv),
                               static_cast<int>(*recvcount), PMPI_Type_f2c(*recvtype), PMPI_Comm_f2c(*comm)));
}
void reduceScatterBlockF(const void* send, void* recv, const MPI_Fint* recvcount, const MPI_Fint* type,
                         const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  setError(ierr, MPI_Reduce_scatter_block(inPlace(send), bottom(recv), static_cast<int>(*recvcount),
                                          PMPI_Type_f2c(*type), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}
void barrierF(const MPI_Fint* comm, MPI_Fint* ierr) { setError(ierr, MPI_Barrier(PMPI_Comm_f2c(*comm))); }

}  // namespace

// Every spelling forwards to one implementation.
#define BC_EXPORT extern "C" __attribute__((visibility("default")))
#define BC_FORTRAN_NAMES(name, upper, impl, params, args) \
  BC_EXPORT void mpi_##name##_ params { impl args; }      \
  BC_EXPORT void mpi_##name params { impl args; }         \
  BC_EXPORT void mpi_##name##__ params { impl args; }     \
  BC_EXPORT void upper params { impl args; }              \
  BC_EXPORT void ompi_##name##_f params { impl args; }

#define BC_ALLREDUCE_PARAMS \
  (const void* s, void* r, const MPI_Fint* n, const MPI_Fint* t, const MPI_Fint* o, const MPI_Fint* c, MPI_Fint* e)
BC_FORTRAN_NAMES(allreduce, MPI_ALLREDUCE, allreduceF, BC_ALLREDUCE_PARAMS, (s, r, n, t, o, c, e))
BC_FORTRAN_NAMES(reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK, reduceScatterBlockF, BC_ALLREDUCE_PARAMS,
                 (s, r, n, t, o, c, e))
BC_FORTRAN_NAMES(bcast, MPI_BCAST, bcastF,
                 (void* b, const MPI_Fint* n, const MPI_Fint* t, const MPI_Fint* root, const MPI_Fint* c, MPI_Fint* e),
                 (b, n, t, root, c, e))
BC_FORTRAN_NAMES(allgather, MPI_ALLGATHER, allgatherF,
                 (const void* s, const MPI_Fint* sn, const MPI_Fint* st, void* r, const MPI_Fint* rn,
                  const MPI_Fint* rt, const MPI_Fint* c, MPI_Fint* e),
                 (s, sn, st, r, rn, rt, c, e))
BC_FORTRAN_NAMES(barrier, MPI_BARRIER, barrierF, (const MPI_Fint* c, MPI_Fint* e), (c, e))
