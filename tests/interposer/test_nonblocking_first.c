/* Communicators whose first intercepted collective is a nonblocking one,
 * under libboostcomm_mpi.so: they are set up in the background and routed
 * from that first call on, and the set-up is collective-safe:
 *  - a program of nonblocking collectives only (many in flight at once,
 *    queued behind the set-up, completed by MPI_Waitall and MPI_Test loops);
 *  - ranks starting first calls on two fresh communicators in opposite
 *    orders (legal for nonblocking calls; a blocking set-up inside them
 *    would deadlock);
 *  - ranks mixing blocking and nonblocking first calls across communicators
 *    in different orders;
 *  - MPI's progress rule while the set-up is still running (rank 0 blocks in
 *    PMPI_Recv on a message rank 1 sends only after its own MPI_Wait);
 *  - communicators created, used once and freed in a loop;
 *  - a communicator made by a call the interposer does not intercept
 *    (MPI_Cart_create): nothing reserved, so its nonblocking calls fall
 *    through (NOT_SEEN) until a blocking one sets it up.
 * Every result is compared with PMPI on every rank.
 * usage: test_nonblocking_first [--expect-preload] [--expect-create-failed | --expect-not-seen]
 *        [--only-nonblocking ROUNDS]   (only the first part, on MPI_COMM_WORLD: the
 *        nonblocking-only program measured in docs/MPI_INTERPOSER.md)
 * --expect-create-failed: boostcomm cannot set communicators up;
 * --expect-not-seen: nothing is reserved (BOOSTCOMM_SHM=0), first calls fall through. */
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

/* With --expect-create-failed (boostcomm cannot set a communicator up), a
 * call queued behind the set-up still reports ROUTED; later ones CREATE_FAILED. */
static int g_createFailed = 0;
/* With --expect-not-seen, a communicator not set up by a blocking call yet falls through. */
static int g_notSeen = 0;

static void expectRouted(const char* what) {
  if ((g_createFailed && lastReason() == BOOSTCOMM_MPI_CREATE_FAILED) ||
      (g_notSeen && lastReason() == BOOSTCOMM_MPI_NOT_SEEN)) {
    ++g_checks;
    return;
  }
  expectReason(BOOSTCOMM_MPI_ROUTED, what);
}

enum { kCalls = 8, kMaxRanks = 8 };

/* One round of every nonblocking collective, all in flight at once. */
struct Round {
  int n, root;
  float *sum, *sumGot, *sumRef;
  int *max, *maxRef;
  double *b, *bRef;
  int *mine, *g, *gRef, *gv, *gvRef;
  double *rs, *rsGot, *rsRef, *rsv;
  int counts[kMaxRanks], displs[kMaxRanks], equal[kMaxRanks];
  MPI_Request r[kCalls];
};

static void start(struct Round* x, MPI_Comm comm, int n, int seed) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  memset(x, 0, sizeof *x);
  x->n = n;
  x->root = seed % size;
  x->sum = (float*)alloc(MPI_FLOAT, n), x->sumGot = (float*)alloc(MPI_FLOAT, n);
  x->sumRef = (float*)alloc(MPI_FLOAT, n);
  x->max = (int*)alloc(MPI_INT, n), x->maxRef = (int*)alloc(MPI_INT, n);
  x->b = (double*)alloc(MPI_DOUBLE, n), x->bRef = (double*)alloc(MPI_DOUBLE, n);
  x->mine = (int*)alloc(MPI_INT, n), x->g = (int*)alloc(MPI_INT, n * size), x->gRef = (int*)alloc(MPI_INT, n * size);
  x->gv = (int*)alloc(MPI_INT, n * size), x->gvRef = (int*)alloc(MPI_INT, n * size);
  x->rs = (double*)alloc(MPI_DOUBLE, n * size), x->rsGot = (double*)alloc(MPI_DOUBLE, n);
  x->rsRef = (double*)alloc(MPI_DOUBLE, n), x->rsv = (double*)alloc(MPI_DOUBLE, n);
  fill(x->sum, MPI_FLOAT, n, rank, seed, 0);
  fill(x->max, MPI_INT, n, rank, seed + 1, 0);
  memcpy(x->maxRef, x->max, sizeof(int) * (size_t)n);
  fill(x->b, MPI_DOUBLE, n, rank, seed + 2, 0);
  memcpy(x->bRef, x->b, sizeof(double) * (size_t)n);
  fill(x->mine, MPI_INT, n, rank, seed + 3, 0);
  fill(x->rs, MPI_DOUBLE, n * size, rank, seed + 4, 0);
  int at = 0;
  for (int i = 0; i < size; ++i) {
    x->counts[i] = n - (n > i ? i : 0);
    x->displs[i] = at;
    at += x->counts[i];
    x->equal[i] = n;
  }
  MPI_Iallreduce(x->sum, x->sumGot, n, MPI_FLOAT, MPI_SUM, comm, &x->r[0]);
  expectRouted("iallreduce");
  MPI_Iallreduce(MPI_IN_PLACE, x->max, n, MPI_INT, MPI_MAX, comm, &x->r[1]);
  expectRouted("iallreduce in place");
  MPI_Ibcast(x->b, n, MPI_DOUBLE, x->root, comm, &x->r[2]);
  expectRouted("ibcast");
  MPI_Iallgather(x->mine, n, MPI_INT, x->g, n, MPI_INT, comm, &x->r[3]);
  expectRouted("iallgather");
  MPI_Iallgatherv(x->mine, x->counts[rank], MPI_INT, x->gv, x->counts, x->displs, MPI_INT, comm, &x->r[4]);
  expectRouted("iallgatherv");
  MPI_Ireduce_scatter_block(x->rs, x->rsGot, n, MPI_DOUBLE, MPI_SUM, comm, &x->r[5]);
  expectRouted("ireduce_scatter_block");
  MPI_Ireduce_scatter(x->rs, x->rsv, x->equal, MPI_DOUBLE, MPI_MIN, comm, &x->r[6]);
  expectRouted("ireduce_scatter");
  MPI_Ibarrier(comm, &x->r[7]);
  expectRouted("ibarrier");
}

/* After the requests completed: every result against PMPI, then frees. */
static void verify(struct Round* x, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = x->n;
  for (int i = 0; i < kCalls; ++i) {
    if (x->r[i] != MPI_REQUEST_NULL) fail("a completed request is not MPI_REQUEST_NULL");
  }
  PMPI_Allreduce(x->sum, x->sumRef, n, MPI_FLOAT, MPI_SUM, comm);
  expectSame(x->sumGot, x->sumRef, n, MPI_FLOAT, 0, comm, "iallreduce");
  PMPI_Allreduce(MPI_IN_PLACE, x->maxRef, n, MPI_INT, MPI_MAX, comm);
  expectSame(x->max, x->maxRef, n, MPI_INT, 0, comm, "iallreduce in place");
  PMPI_Bcast(x->bRef, n, MPI_DOUBLE, x->root, comm);
  expectSame(x->b, x->bRef, n, MPI_DOUBLE, 0, comm, "ibcast");
  PMPI_Allgather(x->mine, n, MPI_INT, x->gRef, n, MPI_INT, comm);
  expectSame(x->g, x->gRef, n * size, MPI_INT, 0, comm, "iallgather");
  PMPI_Allgatherv(x->mine, x->counts[rank], MPI_INT, x->gvRef, x->counts, x->displs, MPI_INT, comm);
  expectSame(x->gv, x->gvRef, x->displs[size - 1] + x->counts[size - 1], MPI_INT, 0, comm, "iallgatherv");
  PMPI_Reduce_scatter_block(x->rs, x->rsRef, n, MPI_DOUBLE, MPI_SUM, comm);
  expectLocal(x->rsGot, x->rsRef, n, MPI_DOUBLE, "ireduce_scatter_block");
  PMPI_Reduce_scatter(x->rs, x->rsRef, x->equal, MPI_DOUBLE, MPI_MIN, comm);
  expectLocal(x->rsv, x->rsRef, n, MPI_DOUBLE, "ireduce_scatter");
  void* all[] = {x->sum, x->sumGot, x->sumRef, x->max, x->maxRef, x->b, x->bRef, x->mine, x->g, x->gRef,
                 x->gv, x->gvRef, x->rs, x->rsGot, x->rsRef, x->rsv};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
}

/* A program of nonblocking collectives only; each round completes its first
 * half with MPI_Waitall, the rest with an MPI_Test loop each. */
static void onlyNonblocking(MPI_Comm comm, int rounds) {
  static const int kSizes[] = {1, 1031, 65537};
  for (int i = 0; i < rounds; ++i) {
    struct Round x;
    start(&x, comm, kSizes[i % 3], i);
    MPI_Waitall(kCalls / 2, x.r, MPI_STATUSES_IGNORE);
    for (int c = kCalls / 2; c < kCalls; ++c) {
      int done = 0;
      while (!done) MPI_Test(&x.r[c], &done, MPI_STATUS_IGNORE);
    }
    verify(&x, comm);
  }
}

/* First calls on two fresh communicators, in opposite orders on even and odd ranks. */
static void oppositeOrders(void) {
  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  struct Round x, y;
  if (g_rank % 2 == 0) {
    start(&x, a, 1031, 1);
    start(&y, b, 7, 2);
  } else {
    start(&y, b, 7, 2);
    start(&x, a, 1031, 1);
  }
  MPI_Waitall(kCalls, y.r, MPI_STATUSES_IGNORE);
  MPI_Waitall(kCalls, x.r, MPI_STATUSES_IGNORE);
  verify(&x, a);
  verify(&y, b);
  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
}

/* Even ranks: a nonblocking first call on c, then a blocking first call on d;
 * odd ranks the other way round. Then a blocking call on c (from then on its
 * small calls may take MPI's own algorithm) and nonblocking ones again. */
static void mixedOrders(void) {
  MPI_Comm c, d;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &d);
  enum { n = 4099 };
  static float x[n], y[n], ref[n];
  static double u[n], v[n], uref[n];
  fill(x, MPI_FLOAT, n, g_rank, 5, 0);
  fill(u, MPI_DOUBLE, n, g_rank, 6, 0);
  MPI_Request r;
  if (g_rank % 2 == 0) {
    MPI_Iallreduce(x, y, n, MPI_FLOAT, MPI_SUM, c, &r);
    expectRouted("mixed: iallreduce first");
    MPI_Allreduce(u, v, n, MPI_DOUBLE, MPI_MAX, d);
    expectRouted("mixed: allreduce first");
  } else {
    MPI_Allreduce(u, v, n, MPI_DOUBLE, MPI_MAX, d);
    expectRouted("mixed: allreduce first");
    MPI_Iallreduce(x, y, n, MPI_FLOAT, MPI_SUM, c, &r);
    expectRouted("mixed: iallreduce first");
  }
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allreduce(x, ref, n, MPI_FLOAT, MPI_SUM, c);
  expectSame(y, ref, n, MPI_FLOAT, 0, c, "mixed: iallreduce first");
  PMPI_Allreduce(u, uref, n, MPI_DOUBLE, MPI_MAX, d);
  expectSame(v, uref, n, MPI_DOUBLE, 0, d, "mixed: allreduce first");
  MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, c);
  expectSame(y, ref, n, MPI_FLOAT, 0, c, "mixed: blocking allreduce after the background set-up");
  if (g_createFailed) ++g_checks;
  else expectReason(BOOSTCOMM_MPI_ROUTED, "mixed: blocking allreduce after the background set-up");
  struct Round round;
  start(&round, c, 3, 7);
  MPI_Waitall(kCalls, round.r, MPI_STATUSES_IGNORE);
  verify(&round, c);
  MPI_Comm_free(&c);
  MPI_Comm_free(&d);
}

/* Rank 0 blocks in PMPI_Recv right after its first call on a fresh
 * communicator; rank 1 sends only once its own MPI_Wait returned. */
static void progressRule(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  enum { n = 1 << 16 };
  static float send[n], got[n], want[n];
  fill(send, MPI_FLOAT, n, g_rank, 8, 0);
  MPI_Request r;
  MPI_Iallreduce(send, got, n, MPI_FLOAT, MPI_SUM, comm, &r);
  expectRouted("iallreduce first (progress rule)");
  int token = 0;
  if (g_rank == 0) {
    PMPI_Recv(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (g_rank == 1) PMPI_Send(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  PMPI_Allreduce(send, want, n, MPI_FLOAT, MPI_SUM, comm);
  expectSame(got, want, n, MPI_FLOAT, 0, comm, "iallreduce first (progress rule)");
  MPI_Comm_free(&comm);
}

/* Created, used by one nonblocking call, freed. Not freed while its request
 * is in flight, which MPI allows: Open MPI 4.1.4's own MPI_Iallreduce then
 * crashes in MPI_Wait now and then (a segfault in mca_pml_ob1_isend from
 * libnbc's progress, without the interposer too). */
static void createAndFree(int loops) {
  for (int i = 0; i < loops; ++i) {
    MPI_Comm comm;
    if (i % 2) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    else MPI_Comm_split(MPI_COMM_WORLD, 0, i % 3 ? g_rank : -g_rank, &comm);
    int x = g_rank + i, sum = -1, want = 0;
    MPI_Request r;
    MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm, &r);
    expectRouted("iallreduce on a fresh communicator in a loop");
    PMPI_Allreduce(&x, &want, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm);
    ++g_checks;
    if (sum != want) fail("iallreduce on a fresh communicator in a loop: wrong sum");
  }
}

/* Not reserved (MPI_Cart_create is not intercepted): NOT_SEEN until a blocking call. */
static void notReserved(void) {
  MPI_Comm cart;
  int dims[1] = {g_size}, periods[1] = {0};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  int x = g_rank + 1, sum = -1, want = g_size * (g_size + 1) / 2;
  MPI_Request r;
  MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_SUM, cart, &r);
  expectReason(BOOSTCOMM_MPI_NOT_SEEN, "iallreduce on a cartesian communicator before any blocking call");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (sum != want) fail("iallreduce on a cartesian communicator: wrong sum");
  MPI_Barrier(cart);
  struct Round round;
  start(&round, cart, 1031, 9);
  MPI_Waitall(kCalls, round.r, MPI_STATUSES_IGNORE);
  verify(&round, cart);
  MPI_Comm_free(&cart);
}

int main(int argc, char** argv) {
  int provided = 0, only = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  startTest(argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect-create-failed") == 0) g_createFailed = 1;
    if (strcmp(argv[i], "--expect-not-seen") == 0) g_notSeen = 1;
    if (strcmp(argv[i], "--only-nonblocking") == 0 && i + 1 < argc) only = atoi(argv[++i]);
  }
  if (provided != MPI_THREAD_MULTIPLE || g_size > kMaxRanks || g_size < 2) {
    fail("needs MPI_THREAD_MULTIPLE and 2-8 ranks");
  }
  if (only > 0) {
    onlyNonblocking(MPI_COMM_WORLD, only);
  } else {
    onlyNonblocking(MPI_COMM_WORLD, 6);
    oppositeOrders();
    mixedOrders();
    progressRule();
    createAndFree(12);
    notReserved();
  }
  const int rc = finish("test_nonblocking_first");
  MPI_Finalize();
  return rc;
}
