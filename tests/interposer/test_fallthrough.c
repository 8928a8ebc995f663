/* What libboostcomm_mpi.so must hand to PMPI unchanged, with the reason, and
 * the result MPI gives: derived datatypes and unsupported predefined types in
 * reductions, user and logical ops, intercommunicators, MPI_COMM_SELF,
 * invalid arguments; and routed and fall-through calls mixed on one
 * communicator, plus collectives that are not intercepted at all.
 * usage: test_fallthrough [--expect-preload] */
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

static void maxAbs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) {
    const float a = ((float*)in)[i], b = ((float*)inout)[i];
    ((float*)inout)[i] = (a < 0 ? -a : a) > (b < 0 ? -b : b) ? a : b;
  }
}

/* Sums pairs of floats (MPI's predefined ops take no derived types). */
static void pairSum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < 2 * *len; ++i) ((float*)inout)[i] += ((float*)in)[i];
}

static void reductions(MPI_Comm comm, int rank) {
  enum { n = 1031 };
  float send[2 * n], got[2 * n], want[2 * n];
  fill(send, MPI_FLOAT, 2 * n, rank, 1, 0);
  /* A derived type (pairs of floats, with its user op): PMPI, on every rank. */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_FLOAT, &pair);
  MPI_Type_commit(&pair);
  MPI_Op pairOp;
  MPI_Op_create(pairSum, 1, &pairOp);
  MPI_Allreduce(send, got, n, pair, pairOp, comm);
  expectReason(BOOSTCOMM_MPI_DATATYPE, "allreduce derived type");
  PMPI_Allreduce(send, want, n, pair, pairOp, comm);
  expectSame(got, want, 2 * n, MPI_FLOAT, 0, comm, "allreduce derived type");
  MPI_Reduce_scatter_block(send, got, 1, pair, pairOp, comm);
  expectReason(BOOSTCOMM_MPI_DATATYPE, "reduce_scatter_block derived type");
  PMPI_Reduce_scatter_block(send, want, 1, pair, pairOp, comm);
  expectLocal(got, want, 2, MPI_FLOAT, "reduce_scatter_block derived type");
  MPI_Op_free(&pairOp);
  MPI_Type_free(&pair);
  /* A user op. */
  MPI_Op op;
  MPI_Op_create(maxAbs, 1, &op);
  MPI_Allreduce(send, got, n, MPI_FLOAT, op, comm);
  expectReason(BOOSTCOMM_MPI_OP, "allreduce user op");
  PMPI_Allreduce(send, want, n, MPI_FLOAT, op, comm);
  expectSame(got, want, n, MPI_FLOAT, 0, comm, "allreduce user op");
  MPI_Op_free(&op);
  /* Ops boostcomm lacks; a predefined type it does not reduce. */
  int a[n], b[n], c[n];
  fill(a, MPI_INT, n, rank, 2, 0);
  MPI_Allreduce(a, b, n, MPI_INT, MPI_LAND, comm);
  expectReason(BOOSTCOMM_MPI_OP, "allreduce MPI_LAND");
  PMPI_Allreduce(a, c, n, MPI_INT, MPI_LAND, comm);
  expectSame(b, c, n, MPI_INT, 0, comm, "allreduce MPI_LAND");
  MPI_Allreduce(a, b, n, MPI_INT, MPI_BXOR, comm);
  expectReason(BOOSTCOMM_MPI_OP, "allreduce MPI_BXOR");
  short s[n], t[n], u[n];
  fill(s, MPI_SHORT, n, rank, 3, 0);
  MPI_Allreduce(s, t, n, MPI_SHORT, MPI_SUM, comm);
  expectReason(BOOSTCOMM_MPI_DATATYPE, "allreduce MPI_SHORT");
  PMPI_Allreduce(s, u, n, MPI_SHORT, MPI_SUM, comm);
  expectSame(t, u, n, MPI_SHORT, 0, comm, "allreduce MPI_SHORT");
}

/* Routed, fall-through and never-intercepted collectives interleaved on one
 * communicator: each keeps MPI's matching (the routed ones run on
 * boostcomm's duplicate, the others on comm itself, in program order). */
static void mixed(MPI_Comm comm, int rank, int size) {
  enum { n = 4099 };
  static double x[n], y[n], r[n], w[n];
  int v[n], vr[n], vw[n];
  for (int round = 0; round < 3; ++round) {
    fill(x, MPI_DOUBLE, n, rank, round, 0);
    fill(v, MPI_INT, n, rank, round, 0);
    MPI_Allreduce(x, y, n, MPI_DOUBLE, MPI_SUM, comm);
    expectReason(BOOSTCOMM_MPI_ROUTED, "mixed: routed allreduce");
    MPI_Reduce(v, vr, n, MPI_INT, MPI_MAX, size - 1, comm); /* never intercepted */
    MPI_Allreduce(v, vw, n, MPI_INT, MPI_BOR, comm);
    expectReason(BOOSTCOMM_MPI_OP, "mixed: fall-through allreduce");
    MPI_Bcast(y, n, MPI_DOUBLE, round % size, comm);
    expectReason(BOOSTCOMM_MPI_ROUTED, "mixed: routed bcast");
    PMPI_Allreduce(x, r, n, MPI_DOUBLE, MPI_SUM, comm);
    expectSame(y, r, n, MPI_DOUBLE, 0, comm, "mixed: routed allreduce");
    PMPI_Allreduce(v, w, n, MPI_INT, MPI_BOR, comm);
    expectSame(vw, w, n, MPI_INT, 0, comm, "mixed: fall-through allreduce");
    PMPI_Reduce(v, w, n, MPI_INT, MPI_MAX, size - 1, comm);
    if (rank == size - 1) expectSame(vr, w, n, MPI_INT, 0, MPI_COMM_SELF, "mixed: MPI_Reduce");
  }
}

static void communicators(void) {
  int x = g_rank + 1, y = 0;
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
  expectReason(BOOSTCOMM_MPI_SINGLE_RANK, "MPI_COMM_SELF");
  if (y != x) fail("MPI_COMM_SELF allreduce result");
  if (g_size < 2) return;
  /* An intercommunicator between the even and the odd ranks. */
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, g_rank % 2 == 0 ? 1 : 0, 7, &inter);
  int got = 0, want = 0;
  MPI_Allreduce(&x, &got, 1, MPI_INT, MPI_SUM, inter);
  expectReason(BOOSTCOMM_MPI_INTERCOMM, "intercommunicator allreduce");
  PMPI_Allreduce(&x, &want, 1, MPI_INT, MPI_SUM, inter);
  if (got != want) fail("intercommunicator allreduce result");
  ++g_checks;
  MPI_Barrier(inter);
  expectReason(BOOSTCOMM_MPI_INTERCOMM, "intercommunicator barrier");
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  /* Invalid arguments reach MPI, which reports them (errors returned here). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rc = MPI_Bcast(&x, 1, MPI_INT, g_size + 3, MPI_COMM_WORLD);
  expectReason(BOOSTCOMM_MPI_ARGUMENTS, "bcast with a root out of range");
  if (rc == MPI_SUCCESS) fail("bcast with a root out of range returned MPI_SUCCESS");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  startTest(argc, argv);
  /* The first call on a communicator is a fall-through one: it still sets it up. */
  reductions(MPI_COMM_WORLD, g_rank);
  mixed(MPI_COMM_WORLD, g_rank, g_size);
  communicators();
  const int rc = finish("test_fallthrough");
  MPI_Finalize();
  return rc;
}
