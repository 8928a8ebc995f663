"""mpi4py allreduce loop, timed per size: the program whose MPI_Allreduce
libboostcomm_mpi.so accelerates when preloaded (no code change).

    mpirun -np 2 [-x LD_PRELOAD=build/src/interposer/libboostcomm_mpi.so] \\
        .venv/bin/python examples/mpi4py/allreduce_bench.py [--sizes 8,4096,1048576] [--json out.json]

Each size: warm-up, then `reps` samples of `iters` back-to-back
comm.Allreduce(send, recv, MPI.SUM) on float32 numpy arrays; a sample is the
slowest rank's mean time per call; rank 0 prints the median sample. The result
of the last call is checked against the exact sum (inputs are small integers).
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI


def parse_sizes(text):
    return [int(s) for s in text.split(",")]


def default_sizes():
    return [8 << (2 * i) for i in range(13)]  # 8 B, 32 B, ..., 128 MiB -> trimmed below


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=parse_sizes, default=[s for s in default_sizes() if s <= 64 << 20])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--budget-s", type=float, default=0.25, help="target seconds per sample")
    p.add_argument("--json", default="")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    results = []
    for nbytes in a.sizes:
        n = max(1, nbytes // 4)
        send = ((np.arange(n, dtype=np.int64) * 7 + rank * 31) % 13 - 6).astype(np.float32)
        recv = np.empty_like(send)
        want = sum(((np.arange(n, dtype=np.int64) * 7 + r * 31) % 13 - 6) for r in range(size)).astype(np.float32)
        # Calibrate: double the batch until it takes a quarter of the budget
        # (also the warm-up); every rank uses rank 0's count.
        iters = 1
        while True:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                comm.Allreduce(send, recv, MPI.SUM)
            took = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
            if took >= a.budget_s / 4 or iters >= 1 << 20:
                break
            iters *= 2
        iters = comm.bcast(max(1, int(iters * a.budget_s / max(took, 1e-9))), root=0)
        samples = []
        for _ in range(a.reps):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                comm.Allreduce(send, recv, MPI.SUM)
            dt = (time.perf_counter() - t0) / iters
            samples.append(comm.allreduce(dt, op=MPI.MAX))
        ok = bool(np.array_equal(recv, want))
        ok = comm.allreduce(ok, op=MPI.LAND)
        med = float(np.median(samples))
        results.append({"bytes": n * 4, "iters": iters, "median_us": med * 1e6,
                        "samples_us": [s * 1e6 for s in samples], "correct": ok})
        if rank == 0:
            print(f"{n * 4:>10} B  {med * 1e6:12.2f} us  (iters {iters}, {'ok' if ok else 'WRONG'})", flush=True)
    if rank == 0 and a.json:
        with open(a.json, "w") as f:
            json.dump({"ranks": size, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
