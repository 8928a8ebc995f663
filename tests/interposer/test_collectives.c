/* Every routed collective x dtype x op x size class, through MPI_* (routed
 * by libboostcomm_mpi.so when preloaded) against PMPI_* in the same run, on
 * MPI_COMM_WORLD, on a split made before the first collective, on a dup, and
 * on a split made after. Representation mixes that MPI allows (rank 0 sends
 * 4n MPI_FLOATs, the others receive n contiguous 4-float types; strided
 * vector types) must route on every rank alike and give MPI's bytes.
 * usage: test_collectives [--expect-preload] [--expect-disabled-bcast] */
#include <stdlib.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"
#include "check.h"
#include "data.h"

static const int kCounts[] = {0, 1, 7, 1031, 65537, 262147};
enum { kNumCounts = sizeof kCounts / sizeof kCounts[0] };
static int g_bcastDisabled = 0;
static int g_routed = BOOSTCOMM_MPI_ROUTED; /* what a servable call on the current comm ends with */


static void allreduceSuite(MPI_Comm comm, int rank, int maxCounts) {
  const MPI_Datatype types[] = {MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_LONG_LONG, MPI_LONG, MPI_UNSIGNED_CHAR};
  const MPI_Op ops[] = {MPI_SUM, MPI_MIN, MPI_MAX, MPI_PROD};
  char what[256];
  for (int t = 0; t < 6; ++t) {
    for (int o = 0; o < 4; ++o) {
      for (int c = 0; c < maxCounts; ++c) {
        const int n = kCounts[c];
        void* send = alloc(types[t], n);
        void* got = alloc(types[t], n);
        void* want = alloc(types[t], n);
        fill(send, types[t], n, rank, c + o, ops[o] == MPI_PROD);
        snprintf(what, sizeof what, "allreduce %s %s n=%d", typeName(types[t]), opName(ops[o]), n);
        /* Open MPI saturates 8-bit sums and products (ompi#8045): those stay with MPI. */
        const int expect = types[t] == MPI_UNSIGNED_CHAR && (ops[o] == MPI_SUM || ops[o] == MPI_PROD) &&
                                   g_routed == BOOSTCOMM_MPI_ROUTED
                               ? BOOSTCOMM_MPI_DATATYPE
                               : g_routed;
        MPI_Allreduce(send, got, n, types[t], ops[o], comm);
        expectReason(expect, what);
        PMPI_Allreduce(send, want, n, types[t], ops[o], comm);
        expectSame(got, want, n, types[t], 0, comm, what);
        memcpy(got, send, typeSize(types[t]) * (size_t)n);
        strcat(what, " in place");
        MPI_Allreduce(MPI_IN_PLACE, got, n, types[t], ops[o], comm);
        expectReason(expect, what);
        expectSame(got, want, n, types[t], 0, comm, what);
        free(send);
        free(got);
        free(want);
      }
    }
  }
  /* Fractional float sums: equal within reassociation. */
  float x[1031], y[1031], z[1031];
  for (int i = 0; i < 1031; ++i) x[i] = 0.1f * (float)(i % 17) + 0.01f * (float)rank;
  MPI_Allreduce(x, y, 1031, MPI_FLOAT, MPI_SUM, comm);
  expectReason(g_routed, "allreduce fractional float");
  PMPI_Allreduce(x, z, 1031, MPI_FLOAT, MPI_SUM, comm);
  expectSame(y, z, 1031, MPI_FLOAT, 1, comm, "allreduce fractional float");
}

static void bcastSuite(MPI_Comm comm, int rank, int size, int maxCounts) {
  const MPI_Datatype types[] = {MPI_BYTE, MPI_FLOAT, MPI_DOUBLE, MPI_INT};
  const int expect = g_bcastDisabled ? BOOSTCOMM_MPI_DISABLED : g_routed;
  char what[256];
  for (int t = 0; t < 4; ++t) {
    for (int c = 0; c < maxCounts; ++c) {
      for (int root = 0; root < size; root += (size > 1 ? size - 1 : 1)) {
        const int n = kCounts[c];
        void* got = alloc(types[t], n);
        void* want = alloc(types[t], n);
        fill(got, types[t], n, rank, c, 0);
        memcpy(want, got, typeSize(types[t]) * (size_t)n);
        snprintf(what, sizeof what, "bcast %s n=%d root=%d", typeName(types[t]), n, root);
        MPI_Bcast(got, n, types[t], root, comm);
        expectReason(expect, what);
        PMPI_Bcast(want, n, types[t], root, comm);
        expectSame(got, want, n, types[t], 0, comm, what);
        free(got);
        free(want);
        if (size == 1) break;
      }
    }
  }
  /* Root: 4n floats; others: n contiguous types of 4 floats. */
  MPI_Datatype four;
  MPI_Type_contiguous(4, MPI_FLOAT, &four);
  MPI_Type_commit(&four);
  const int n = 1031;
  float* buf = (float*)alloc(MPI_FLOAT, 4 * n);
  float* ref = (float*)alloc(MPI_FLOAT, 4 * n);
  fill(buf, MPI_FLOAT, 4 * n, rank, 5, 0);
  memcpy(ref, buf, sizeof(float) * 4 * n);
  if (rank == 0) MPI_Bcast(buf, 4 * n, MPI_FLOAT, 0, comm);
  else MPI_Bcast(buf, n, four, 0, comm);
  expectReason(expect, "bcast mixed float / contiguous type");
  PMPI_Bcast(ref, 4 * n, MPI_FLOAT, 0, comm);
  expectSame(buf, ref, 4 * n, MPI_FLOAT, 0, comm, "bcast mixed float / contiguous type");
  MPI_Type_free(&four);
  /* A strided vector type on every rank: every other float of 2n. */
  MPI_Datatype strided;
  MPI_Type_vector(n, 1, 2, MPI_FLOAT, &strided);
  MPI_Type_commit(&strided);
  fill(buf, MPI_FLOAT, 2 * n < 4 * n ? 2 * n : 4 * n, rank, 6, 0);
  memcpy(ref, buf, sizeof(float) * 4 * n);
  MPI_Bcast(buf, 1, strided, size - 1, comm);
  expectReason(expect, "bcast strided vector type");
  PMPI_Bcast(ref, 1, strided, size - 1, comm);
  /* The gaps between the strided elements keep each rank's own data. */
  expectLocal(buf, ref, 4 * n, MPI_FLOAT, "bcast strided vector type");
  MPI_Type_free(&strided);
  free(buf);
  free(ref);
}

static void allgatherSuite(MPI_Comm comm, int rank, int size, int maxCounts) {
  const MPI_Datatype types[] = {MPI_FLOAT, MPI_INT, MPI_BYTE};
  char what[256];
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < maxCounts && c < 5; ++c) {
      const int n = kCounts[c];
      const size_t es = typeSize(types[t]);
      void* send = alloc(types[t], n);
      void* got = alloc(types[t], n * size);
      void* want = alloc(types[t], n * size);
      fill(send, types[t], n, rank, c, 0);
      snprintf(what, sizeof what, "allgather %s n=%d", typeName(types[t]), n);
      MPI_Allgather(send, n, types[t], got, n, types[t], comm);
      expectReason(g_routed, what);
      PMPI_Allgather(send, n, types[t], want, n, types[t], comm);
      expectSame(got, want, n * size, types[t], 0, comm, what);
      memset(got, 0x5A, es * (size_t)(n * size > 0 ? n * size : 1));
      memcpy((char*)got + es * (size_t)n * (size_t)rank, send, es * (size_t)n);
      strcat(what, " in place");
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, n, types[t], comm);
      expectReason(g_routed, what);
      expectSame(got, want, n * size, types[t], 0, comm, what);
      free(send);
      free(got);
      free(want);
    }
  }
  /* Varying counts, packed and gapped (reversed) displacements, in place. */
  int* counts = (int*)malloc(sizeof(int) * (size_t)size);
  int* packed = (int*)malloc(sizeof(int) * (size_t)size);
  int* gapped = (int*)malloc(sizeof(int) * (size_t)size);
  int total = 0, span = 0;
  for (int i = 0; i < size; ++i) {
    counts[i] = 3 + 1000 * i;
    packed[i] = total;
    total += counts[i];
  }
  for (int i = size - 1; i >= 0; --i) {
    gapped[i] = span + 5;
    span += counts[i] + 5;
  }
  double* send = (double*)alloc(MPI_DOUBLE, counts[rank]);
  double* got = (double*)alloc(MPI_DOUBLE, span);
  double* want = (double*)alloc(MPI_DOUBLE, span);
  fill(send, MPI_DOUBLE, counts[rank], rank, 9, 0);
  for (int layout = 0; layout < 2; ++layout) {
    const int* displs = layout == 0 ? packed : gapped;
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      memset(got, 0x11, sizeof(double) * (size_t)span);
      memset(want, 0x11, sizeof(double) * (size_t)span);
      snprintf(what, sizeof what, "allgatherv %s%s", layout == 0 ? "packed" : "gapped", inPlace ? " in place" : "");
      if (inPlace) {
        memcpy(got + displs[rank], send, sizeof(double) * (size_t)counts[rank]);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, counts, displs, MPI_DOUBLE, comm);
      } else {
        MPI_Allgatherv(send, counts[rank], MPI_DOUBLE, got, counts, displs, MPI_DOUBLE, comm);
      }
      expectReason(g_routed, what);
      PMPI_Allgatherv(send, counts[rank], MPI_DOUBLE, want, counts, displs, MPI_DOUBLE, comm);
      expectSame(got, want, span, MPI_DOUBLE, 0, comm, what);
    }
  }
  free(send);
  free(got);
  free(want);
  free(counts);
  free(packed);
  free(gapped);
}

static void reduceScatterSuite(MPI_Comm comm, int rank, int size, int maxCounts) {
  const MPI_Datatype types[] = {MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_LONG_LONG};
  const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_PROD};
  char what[256];
  int* counts = (int*)malloc(sizeof(int) * (size_t)size);
  for (int t = 0; t < 4; ++t) {
    for (int o = 0; o < 3; ++o) {
      for (int c = 0; c < maxCounts && c < 5; ++c) {
        const int n = kCounts[c];
        const size_t es = typeSize(types[t]);
        void* send = alloc(types[t], n * size);
        void* got = alloc(types[t], n * size);
        void* want = alloc(types[t], n);
        fill(send, types[t], n * size, rank, c, ops[o] == MPI_PROD);
        snprintf(what, sizeof what, "reduce_scatter_block %s %s n=%d", typeName(types[t]), opName(ops[o]), n);
        MPI_Reduce_scatter_block(send, got, n, types[t], ops[o], comm);
        expectReason(g_routed, what);
        PMPI_Reduce_scatter_block(send, want, n, types[t], ops[o], comm);
        expectLocal(got, want, n, types[t], what);
        memcpy(got, send, es * (size_t)n * (size_t)size);
        strcat(what, " in place");
        MPI_Reduce_scatter_block(MPI_IN_PLACE, got, n, types[t], ops[o], comm);
        expectReason(g_routed, what);
        expectLocal(got, want, n, types[t], what);
        for (int i = 0; i < size; ++i) counts[i] = n;
        snprintf(what, sizeof what, "reduce_scatter equal %s %s n=%d", typeName(types[t]), opName(ops[o]), n);
        MPI_Reduce_scatter(send, got, counts, types[t], ops[o], comm);
        expectReason(g_routed, what);
        expectLocal(got, want, n, types[t], what);
        free(send);
        free(got);
        free(want);
      }
    }
  }
  /* Unequal recvcounts: PMPI, on every rank. */
  int total = 0;
  for (int i = 0; i < size; ++i) total += counts[i] = 2 + i;
  int* send = (int*)alloc(MPI_INT, total);
  int* got = (int*)alloc(MPI_INT, counts[rank]);
  int* want = (int*)alloc(MPI_INT, counts[rank]);
  fill(send, MPI_INT, total, rank, 3, 0);
  MPI_Reduce_scatter(send, got, counts, MPI_INT, MPI_SUM, comm);
  expectReason(size > 1 ? BOOSTCOMM_MPI_COUNTS : g_routed, "reduce_scatter unequal counts");
  PMPI_Reduce_scatter(send, want, counts, MPI_INT, MPI_SUM, comm);
  expectLocal(got, want, counts[rank], MPI_INT, "reduce_scatter unequal counts");
  free(send);
  free(got);
  free(want);
  free(counts);
  MPI_Barrier(comm);
  expectReason(g_routed, "barrier");
}

static void suite(MPI_Comm comm, int maxCounts) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  g_routed = size == 1 ? BOOSTCOMM_MPI_SINGLE_RANK : BOOSTCOMM_MPI_ROUTED;
  allreduceSuite(comm, rank, maxCounts);
  bcastSuite(comm, rank, size, maxCounts);
  allgatherSuite(comm, rank, size, maxCounts);
  reduceScatterSuite(comm, rank, size, maxCounts);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect-preload") == 0) g_expectPreload = 1;
    if (strcmp(argv[i], "--expect-disabled-bcast") == 0) g_bcastDisabled = 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_expectPreload && lastReason() == -2) fail("--expect-preload, but boostcomm_mpi_last_reason is not loaded");
  /* Made before any collective: set up at its own first call. */
  MPI_Comm before, dup, after;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_size - g_rank, &before);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  suite(MPI_COMM_WORLD, kNumCounts);
  suite(before, 4);  /* a split of one rank (np 2, 3: rank 1's half) falls through: see its reasons */
  suite(dup, 4);
  MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : 1, g_rank, &after);
  suite(after, 4);
  MPI_Comm_free(&before);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&after);
  const int rc = finish("test_collectives");
  MPI_Finalize();
  return rc;
}
