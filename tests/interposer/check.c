#include "check.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "boostcomm/mpi_interposer.h"

int g_rank = 0, g_size = 1, g_failures = 0, g_checks = 0, g_expectPreload = 0;

int lastReason(void) {
  static int (*fn)(void) = NULL;
  static int looked = 0;
  if (!looked) {
    fn = (int (*)(void))dlsym(RTLD_DEFAULT, "boostcomm_mpi_last_reason");
    looked = 1;
  }
  return fn ? fn() : -2;
}

void startTest(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--expect-preload") == 0) g_expectPreload = 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_expectPreload && lastReason() == -2) fail("--expect-preload, but boostcomm_mpi_last_reason is not loaded");
}

void fail(const char* what) {
  ++g_failures;
  if (g_failures <= 20) fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what);
}

void expectReason(int reason, const char* what) {
  ++g_checks;
  if (!g_expectPreload) return;
  const int got = lastReason();
  /* Expecting "routed" accepts "native": the selection picked MPI's algorithm. */
  if (got != reason && !(reason == BOOSTCOMM_MPI_ROUTED && got == BOOSTCOMM_MPI_NATIVE)) {
    char text[512];
    snprintf(text, sizeof text, "%s: interposer reason %d, expected %d", what, got, reason);
    fail(text);
  }
}

static uint64_t hashBytes(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void compare(const void* got, const void* want, int count, MPI_Datatype type, int approx, const char* what);

void expectLocal(const void* got, const void* want, int count, MPI_Datatype type, const char* what) {
  ++g_checks;
  compare(got, want, count, type, 0, what);
}

void expectSame(const void* got, const void* want, int count, MPI_Datatype type, int approx, MPI_Comm comm,
                const char* what) {
  ++g_checks;
  compare(got, want, count, type, approx, what);
  int size = 0;
  PMPI_Type_size(type, &size);
  const size_t bytes = (size_t)count * (size_t)size;
  /* Every rank of the communicator holds the same bits. */
  uint64_t h = hashBytes((const unsigned char*)got, bytes), lo = 0, hi = 0;
  PMPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
  PMPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
  if (lo != hi) {
    char text[512];
    snprintf(text, sizeof text, "%s: ranks hold different results", what);
    fail(text);
  }
}

static void compare(const void* got, const void* want, int count, MPI_Datatype type, int approx, const char* what) {
  int size = 0;
  PMPI_Type_size(type, &size);
  const size_t bytes = (size_t)count * (size_t)size;
  int bad = -1;
  if (approx && (type == MPI_FLOAT || type == MPI_DOUBLE)) {
    for (int i = 0; i < count && bad < 0; ++i) {
      const double g = type == MPI_FLOAT ? ((const float*)got)[i] : ((const double*)got)[i];
      const double w = type == MPI_FLOAT ? ((const float*)want)[i] : ((const double*)want)[i];
      const double tol = (type == MPI_FLOAT ? 1e-5 : 1e-12) * (fabs(w) + 1.0) * g_size;
      if (!(fabs(g - w) <= tol)) bad = i;
    }
  } else if (bytes > 0 && memcmp(got, want, bytes) != 0) {
    for (size_t i = 0; i < bytes; ++i) {
      if (((const unsigned char*)got)[i] != ((const unsigned char*)want)[i]) {
        bad = (int)(i / (size_t)(size ? size : 1));
        break;
      }
    }
  }
  if (bad >= 0) {
    char text[512];
    snprintf(text, sizeof text, "%s: element %d differs from PMPI", what, bad);
    fail(text);
  }
}

int finish(const char* program) {
  int failures = 0, checks = 0;
  PMPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  PMPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) {
    printf("%s: %d ranks, %d checks, %d failures%s\n", program, g_size, checks, failures,
           g_expectPreload ? " (preloaded)" : "");
  }
  return failures == 0 && checks > 0 ? 0 : 1;
}
