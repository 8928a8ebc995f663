"""Collectives on the boostcomm backend's store transport vs gloo, same job, no mpirun.

    python3 examples/python/store_collectives_benchmark.py --launch 2 [--sizes 8,65536,...] [--reps 20]

--launch N starts N ranks on this host with env:// (MASTER_ADDR=127.0.0.1, a free port).
Every rank makes boostcomm its default group and a gloo group over the same processes;
for each collective and size the two are timed interleaved (boostcomm, gloo, boostcomm, ...),
each sample a blocking call bracketed by barriers on its own group, and rank 0 prints the
median of each and the ratio gloo / boostcomm (> 1: boostcomm faster).
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

DEFAULT_SIZES = [8, 1024, 65536, 1 << 20, 16 << 20]


def launch(n, argv):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(n))
    procs = [subprocess.Popen([sys.executable, __file__] + argv, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(n)]
    sys.exit(max(p.wait() for p in procs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--launch", type=int, default=0)
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="bytes per rank's tensor")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--colls", default="allreduce,broadcast,allgather")
    args, rest = ap.parse_known_args()
    if args.launch:
        argv = [a for a in sys.argv[1:]]
        i = argv.index("--launch")
        del argv[i:i + 2]
        launch(args.launch, argv)

    import torch
    import torch.distributed as dist
    import boostcomm.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("boostcomm")
    rank, size = dist.get_rank(), dist.get_world_size()
    bc = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")

    def op(coll, group, n):
        x = torch.ones(n)
        if coll == "allreduce":
            return lambda: dist.all_reduce(x, group=group)
        if coll == "broadcast":
            return lambda: dist.broadcast(x, src=0, group=group)
        # The list form: gloo (torch 1.13) has no _allgather_base and no reduce_scatter.
        outs = [torch.empty(n) for _ in range(size)]
        return lambda: dist.all_gather(outs, x, group=group)

    rows = []
    for coll in args.colls.split(","):
        for nbytes in map(int, args.sizes.split(",")):
            n = max(1, nbytes // 4)
            fns = {"boostcomm": op(coll, bc, n), "gloo": op(coll, gloo, n)}
            times = {k: [] for k in fns}
            reps = args.reps if nbytes < (4 << 20) else max(5, args.reps // 4)
            for name, fn in fns.items():  # warm-up
                fn(); fn()
            for _ in range(reps):
                for name, fn in fns.items():
                    group = bc if name == "boostcomm" else gloo
                    dist.barrier(group=group)
                    t0 = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t0)
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((coll, nbytes, med["boostcomm"], med["gloo"]))
    if rank == 0:
        print(f"world {size}, load {os.getloadavg()[0]:.1f}, reps {args.reps}")
        print("| collective | bytes | boostcomm median us | gloo median us | gloo / boostcomm |")
        print("|---|---|---|---|---|")
        for coll, nbytes, b, g in rows:
            print(f"| {coll} | {nbytes} | {b * 1e6:.0f} | {g * 1e6:.0f} | {g / b:.2f}x |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
