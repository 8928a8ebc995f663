/* Per-call cost of the interposer on a small MPI_Allreduce, for
 * docs/MPI_INTERPOSER.md: runs `iters` 8-byte float allreduces (argv[1]) and
 * prints the mean time. Run it under callgrind with two iteration counts and
 * take the difference of the instruction counts to get instructions per call
 * (independent of machine load), with and without the preload. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long iters = argc > 1 ? atol(argv[1]) : 10000;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  float x[2] = {1.0f, 2.0f}, y[2];
  MPI_Allreduce(x, y, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* setup outside the loop */
  const double t0 = MPI_Wtime();
  for (long i = 0; i < iters; ++i) MPI_Allreduce(x, y, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double t = (MPI_Wtime() - t0) / (double)iters;
  if (rank == 0) printf("%ld x 8 B allreduce: %.3f us per call\n", iters, t * 1e6);
  MPI_Finalize();
  return 0;
}
