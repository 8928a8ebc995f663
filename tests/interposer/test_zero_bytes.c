/* Zero-byte payloads under libboostcomm_mpi.so, blocking and nonblocking:
 * count 0, zero-size types (MPI_Type_contiguous(0, MPI_INT), a vector of
 * empty blocks, a zero-size type resized to a non-zero extent), and ranks
 * describing one empty signature differently (10 zero-size elements here,
 * 0 MPI_BYTEs there). MPI moves nothing and writes nothing; the interposer
 * must hand every one of them to MPI (reason NATIVE) on every rank alike.
 * Beside them, the non-empty neighbours: zero-extent types of non-zero size
 * (every element at one address: legal to send, not to receive) and
 * allgatherv with zero counts on some ranks, routed and compared with PMPI.
 * Every buffer is poisoned and compared whole, so a stray write shows.
 * usage: test_zero_bytes [--expect-preload] */
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

enum { kBytes = 512, kPoison = 0xA5 };
static unsigned char g_got[kBytes], g_want[kBytes], g_send[kBytes];
static int g_nonblocking = 0; /* run the MPI_I* form, then MPI_Wait */

static void poison(void) {
  memset(g_got, kPoison, kBytes);
  memset(g_want, kPoison, kBytes);
  for (int i = 0; i < kBytes; ++i) g_send[i] = (unsigned char)(i * 7 + g_rank);
}

static void waitIf(MPI_Request* r) {
  if (g_nonblocking) MPI_Wait(r, MPI_STATUS_IGNORE);
}

static void bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Ibcast(buf, count, type, root, comm, &r);
  else MPI_Bcast(buf, count, type, root, comm);
  waitIf(&r);
}

static void allgather(const void* send, int sc, MPI_Datatype st, void* recv, int rc, MPI_Datatype rt, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Iallgather(send, sc, st, recv, rc, rt, comm, &r);
  else MPI_Allgather(send, sc, st, recv, rc, rt, comm);
  waitIf(&r);
}

static void allgatherv(const void* send, int sc, MPI_Datatype st, void* recv, const int* counts, const int* displs,
                       MPI_Datatype rt, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Iallgatherv(send, sc, st, recv, counts, displs, rt, comm, &r);
  else MPI_Allgatherv(send, sc, st, recv, counts, displs, rt, comm);
  waitIf(&r);
}

static void allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Iallreduce(send, recv, count, type, op, comm, &r);
  else MPI_Allreduce(send, recv, count, type, op, comm);
  waitIf(&r);
}

static void reduceScatterBlock(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Ireduce_scatter_block(send, recv, count, type, MPI_SUM, comm, &r);
  else MPI_Reduce_scatter_block(send, recv, count, type, MPI_SUM, comm);
  waitIf(&r);
}

static void reduceScatter(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Comm comm) {
  MPI_Request r;
  if (g_nonblocking) MPI_Ireduce_scatter(send, recv, counts, type, MPI_SUM, comm, &r);
  else MPI_Reduce_scatter(send, recv, counts, type, MPI_SUM, comm);
  waitIf(&r);
}

/* The whole poisoned buffer, against PMPI's, on every rank (identical across ranks unless local). */
static void check(int reason, const char* what, int local, MPI_Comm comm) {
  char text[256];
  snprintf(text, sizeof text, "%s%s", g_nonblocking ? "nonblocking " : "", what);
  expectReason(reason, text);
  if (local) expectLocal(g_got, g_want, kBytes, MPI_BYTE, text);
  else expectSame(g_got, g_want, kBytes, MPI_BYTE, 0, comm, text);
}

/* Types with an empty type signature, whatever their extent. */
static MPI_Datatype g_empty[3];
static const char* g_emptyName[3] = {"contiguous(0, int)", "vector(3, 0, 2, int)", "contiguous(0) resized to 8"};
/* One int, extent 0: n elements all read the same int. */
static MPI_Datatype g_flat;

static void makeTypes(void) {
  MPI_Type_contiguous(0, MPI_INT, &g_empty[0]);
  MPI_Type_vector(3, 0, 2, MPI_INT, &g_empty[1]);
  MPI_Type_create_resized(g_empty[0], 0, 8, &g_empty[2]);
  MPI_Type_create_resized(MPI_INT, 0, 0, &g_flat);
  for (int i = 0; i < 3; ++i) MPI_Type_commit(&g_empty[i]);
  MPI_Type_commit(&g_flat);
}

static void freeTypes(void) {
  for (int i = 0; i < 3; ++i) MPI_Type_free(&g_empty[i]);
  MPI_Type_free(&g_flat);
}

static void emptyBcasts(MPI_Comm comm, int rank, int size) {
  char what[128];
  for (int root = 0; root < size; root += size - 1) {
    poison();
    bcast(g_got, 0, MPI_INT, root, comm);
    PMPI_Bcast(g_want, 0, MPI_INT, root, comm);
    snprintf(what, sizeof what, "bcast count 0 root %d", root);
    check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
    for (int t = 0; t < 3; ++t) {
      poison();
      bcast(g_got, 10, g_empty[t], root, comm);
      PMPI_Bcast(g_want, 10, g_empty[t], root, comm);
      snprintf(what, sizeof what, "bcast 10 x %s root %d", g_emptyName[t], root);
      check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
    }
    /* Not tested: one empty signature described two ways (the root 10 zero-size
     * elements, the others 0 MPI_BYTEs). Legal MPI, but Open MPI 4.1.4's own
     * MPI_Bcast then sends a message the others never receive, and the next
     * bcast on the communicator gets the wrong data; the interposer passes
     * empty calls to MPI untouched, so it behaves the same (docs/MPI_INTERPOSER.md). */
    const int mine = rank == root;
    /* Not empty: the root sends one int 10 times (zero extent), the others receive 10 ints. */
    poison();
    memcpy(g_got, g_send, sizeof(int));
    memcpy(g_want, g_send, sizeof(int));
    bcast(g_got, 10, mine ? g_flat : MPI_INT, root, comm);
    PMPI_Bcast(g_want, 10, mine ? g_flat : MPI_INT, root, comm);
    snprintf(what, sizeof what, "bcast zero-extent type at the root %d", root);
    check(BOOSTCOMM_MPI_ROUTED, what, 1, comm); /* the root's own buffer keeps its poison after one int */
  }
}

static void emptyGathers(MPI_Comm comm, int rank, int size) {
  char what[128];
  poison();
  allgather(g_send, 0, MPI_INT, g_got, 0, MPI_INT, comm);
  PMPI_Allgather(g_send, 0, MPI_INT, g_want, 0, MPI_INT, comm);
  check(BOOSTCOMM_MPI_NATIVE, "allgather count 0", 0, comm);
  for (int t = 0; t < 3; ++t) {
    poison();
    allgather(g_send, 10, g_empty[t], g_got, 10, g_empty[t], comm);
    PMPI_Allgather(g_send, 10, g_empty[t], g_want, 10, g_empty[t], comm);
    snprintf(what, sizeof what, "allgather 10 x %s", g_emptyName[t]);
    check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
    poison();
    allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_got, 10, g_empty[t], comm);
    PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_want, 10, g_empty[t], comm);
    snprintf(what, sizeof what, "allgather in place 10 x %s", g_emptyName[t]);
    check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
  }
  poison();
  allgather(g_send, 10, g_empty[0], g_got, 0, MPI_BYTE, comm);
  PMPI_Allgather(g_send, 10, g_empty[0], g_want, 0, MPI_BYTE, comm);
  check(BOOSTCOMM_MPI_NATIVE, "allgather empty, send and receive types differ", 0, comm);
  /* Not empty: each rank sends its first int 3 times (zero extent). */
  poison();
  allgather(g_send, 3, g_flat, g_got, 3, MPI_INT, comm);
  PMPI_Allgather(g_send, 3, g_flat, g_want, 3, MPI_INT, comm);
  check(BOOSTCOMM_MPI_ROUTED, "allgather zero-extent send type", 0, comm);

  int counts[8], displs[8];
  for (int i = 0; i < size; ++i) {
    counts[i] = 0;
    displs[i] = 3 * i;
  }
  poison();
  allgatherv(g_send, 0, MPI_INT, g_got, counts, displs, MPI_INT, comm);
  PMPI_Allgatherv(g_send, 0, MPI_INT, g_want, counts, displs, MPI_INT, comm);
  check(BOOSTCOMM_MPI_NATIVE, "allgatherv all counts 0", 0, comm);
  for (int i = 0; i < size; ++i) counts[i] = 5;
  poison();
  allgatherv(g_send, 5, g_empty[1], g_got, counts, displs, g_empty[1], comm);
  PMPI_Allgatherv(g_send, 5, g_empty[1], g_want, counts, displs, g_empty[1], comm);
  check(BOOSTCOMM_MPI_NATIVE, "allgatherv 5 x vector(3, 0, 2, int) each", 0, comm);
  /* Not empty: zero counts on the odd ranks, packed and then gapped displacements, and in place. */
  for (int layout = 0; layout < 2; ++layout) {
    int at = 0;
    for (int i = 0; i < size; ++i) {
      counts[i] = i % 2 ? 0 : 2 + i;
      displs[i] = counts[i] ? at + layout : 1000; /* an empty block's displacement is never used */
      at += counts[i] + layout;
    }
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      poison();
      if (inPlace) {
        memcpy(g_got + sizeof(int) * (size_t)displs[rank], g_send, sizeof(int) * (size_t)counts[rank]);
        allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g_got, counts, displs, MPI_INT, comm);
      } else {
        /* An empty block may come from a null buffer. */
        allgatherv(counts[rank] ? g_send : NULL, counts[rank], MPI_INT, g_got, counts, displs, MPI_INT, comm);
      }
      PMPI_Allgatherv(g_send, counts[rank], MPI_INT, g_want, counts, displs, MPI_INT, comm);
      snprintf(what, sizeof what, "allgatherv zero counts on odd ranks, %s%s", layout ? "gapped" : "packed",
               inPlace ? ", in place" : "");
      check(BOOSTCOMM_MPI_ROUTED, what, 0, comm);
    }
  }
}

static void emptyReductions(MPI_Comm comm, int size) {
  const MPI_Datatype types[] = {MPI_INT, MPI_FLOAT, MPI_DOUBLE};
  char what[128];
  for (int t = 0; t < 3; ++t) {
    poison();
    allreduce(g_send, g_got, 0, types[t], MPI_SUM, comm);
    PMPI_Allreduce(g_send, g_want, 0, types[t], MPI_SUM, comm);
    snprintf(what, sizeof what, "allreduce count 0 %s", typeName(types[t]));
    check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
    poison();
    allreduce(MPI_IN_PLACE, g_got, 0, types[t], MPI_MAX, comm);
    PMPI_Allreduce(MPI_IN_PLACE, g_want, 0, types[t], MPI_MAX, comm);
    strcat(what, " in place");
    check(BOOSTCOMM_MPI_NATIVE, what, 0, comm);
    poison();
    reduceScatterBlock(g_send, g_got, 0, types[t], comm);
    PMPI_Reduce_scatter_block(g_send, g_want, 0, types[t], MPI_SUM, comm);
    snprintf(what, sizeof what, "reduce_scatter_block count 0 %s", typeName(types[t]));
    check(BOOSTCOMM_MPI_NATIVE, what, 1, comm);
  }
  int counts[8];
  for (int i = 0; i < size; ++i) counts[i] = 0;
  poison();
  reduceScatter(g_send, g_got, counts, MPI_INT, comm);
  PMPI_Reduce_scatter(g_send, g_want, counts, MPI_INT, MPI_SUM, comm);
  check(BOOSTCOMM_MPI_NATIVE, "reduce_scatter all counts 0", 1, comm);
  /* Zero counts on some ranks only: unequal counts, which MPI serves. */
  for (int i = 0; i < size; ++i) counts[i] = i % 2 ? 0 : 3;
  poison();
  reduceScatter(g_send, g_got, counts, MPI_INT, comm);
  PMPI_Reduce_scatter(g_send, g_want, counts, MPI_INT, MPI_SUM, comm);
  check(BOOSTCOMM_MPI_COUNTS, "reduce_scatter zero counts on odd ranks", 1, comm);
}

/* Blocking then nonblocking, or the other way round (nonblockingFirst). */
static void sweep(MPI_Comm comm, int nonblockingFirst) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int pass = 0; pass < 2; ++pass) {
    g_nonblocking = pass ^ nonblockingFirst;
    emptyBcasts(comm, rank, size);
    emptyGathers(comm, rank, size);
    emptyReductions(comm, size);
  }
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  startTest(argc, argv);
  if (g_size > 8) fail("at most 8 ranks");
  makeTypes();
  /* The first call on MPI_COMM_WORLD is an empty bcast: it still sets the communicator up. */
  sweep(MPI_COMM_WORLD, 0);
  /* Nonblocking first, on a duplicate. */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  sweep(dup, 1);
  MPI_Comm_free(&dup);
  freeTypes();
  const int rc = finish("test_zero_bytes");
  MPI_Finalize();
  return rc;
}
