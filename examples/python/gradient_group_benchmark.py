"""GradientGroup through the Python API, as a trainer uses it, against
per-tensor and packed MPI allreduce, on a real model's gradient list.

    mpirun -np 2 --oversubscribe --bind-to none python3 examples/python/gradient_group_benchmark.py \
        [--model resnet50] [--iters 10] [--repeats 7]

The gradients are persistent torch tensors of the model's parameter shapes
(torchvision; ResNet-50: 161 tensors, 25,557,032 float32). Methods, timed in
interleaved rounds (each round runs a block of --iters steps of every method,
so load hits all alike; step = block time / iters, max over ranks; reported:
the median over rounds):
  mpi_per_tensor  boostcomm.all_reduce(g, algorithm="native") per tensor: the
                  backend's MPI_Allreduce straight away (the direct route)
  mpi_packed      pack into one persistent buffer, one MPI_Allreduce, unpack
  group           GradientGroup(grads) (the default: segment lists), built once
  group_view      GradientGroup(grads, bucket_view=True) over group.tensors
  group_packed    GradientGroup(grads, pack_buckets=True) (the former default)
Every method is checked first (exact integer sums). Construction time of each
group mode: median of 5 constructions, max over ranks.
"""
import argparse
import statistics
import time

import numpy as np
import torch

import boostcomm


def model_shapes(name):
    import image_models  # torchvision's models, or the same ResNets without torchvision
    model = image_models.build(name)
    return [tuple(p.shape) for p in model.parameters()]


def max_over_ranks(value):
    x = np.array([value], dtype=np.float64)
    boostcomm.all_reduce(x, op="max")
    return float(x[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(1)
    comm = boostcomm.comm_init()
    rank, size = comm.rank, comm.size
    shapes = list(reversed(model_shapes(args.model)))  # backward order, as DDP buckets them
    grads = [torch.zeros(s) for s in shapes]
    count = sum(g.numel() for g in grads)

    flat = torch.zeros(count)
    pieces = list(flat.split([g.numel() for g in grads]))

    def per_tensor(ts):
        for g in ts:
            boostcomm.all_reduce(g, algorithm="native")

    def packed(ts):
        torch.cat([g.view(-1) for g in ts], out=flat)
        boostcomm.all_reduce(flat, algorithm="native")
        for g, p in zip(ts, pieces):
            g.view(-1).copy_(p)

    build_ms = {}

    def build(**kw):
        times, group = [], None
        for _ in range(5):
            del group
            boostcomm.barrier()
            t0 = time.perf_counter()
            group = boostcomm.GradientGroup(grads, **kw)
            times.append(max_over_ranks((time.perf_counter() - t0) * 1e3))
        return group, statistics.median(times)

    group, build_ms["group"] = build()
    view, build_ms["group_view"] = build(bucket_view=True)
    packed_group, build_ms["group_packed"] = build(pack_buckets=True)
    methods = {
        "mpi_per_tensor": (lambda: per_tensor(grads), grads),
        "mpi_packed": (lambda: packed(grads), grads),
        "group": (group.all_reduce, grads),
        "group_view": (view.all_reduce, view.tensors),
        "group_packed": (packed_group.all_reduce, grads),
    }
    # Check: element i of tensor t on rank r = (i % 7 + 1) * (r + 1); sums are exact.
    for name, (step, ts) in methods.items():
        for t in ts:
            t.view(-1).copy_((torch.arange(t.numel()) % 7 + 1).float() * (rank + 1))
        step()
        want = size * (size + 1) / 2
        for k, t in enumerate(ts):
            expected = (torch.arange(t.numel()) % 7 + 1).float() * want
            if not torch.equal(t.view(-1), expected):
                raise SystemExit(f"{name}: tensor {k} wrong on rank {rank}")
    steps = {name: [] for name in methods}
    for name, (step, ts) in methods.items():
        for t in ts:
            t.fill_(0.5)
        for _ in range(args.warmup):
            step()
    for _ in range(args.repeats):
        for name, (step, ts) in methods.items():
            for t in ts:
                t.fill_(0.5)
            boostcomm.barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                step()
            steps[name].append(max_over_ranks((time.perf_counter() - t0) * 1e3 / args.iters))
    if rank == 0:
        med = {n: statistics.median(v) for n, v in steps.items()}
        best = min(med["mpi_per_tensor"], med["mpi_packed"])
        print(f"# {args.model}: {len(grads)} tensors, {count} float32, {size} ranks, "
              f"{args.repeats} rounds of {args.iters} steps; speedup = better baseline / method")
        print(f"{'method':16s} {'median_ms':>10s} {'min_ms':>8s} {'max_ms':>8s} {'speedup':>8s} {'build_ms':>9s}")
        for n, v in steps.items():
            print(f"{n:16s} {med[n]:10.2f} {min(v):8.2f} {max(v):8.2f} {best / med[n]:8.2f} "
                  f"{build_ms.get(n, 0.0):9.2f}")
        print(f"# group / group_view time: {med['group'] / med['group_view']:.2f}")


if __name__ == "__main__":
    main()
