/* Shared helpers of the interposer's C test programs: the same process calls
 * a collective through MPI_* (interposed when libboostcomm_mpi.so is
 * preloaded) and through PMPI_* (never interposed), and compares. */
#ifndef BC_INTERPOSER_CHECK_H
#define BC_INTERPOSER_CHECK_H

#include <mpi.h>
#include <stdio.h>

extern int g_rank, g_size, g_failures, g_checks, g_expectPreload;

/* After MPI_Init[_thread]: --expect-preload from argv, g_rank and g_size of
 * MPI_COMM_WORLD, and a failure when the preload is expected but absent. */
void startTest(int argc, char** argv);
/* The interposer's boostcomm_mpi_last_reason, or null without the preload. */
int lastReason(void);
/* Fails unless the last intercepted call ended with `reason` (only checked
 * with --expect-preload); BOOSTCOMM_MPI_ROUTED also accepts
 * BOOSTCOMM_MPI_NATIVE (boostcomm's selection chose MPI's own algorithm). */
void expectReason(int reason, const char* what);
void fail(const char* what);
/* Fails unless the buffers are equal on this rank (tolerance for float sums)
 * and bitwise identical across the ranks of comm. */
void expectSame(const void* got, const void* want, int count, MPI_Datatype type, int approx, MPI_Comm comm,
                const char* what);
/* The same without the cross-rank check (reduce_scatter: each rank holds its block). */
void expectLocal(const void* got, const void* want, int count, MPI_Datatype type, const char* what);
/* 0 when every rank passed (collective over MPI_COMM_WORLD, through PMPI). */
int finish(const char* program);

#endif
