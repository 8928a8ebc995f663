#!/bin/sh
# unit.layering.mpi_symbols: libboostcomm.so defines no MPI_ / PMPI_ function;
# libboostcomm_mpi.so defines the intercepted ones (and, as a control that the
# listing works, MPI_Allreduce must be among them).
# usage: check_mpi_symbols.sh <libboostcomm.so> <libboostcomm_mpi.so>
set -u
core=$(nm -D --defined-only "$1") || { echo "nm failed on $1"; exit 1; }
interposer=$(nm -D --defined-only "$2") || { echo "nm failed on $2"; exit 1; }
bad=$(echo "$core" | grep -E ' [TW] P?MPI_')
if [ -n "$bad" ]; then
  echo "libboostcomm.so defines MPI entry points:"
  echo "$bad"
  exit 1
fi
for name in MPI_Allreduce MPI_Bcast MPI_Allgather MPI_Allgatherv MPI_Reduce_scatter_block MPI_Reduce_scatter \
            MPI_Barrier MPI_Iallreduce MPI_Wait MPI_Waitall mpi_allreduce_ ompi_allreduce_f; do
  echo "$interposer" | grep -q " T $name\$" || { echo "libboostcomm_mpi.so does not define $name"; exit 1; }
done
echo "ok: libboostcomm.so defines no MPI_ symbol; libboostcomm_mpi.so defines the intercepted ones"
