/* Nonblocking collectives under libboostcomm_mpi.so: real MPI_Requests
 * (generalized requests) completed through MPI_Wait, MPI_Waitall and an
 * MPI_Test loop, several in flight at once, before and after a blocking call
 * on the communicator; MPI's progress rule holds (a rank blocked in PMPI_Recv
 * still advances its part of a routed collective). Communicators whose first
 * call is nonblocking in harder orders: test_nonblocking_first.c.
 * usage: test_nonblocking [--expect-preload] [--single]   (--single: MPI_Init,
 * so below MPI_THREAD_MULTIPLE every call must fall through) */
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

static int g_routed = BOOSTCOMM_MPI_ROUTED;

static void allreduces(MPI_Comm comm, int rank) {
  enum { kInFlight = 3 };
  const int counts[kInFlight] = {1, 4099, 262147};
  float* send[kInFlight];
  float* got[kInFlight];
  float* want[kInFlight];
  MPI_Request requests[kInFlight];
  for (int i = 0; i < kInFlight; ++i) {
    send[i] = (float*)alloc(MPI_FLOAT, counts[i]);
    got[i] = (float*)alloc(MPI_FLOAT, counts[i]);
    want[i] = (float*)alloc(MPI_FLOAT, counts[i]);
    fill(send[i], MPI_FLOAT, counts[i], rank, i, 0);
    MPI_Iallreduce(send[i], got[i], counts[i], MPI_FLOAT, MPI_SUM, comm, &requests[i]);
    expectReason(g_routed, "iallreduce");
  }
  MPI_Waitall(kInFlight, requests, MPI_STATUSES_IGNORE);
  for (int i = 0; i < kInFlight; ++i) {
    if (requests[i] != MPI_REQUEST_NULL) fail("MPI_Waitall left a request active");
    PMPI_Allreduce(send[i], want[i], counts[i], MPI_FLOAT, MPI_SUM, comm);
    expectSame(got[i], want[i], counts[i], MPI_FLOAT, 0, comm, "iallreduce + MPI_Waitall");
  }
  /* MPI_Test until done, in place. */
  memcpy(got[1], send[1], sizeof(float) * (size_t)counts[1]);
  MPI_Request r;
  MPI_Iallreduce(MPI_IN_PLACE, got[1], counts[1], MPI_FLOAT, MPI_SUM, comm, &r);
  expectReason(g_routed, "iallreduce in place");
  int done = 0;
  while (!done) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  PMPI_Allreduce(send[1], want[1], counts[1], MPI_FLOAT, MPI_SUM, comm);
  expectSame(got[1], want[1], counts[1], MPI_FLOAT, 0, comm, "iallreduce in place + MPI_Test loop");
  for (int i = 0; i < kInFlight; ++i) {
    free(send[i]);
    free(got[i]);
    free(want[i]);
  }
}

static void others(MPI_Comm comm, int rank, int size) {
  enum { n = 2053 };
  MPI_Request r[6];
  static double b[n], bref[n], g[n * 8], gref[n * 8], gv[n * 8], gvref[n * 8], rs[n * 8], rsgot[n], rsref[n];
  static double rsv[n];
  int counts[8], displs[8];
  for (int i = 0; i < size; ++i) {
    counts[i] = n - i;
    displs[i] = i * n;
  }
  fill(b, MPI_DOUBLE, n, rank, 1, 0);
  memcpy(bref, b, sizeof b);
  double mine[n];
  fill(mine, MPI_DOUBLE, n, rank, 2, 0);
  fill(rs, MPI_DOUBLE, n * size, rank, 3, 0);
  MPI_Ibcast(b, n, MPI_DOUBLE, size - 1, comm, &r[0]);
  expectReason(g_routed, "ibcast");
  MPI_Iallgather(mine, n, MPI_DOUBLE, g, n, MPI_DOUBLE, comm, &r[1]);
  expectReason(g_routed, "iallgather");
  MPI_Iallgatherv(mine, counts[rank], MPI_DOUBLE, gv, counts, displs, MPI_DOUBLE, comm, &r[2]);
  expectReason(g_routed, "iallgatherv");
  MPI_Ireduce_scatter_block(rs, rsgot, n, MPI_DOUBLE, MPI_MAX, comm, &r[3]);
  expectReason(g_routed, "ireduce_scatter_block");
  int equal[8];
  for (int i = 0; i < size; ++i) equal[i] = n;
  MPI_Ireduce_scatter(rs, rsv, equal, MPI_DOUBLE, MPI_SUM, comm, &r[4]);
  expectReason(g_routed, "ireduce_scatter");
  MPI_Ibarrier(comm, &r[5]);
  expectReason(g_routed, "ibarrier");
  for (int i = 5; i >= 0; --i) MPI_Wait(&r[i], MPI_STATUS_IGNORE);
  PMPI_Bcast(bref, n, MPI_DOUBLE, size - 1, comm);
  expectSame(b, bref, n, MPI_DOUBLE, 0, comm, "ibcast");
  PMPI_Allgather(mine, n, MPI_DOUBLE, gref, n, MPI_DOUBLE, comm);
  expectSame(g, gref, n * size, MPI_DOUBLE, 0, comm, "iallgather");
  memset(gvref, 0, sizeof gvref);
  memcpy(gvref, gv, sizeof gv);
  PMPI_Allgatherv(mine, counts[rank], MPI_DOUBLE, gvref, counts, displs, MPI_DOUBLE, comm);
  expectSame(gv, gvref, n * size, MPI_DOUBLE, 0, comm, "iallgatherv");
  PMPI_Reduce_scatter_block(rs, rsref, n, MPI_DOUBLE, MPI_MAX, comm);
  expectLocal(rsgot, rsref, n, MPI_DOUBLE, "ireduce_scatter_block");
  PMPI_Reduce_scatter_block(rs, rsref, n, MPI_DOUBLE, MPI_SUM, comm);
  expectLocal(rsv, rsref, n, MPI_DOUBLE, "ireduce_scatter");
}

/* Rank 0 starts the collective and blocks in a receive that rank 1 sends
 * only after its own wait returned: rank 0 must progress meanwhile. */
static void progressRule(MPI_Comm comm, int rank) {
  enum { n = 1 << 18 };
  float* send = (float*)alloc(MPI_FLOAT, n);
  float* got = (float*)alloc(MPI_FLOAT, n);
  float* want = (float*)alloc(MPI_FLOAT, n);
  fill(send, MPI_FLOAT, n, rank, 4, 0);
  MPI_Request r;
  MPI_Iallreduce(send, got, n, MPI_FLOAT, MPI_SUM, comm, &r);
  expectReason(g_routed, "iallreduce (progress rule)");
  int token = 0;
  if (rank == 0) {
    PMPI_Recv(&token, 1, MPI_INT, 1, 99, comm, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (rank == 1) PMPI_Send(&token, 1, MPI_INT, 0, 99, comm);
  }
  PMPI_Allreduce(send, want, n, MPI_FLOAT, MPI_SUM, comm);
  expectSame(got, want, n, MPI_FLOAT, 0, comm, "iallreduce (progress rule)");
  free(send);
  free(got);
  free(want);
}

int main(int argc, char** argv) {
  int single = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect-preload") == 0) g_expectPreload = 1;
    if (strcmp(argv[i], "--single") == 0) single = 1;
  }
  int provided = MPI_THREAD_SINGLE;
  if (single) {
    MPI_Init(&argc, &argv);
    MPI_Query_thread(&provided);
  } else {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_expectPreload && lastReason() == -2) fail("--expect-preload, but boostcomm_mpi_last_reason is not loaded");
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  /* No blocking collective on comm yet: the first nonblocking call sets it up
   * (below MPI_THREAD_MULTIPLE, nothing is set up and every call falls through). */
  g_routed = provided == MPI_THREAD_MULTIPLE ? BOOSTCOMM_MPI_ROUTED : BOOSTCOMM_MPI_THREAD_LEVEL;
  allreduces(comm, g_rank);
  MPI_Barrier(comm); /* from here on, sizes for MPI's own algorithm may take the native shortcut */
  allreduces(comm, g_rank);
  others(comm, g_rank, g_size);
  if (g_size >= 2) progressRule(comm, g_rank);
  MPI_Comm_free(&comm);
  const int rc = finish("test_nonblocking");
  MPI_Finalize();
  return rc;
}
