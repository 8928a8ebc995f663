/* Corner cases collective test suites exercise, under libboostcomm_mpi.so,
 * each compared with PMPI on every rank:
 *  - the nonblocking forms falling through with their reason: user op,
 *    derived type, MPI_SHORT, unequal reduce_scatter counts,
 *    intercommunicator, MPI_COMM_SELF, an invalid root (MPI's error);
 *  - MPI_IN_PLACE in every nonblocking collective that allows it;
 *  - derived and non-contiguous types in data movement, described
 *    differently on the send and receive side: strided vectors, resized
 *    types with gaps, a struct with padding;
 *  - MPI_THREAD_MULTIPLE: two threads, each on its own communicator (one
 *    set up by a blocking first call, one by a nonblocking one), at once;
 *  - communicators created and freed in a loop, first calls blocking and
 *    nonblocking in turn, results checked in each.
 * Buffers are poisoned and compared whole: gaps must keep their bytes.
 * usage: test_corners [--expect-preload] */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

enum { kBytes = 1 << 16 };
static unsigned char g_got[kBytes], g_want[kBytes];

static void poison(void) {
  memset(g_got, 0xA5, kBytes);
  memset(g_want, 0xA5, kBytes);
}

/* Largest magnitude, the larger value on a tie: commutative, as declared. */
static void maxAbs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) {
    const float a = ((float*)in)[i], b = ((float*)inout)[i];
    const float ma = a < 0 ? -a : a, mb = b < 0 ? -b : b;
    ((float*)inout)[i] = ma > mb || (ma == mb && a > b) ? a : b;
  }
}

static void pairSum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < 2 * *len; ++i) ((float*)inout)[i] += ((float*)in)[i];
}

/* Nonblocking calls MPI must serve, with the reason the interposer gives. */
static void nonblockingFallthrough(MPI_Comm comm, int rank, int size) {
  enum { n = 1031 };
  float send[2 * n], got[2 * n], want[2 * n];
  fill(send, MPI_FLOAT, 2 * n, rank, 1, 0);
  MPI_Request r;
  MPI_Op op;
  MPI_Op_create(maxAbs, 1, &op);
  MPI_Iallreduce(send, got, n, MPI_FLOAT, op, comm, &r);
  expectReason(BOOSTCOMM_MPI_OP, "iallreduce user op");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allreduce(send, want, n, MPI_FLOAT, op, comm);
  expectSame(got, want, n, MPI_FLOAT, 0, comm, "iallreduce user op");
  MPI_Op_free(&op);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_FLOAT, &pair);
  MPI_Type_commit(&pair);
  MPI_Op_create(pairSum, 1, &op);
  MPI_Iallreduce(send, got, n, pair, op, comm, &r);
  expectReason(BOOSTCOMM_MPI_DATATYPE, "iallreduce derived type");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allreduce(send, want, n, pair, op, comm);
  expectSame(got, want, 2 * n, MPI_FLOAT, 0, comm, "iallreduce derived type");
  MPI_Op_free(&op);
  MPI_Type_free(&pair);
  short s[n], t[n], u[n];
  fill(s, MPI_SHORT, n, rank, 2, 0);
  MPI_Iallreduce(s, t, n, MPI_SHORT, MPI_SUM, comm, &r);
  expectReason(BOOSTCOMM_MPI_DATATYPE, "iallreduce MPI_SHORT");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allreduce(s, u, n, MPI_SHORT, MPI_SUM, comm);
  expectSame(t, u, n, MPI_SHORT, 0, comm, "iallreduce MPI_SHORT");
  int counts[8], total = 0;
  for (int i = 0; i < size; ++i) total += counts[i] = 1 + i;
  int* in = (int*)alloc(MPI_INT, total);
  int x[8], y[8];
  fill(in, MPI_INT, total, rank, 3, 0);
  MPI_Ireduce_scatter(in, x, counts, MPI_INT, MPI_SUM, comm, &r);
  expectReason(BOOSTCOMM_MPI_COUNTS, "ireduce_scatter unequal counts");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Reduce_scatter(in, y, counts, MPI_INT, MPI_SUM, comm);
  expectLocal(x, y, counts[rank], MPI_INT, "ireduce_scatter unequal counts");
  free(in);
  int one = rank + 1, sum = 0;
  MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF, &r);
  expectReason(BOOSTCOMM_MPI_SINGLE_RANK, "iallreduce MPI_COMM_SELF");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  ++g_checks;
  if (sum != one) fail("iallreduce MPI_COMM_SELF: wrong result");
  /* An intercommunicator between the even and the odd ranks. */
  MPI_Comm half, inter;
  MPI_Comm_split(comm, rank % 2, rank, &half);
  MPI_Intercomm_create(half, 0, comm, rank % 2 == 0 ? 1 : 0, 7, &inter);
  int other = 0, otherRef = 0;
  MPI_Iallreduce(&one, &other, 1, MPI_INT, MPI_SUM, inter, &r);
  expectReason(BOOSTCOMM_MPI_INTERCOMM, "iallreduce intercommunicator");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allreduce(&one, &otherRef, 1, MPI_INT, MPI_SUM, inter);
  ++g_checks;
  if (other != otherRef) fail("iallreduce intercommunicator: wrong result");
  MPI_Ibarrier(inter, &r);
  expectReason(BOOSTCOMM_MPI_INTERCOMM, "ibarrier intercommunicator");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  /* An invalid root: MPI's error, returned. */
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int rc = MPI_Ibcast(&one, 1, MPI_INT, size + 3, comm, &r);
  expectReason(BOOSTCOMM_MPI_ARGUMENTS, "ibcast with a root out of range");
  if (rc == MPI_SUCCESS) fail("ibcast with a root out of range returned MPI_SUCCESS");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
}

/* MPI_IN_PLACE in the nonblocking collectives that take it. */
static void nonblockingInPlace(MPI_Comm comm, int rank, int size) {
  enum { n = 517 };
  int counts[8], displs[8], at = 0;
  for (int i = 0; i < size; ++i) {
    counts[i] = n + 3 * i;
    displs[i] = at + 2; /* gaps */
    at += counts[i] + 2;
  }
  MPI_Request r;
  int* mine = (int*)alloc(MPI_INT, n * size + 64);
  fill(mine, MPI_INT, n * size + 64, rank, 4, 0);
  poison();
  memcpy(g_got + sizeof(int) * (size_t)(n * rank), mine, sizeof(int) * n);
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_got, n, MPI_INT, comm, &r);
  expectReason(BOOSTCOMM_MPI_ROUTED, "iallgather in place");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allgather(mine, n, MPI_INT, g_want, n, MPI_INT, comm);
  expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, "iallgather in place");
  poison();
  memcpy(g_got + sizeof(int) * (size_t)displs[rank], mine, sizeof(int) * (size_t)counts[rank]);
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_got, counts, displs, MPI_INT, comm, &r);
  expectReason(BOOSTCOMM_MPI_ROUTED, "iallgatherv in place, gapped");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Allgatherv(mine, counts[rank], MPI_INT, g_want, counts, displs, MPI_INT, comm);
  expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, "iallgatherv in place, gapped");
  poison();
  memcpy(g_got, mine, sizeof(int) * (size_t)(n * size));
  MPI_Ireduce_scatter_block(MPI_IN_PLACE, g_got, n, MPI_INT, MPI_SUM, comm, &r);
  expectReason(BOOSTCOMM_MPI_ROUTED, "ireduce_scatter_block in place");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Reduce_scatter_block(mine, g_want, n, MPI_INT, MPI_SUM, comm);
  expectLocal(g_got, g_want, n, MPI_INT, "ireduce_scatter_block in place");
  int equal[8];
  for (int i = 0; i < size; ++i) equal[i] = n;
  poison();
  memcpy(g_got, mine, sizeof(int) * (size_t)(n * size));
  MPI_Ireduce_scatter(MPI_IN_PLACE, g_got, equal, MPI_INT, MPI_MAX, comm, &r);
  expectReason(BOOSTCOMM_MPI_ROUTED, "ireduce_scatter in place");
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  PMPI_Reduce_scatter(mine, g_want, equal, MPI_INT, MPI_MAX, comm);
  expectLocal(g_got, g_want, n, MPI_INT, "ireduce_scatter in place");
  free(mine);
}

/* One signature, two descriptions, non-contiguous memory; blocking and nonblocking. */
static void derivedTypes(MPI_Comm comm, int rank, int size) {
  enum { n = 300 };
  float send[3 * n];
  fill(send, MPI_FLOAT, 3 * n, rank, 5, 0);
  MPI_Datatype strided, sparse, padded, four;
  MPI_Type_vector(3 * n, 1, 2, MPI_FLOAT, &strided); /* 3n floats, every other one */
  MPI_Type_create_resized(MPI_DOUBLE, 0, 2 * sizeof(double), &sparse); /* one double, then a gap */
  int blocks[2] = {1, 1};
  MPI_Aint offsets[2] = {0, 8};
  MPI_Datatype members[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Type_create_struct(2, blocks, offsets, members, &padded); /* int, 4 bytes of padding, double */
  MPI_Type_contiguous(4, MPI_INT, &four);
  MPI_Datatype all[] = {strided, sparse, padded, four};
  for (int i = 0; i < 4; ++i) MPI_Type_commit(&all[i]);
  strided = all[0], sparse = all[1], padded = all[2], four = all[3];
  for (int nb = 0; nb < 2; ++nb) {
    MPI_Request r = MPI_REQUEST_NULL;
    char what[128];
    /* Allgather: sent as 3n plain floats, received as one strided vector per rank. */
    poison();
    if (nb) MPI_Iallgather(send, 3 * n, MPI_FLOAT, g_got, 1, strided, comm, &r);
    else MPI_Allgather(send, 3 * n, MPI_FLOAT, g_got, 1, strided, comm);
    snprintf(what, sizeof what, "%sallgather floats into a strided vector", nb ? "i" : "");
    expectReason(BOOSTCOMM_MPI_ROUTED, what);
    if (nb) MPI_Wait(&r, MPI_STATUS_IGNORE);
    PMPI_Allgather(send, 3 * n, MPI_FLOAT, g_want, 1, strided, comm);
    expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, what);
    /* Allgather: sent as one 4-int type, received as 4 ints. */
    poison();
    if (nb) MPI_Iallgather(send, 1, four, g_got, 4, MPI_INT, comm, &r);
    else MPI_Allgather(send, 1, four, g_got, 4, MPI_INT, comm);
    snprintf(what, sizeof what, "%sallgather a 4-int type into ints", nb ? "i" : "");
    expectReason(BOOSTCOMM_MPI_ROUTED, what);
    if (nb) MPI_Wait(&r, MPI_STATUS_IGNORE);
    PMPI_Allgather(send, 1, four, g_want, 4, MPI_INT, comm);
    expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, what);
    /* Allgatherv of doubles into every other double, gapped displacements. */
    int counts[8], displs[8], at = 0;
    for (int i = 0; i < size; ++i) {
      counts[i] = 20 + 7 * i;
      displs[i] = at + 3;
      at += counts[i] + 3;
    }
    double dsend[64];
    fill(dsend, MPI_DOUBLE, 64, rank, 6, 0);
    poison();
    if (nb) MPI_Iallgatherv(dsend, counts[rank], MPI_DOUBLE, g_got, counts, displs, sparse, comm, &r);
    else MPI_Allgatherv(dsend, counts[rank], MPI_DOUBLE, g_got, counts, displs, sparse, comm);
    snprintf(what, sizeof what, "%sallgatherv into a resized type with gaps", nb ? "i" : "");
    expectReason(BOOSTCOMM_MPI_ROUTED, what);
    if (nb) MPI_Wait(&r, MPI_STATUS_IGNORE);
    PMPI_Allgatherv(dsend, counts[rank], MPI_DOUBLE, g_want, counts, displs, sparse, comm);
    expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, what);
    /* Bcast of a struct with padding: the padding keeps each rank's poison. */
    poison();
    for (int i = 0; i < 5; ++i) {
      const int v = 100 * rank + i;
      const double d = 0.5 * (rank + i);
      memcpy(g_got + 16 * i, &v, sizeof v);
      memcpy(g_got + 16 * i + 8, &d, sizeof d);
    }
    memcpy(g_want, g_got, 80);
    if (nb) MPI_Ibcast(g_got, 5, padded, size - 1, comm, &r);
    else MPI_Bcast(g_got, 5, padded, size - 1, comm);
    snprintf(what, sizeof what, "%sbcast a struct with padding", nb ? "i" : "");
    expectReason(BOOSTCOMM_MPI_ROUTED, what);
    if (nb) MPI_Wait(&r, MPI_STATUS_IGNORE);
    PMPI_Bcast(g_want, 5, padded, size - 1, comm);
    expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, what);
  }
  for (int i = 0; i < 4; ++i) MPI_Type_free(&all[i]);
}

/* One thread per communicator, at once: blocking and nonblocking calls. */
struct Worker {
  MPI_Comm comm;
  int nonblockingFirst, checks, failures;
};

static void* work(void* arg) {
  struct Worker* w = (struct Worker*)arg;
  enum { n = 2053 };
  float x[n], y[n], z[n];
  for (int round = 0; round < 20; ++round) {
    fill(x, MPI_FLOAT, n, g_rank, round, 0);
    MPI_Request r;
    if (w->nonblockingFirst || round % 2) {
      MPI_Iallreduce(x, y, n, MPI_FLOAT, MPI_SUM, w->comm, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, w->comm);
    }
    const int reason = lastReason();
    if (g_expectPreload && reason != BOOSTCOMM_MPI_ROUTED && reason != BOOSTCOMM_MPI_NATIVE) ++w->failures;
    PMPI_Allreduce(x, z, n, MPI_FLOAT, MPI_SUM, w->comm);
    if (memcmp(y, z, sizeof y) != 0) ++w->failures;
    w->checks += 2;
  }
  return NULL;
}

static void threads(void) {
  struct Worker w[2];
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    MPI_Comm_dup(MPI_COMM_WORLD, &w[i].comm);
    w[i].nonblockingFirst = i;
    w[i].checks = w[i].failures = 0;
  }
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, work, &w[i]);
  for (int i = 0; i < 2; ++i) {
    pthread_join(t[i], NULL);
    g_checks += w[i].checks;
    if (w[i].failures) fail("a thread on its own communicator got a wrong result or reason");
    MPI_Comm_free(&w[i].comm);
  }
}

/* Created, used and freed, first calls blocking and nonblocking in turn. */
static void loops(void) {
  for (int i = 0; i < 10; ++i) {
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, 0, (i % 2) ? -g_rank : g_rank, &comm);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int v[64], got[64 * 8], want[64 * 8];
    fill(v, MPI_INT, 64, rank, i, 0);
    MPI_Request r;
    if (i % 2) {
      MPI_Iallgather(v, 64, MPI_INT, got, 64, MPI_INT, comm, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      MPI_Allgather(v, 64, MPI_INT, got, 64, MPI_INT, comm);
    }
    expectReason(BOOSTCOMM_MPI_ROUTED, "allgather on a fresh communicator in a loop");
    PMPI_Allgather(v, 64, MPI_INT, want, 64, MPI_INT, comm);
    expectSame(got, want, 64 * size, MPI_INT, 0, comm, "allgather on a fresh communicator in a loop");
    MPI_Comm_free(&comm);
  }
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  startTest(argc, argv);
  if (provided != MPI_THREAD_MULTIPLE || g_size < 2 || g_size > 8) fail("needs MPI_THREAD_MULTIPLE and 2-8 ranks");
  nonblockingFallthrough(MPI_COMM_WORLD, g_rank, g_size);
  nonblockingInPlace(MPI_COMM_WORLD, g_rank, g_size);
  derivedTypes(MPI_COMM_WORLD, g_rank, g_size);
  threads();
  loops();
  const int rc = finish("test_corners");
  MPI_Finalize();
  return rc;
}
