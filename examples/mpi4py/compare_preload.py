"""Runs allreduce_bench.py with and without libboostcomm_mpi.so preloaded,
alternating (A, B, A, B, ...) so both see the same machine load, and prints a
markdown table of medians and ratios (plain / preloaded: > 1 means faster
with the interposer).

    .venv/bin/python examples/mpi4py/compare_preload.py --lib build/src/interposer/libboostcomm_mpi.so \\
        [--np 2] [--rounds 3] [--sizes ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(np_, lib, sizes, reps, budget):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_)]
    if lib:
        cmd += ["-x", "LD_PRELOAD=" + os.path.abspath(lib)]
    cmd += [sys.executable, os.path.join(HERE, "allreduce_bench.py"), "--reps", str(reps),
            "--budget-s", str(budget), "--json", out]
    if sizes:
        cmd += ["--sizes", sizes]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    return {r["bytes"]: r for r in data["results"]}


def human(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n // k} {unit}"
    return f"{n} B"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=0.2)
    p.add_argument("--sizes", default="")
    a = p.parse_args()
    plain, pre = [], []
    for i in range(a.rounds):
        print(f"round {i + 1}/{a.rounds}", file=sys.stderr, flush=True)
        plain.append(run(a.np, "", a.sizes, a.reps, a.budget_s))
        pre.append(run(a.np, a.lib, a.sizes, a.reps, a.budget_s))
    print(f"| bytes | MPI (us) | preloaded (us) | speedup | results |")
    print(f"|---:|---:|---:|---:|---|")
    for nbytes in sorted(plain[0]):
        m = statistics.median(r[nbytes]["median_us"] for r in plain)
        b = statistics.median(r[nbytes]["median_us"] for r in pre)
        ok = all(r[nbytes]["correct"] for r in plain + pre)
        print(f"| {human(nbytes)} | {m:.2f} | {b:.2f} | {m / b:.2f}x | {'exact' if ok else 'WRONG'} |")


if __name__ == "__main__":
    main()
