"""Cost per call of the flight recorder's Python stacks (docs/RELIABILITY.md):
a Python loop of 8-byte allreduces, called 12 frames deep so that the capture
walks its full depth. Run it twice side by side, with and without:

    for f in 8 0 8 0 8 0; do BOOSTCOMM_PYTHON_STACK_FRAMES=$f mpirun -np 2 --oversubscribe \\
        --bind-to none python3 scripts/python_stack_cost.py; done

Prints (rank 0) the median over blocks of the time per call in microseconds,
and the capture alone (the same frames, no collective) in ns."""

import os
import statistics
import time

import numpy as np

import boostcomm

BLOCKS, CALLS = 21, 2000


def nested(depth, fn):
    return fn() if depth == 0 else nested(depth - 1, fn)


def main():
    comm = boostcomm.comm_init(boostcomm._C.launcher_rank(), boostcomm._C.launcher_size(), device_id=0)
    x = np.ones(2, np.float32)

    def loop():
        for _ in range(CALLS):
            boostcomm.all_reduce(x)

    nested(12, loop)  # warm-up (first-call setup)
    per_call = []
    for _ in range(BLOCKS):
        start = time.perf_counter()
        nested(12, loop)
        per_call.append((time.perf_counter() - start) / CALLS * 1e6)
    capture_ns = [nested(12, lambda: boostcomm._C._caller_capture_ns(100000)) for _ in range(5)]
    if comm.rank == 0:
        frames = os.environ.get("BOOSTCOMM_PYTHON_STACK_FRAMES", "8")
        print(f"frames={frames} median_us_per_call={statistics.median(per_call):.3f} "
              f"min={min(per_call):.3f} capture_alone_ns={statistics.median(capture_ns):.0f}")


if __name__ == "__main__":
    main()
