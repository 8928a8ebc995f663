"""Collectives on the boostcomm backend's store transport vs gloo, same job, no mpirun.

    python3 examples/python/store_collectives_benchmark.py --launch 2 [--sizes 8,65536,...] [--reps 20] [--runs 3]
        [--colls allreduce,broadcast,allgather,reduce_scatter_tensor,all_gather_into_tensor]

--launch N starts N ranks on this host with env:// (MASTER_ADDR=127.0.0.1, a free port).
Every rank makes boostcomm its default group and a gloo group over the same processes;
for each collective and size the two are timed interleaved (boostcomm, gloo, boostcomm, ...),
each sample a blocking call bracketed by barriers on its own group, and rank 0 prints the
median of each and the ratio gloo / boostcomm (> 1: boostcomm faster). With --runs R the whole
sweep is repeated R times in the same processes; the table gives the median over runs of each
run's median, and the range of the ratio over runs in brackets.
On one host boostcomm's built-in table picks shm (a POSIX shared-memory segment) for allreduce,
broadcast and allgather; reduce_scatter_tensor and all_gather_into_tensor (FSDP's pair) go
through the library's reduce_scatter and allgather, whose selection decides likewise.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

DEFAULT_SIZES = [8, 1024, 65536, 1 << 20, 16 << 20, 256 << 20]


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
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                    help="bytes per rank's tensor (of the full tensor for the two FSDP collectives)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--colls", default="allreduce,broadcast,allgather",
                    help="any of allreduce, broadcast, allgather (list form; bytes per rank's tensor), "
                         "reduce_scatter_tensor, all_gather_into_tensor (bytes of the full tensor)")
    ap.add_argument("--runs", type=int, default=1)
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
        # FSDP's pair, sized by the full (unsharded) tensor of n elements:
        # each rank holds n / size of it.
        shard = max(1, n // size)
        if coll == "reduce_scatter_tensor":
            full, part = torch.ones(shard * size), torch.empty(shard)
            return lambda: dist.reduce_scatter_tensor(part, full, group=group)
        if coll == "all_gather_into_tensor":
            full, part = torch.empty(shard * size), torch.ones(shard)
            return lambda: dist.all_gather_into_tensor(full, part, group=group)
        if coll != "allgather":
            raise SystemExit(f"--colls: unknown collective {coll!r}")
        outs = [torch.empty(n) for _ in range(size)]
        return lambda: dist.all_gather(outs, x, group=group)

    def sweep():
        rows = {}
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
                rows[(coll, nbytes)] = {k: statistics.median(v) for k, v in times.items()}
        return rows

    loads = []
    runs = []
    for _ in range(args.runs):
        loads.append(os.getloadavg()[0])
        runs.append(sweep())
    if rank == 0:
        print(f"world {size}, load {min(loads):.1f}-{max(loads):.1f} (1-min average at each run's start), "
              f"reps {args.reps}, runs {args.runs}")
        print("| collective | bytes | boostcomm median us | gloo median us | gloo / boostcomm [range over runs] |")
        print("|---|---|---|---|---|")
        for key in runs[0]:
            b = statistics.median(r[key]["boostcomm"] for r in runs)
            g = statistics.median(r[key]["gloo"] for r in runs)
            ratios = [r[key]["gloo"] / r[key]["boostcomm"] for r in runs]
            print(f"| {key[0]} | {key[1]} | {b * 1e6:.0f} | {g * 1e6:.0f} | {statistics.median(ratios):.2f}x "
                  f"[{min(ratios):.2f}-{max(ratios):.2f}] |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
