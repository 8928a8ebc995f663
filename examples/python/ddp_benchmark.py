"""DDP step time: boostcomm backend vs gloo, same model, same run.

    mpirun -np 2 --oversubscribe --bind-to none .venv/bin/python \
        examples/python/ddp_benchmark.py --model mlp --reps 7
    torchrun --standalone --nproc-per-node 2 examples/python/ddp_benchmark.py --model bert

For each backend the step is also timed under DDP's no_sync() (same model,
same data, no gradient communication): that is the compute floor, and
DDP's overhead = step - floor. The floors of the two backends run the same
compute, so their difference is noise (or a backend's threads taking CPU
while nothing communicates): the overhead against the lower of the two
floors is printed too, a ratio that such noise moves less. Backends and floors are measured interleaved
(gloo step, gloo floor, boostcomm step, boostcomm floor, repeated), so
machine noise hits all four alike; each figure is the median over reps of
the mean step time of one block of --steps steps, slowest rank.

--optimizer adds a third configuration, interleaved with the others: the
plain model (no DDP) with boostcomm.DistributedOptimizer, whose no_sync()
gives its floor; its overlap efficiency is the engine's (docs/OVERLAP.md).
"""

import argparse
import gc
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct


def mlp():
    # 512 -> 1024 -> 1024 -> 10: 1,585,162 parameters (6.3 MB of float32 gradients)
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                               torch.nn.ReLU(), torch.nn.Linear(1024, 10))


class SmallTransformer(torch.nn.Module):
    """2-layer encoder, d_model 128, 4 heads, FF 512, vocab 1000, sequence 32 (~0.8M parameters)."""

    def __init__(self, vocab=1000, d_model=128, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=512, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


class BertLike(torch.nn.Module):
    """A BERT-base-like encoder cut to 6 layers: d_model 768, 12 heads, FF 3072,
    vocab 10000, sequence 64 (57.9M parameters, 232 MB of float32 gradients)."""

    def __init__(self, vocab=10000, d_model=768, layers=6):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, nhead=12, dim_feedforward=3072, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


class SmallCNN(torch.nn.Module):
    """Conv 3->32->64 on 32x32 images, 10 classes (~0.55M parameters)."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(64 * 8 * 8, 128)
        self.out = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.out(torch.relu(self.head(self.features(x).flatten(1))))


MODELS = {"mlp": mlp, "transformer": SmallTransformer, "cnn": SmallCNN, "bert": BertLike}


def batch_of(name, batch, gen):
    """A synthetic (input, target) batch for model `name`."""
    if name == "mlp":
        return torch.randn(batch, 512, generator=gen), torch.randint(0, 10, (batch,), generator=gen)
    if name == "transformer":
        return (torch.randint(0, 1000, (batch, 32), generator=gen),
                torch.randint(0, 1000, (batch, 32), generator=gen))
    if name == "bert":
        return (torch.randint(0, 10000, (batch, 64), generator=gen),
                torch.randint(0, 10000, (batch, 64), generator=gen))
    return torch.randn(batch, 3, 32, 32, generator=gen), torch.randint(0, 10, (batch,), generator=gen)


def loss_of(out, target):
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


def thread_cpu():
    """CPU seconds each thread of this process has used, {tid: (name, seconds)}:
    the kernel's per-thread accounting (the CPU-time clock of each tid, kept
    in nanoseconds), read for every thread of /proc/self/task."""
    out = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            out[tid] = (name, time.clock_gettime(((~tid) << 3) | 6))  # CPUCLOCK_SCHED of thread tid
        except OSError:  # the thread ended meanwhile
            pass
    return out


def thread_kind(tid, name):
    """Whose thread: boostcomm's are named bc-* (src/core/thread_name.h); the
    main thread runs the model (forward, backward, optimizer); the rest are
    the framework's and the backends' (gloo's TCP loop and workers, Open MPI's)."""
    if tid == os.getpid():
        return "main"
    return "boostcomm" if name.startswith("bc-") else "other"


def cpu_by_kind(before, after):
    """CPU seconds per kind of thread between two thread_cpu() readings."""
    used = {"main": 0.0, "boostcomm": 0.0, "other": 0.0}
    for tid, (name, sec) in after.items():
        used[thread_kind(tid, name)] += sec - before.get(tid, (name, 0.0))[1]
    return used


def cpu_by_name(before, after):
    """CPU seconds per thread name (threads of one name added up) between two
    thread_cpu() readings; the main thread is "main"."""
    used = {}
    for tid, (name, sec) in after.items():
        key = "main" if tid == os.getpid() else name
        used[key] = used.get(key, 0.0) + sec - before.get(tid, (name, 0.0))[1]
    return used


class BucketClock:
    """--timeline: DDP's allreduce hook, timed. Each bucket is averaged and
    allreduced as the default hook does (divide by the world size, one
    asynchronous all_reduce); the clock records when the bucket was ready
    (the hook ran), when the call returned (launched), and when its future
    completed (on whichever thread completed it)."""

    def __init__(self, group):
        self.group = group
        self.world = dist.get_world_size(group)
        self.events = []  # [index, bytes, ready, launched, done]

    def hook(self, _state, bucket):
        ready = time.perf_counter()
        t = bucket.buffer()
        t.div_(self.world)
        fut = dist.all_reduce(t, group=self.group, async_op=True).get_future()
        rec = [bucket.index(), t.numel() * t.element_size(), ready, time.perf_counter(), None]
        self.events.append(rec)

        def done(f):
            rec[4] = time.perf_counter()
            return f.value()[0]

        return fut.then(done)


def block(ddp, opt, data, steps, sync, barrier_group, clock=None, marks=None, names=None):
    """Mean seconds per step over `steps` steps (slowest rank), and this rank's
    CPU seconds per step by kind of thread (`names`, a list, also gets them by
    thread name). `ddp` is a DDP module, or the plain
    model when `opt` is a boostcomm.DistributedOptimizer (whose no_sync() then
    gives the floor). `marks` (with --timeline) gets per step the times of its
    start, of backward's start and of backward's return."""
    no_sync = ddp.no_sync if isinstance(ddp, DDP) else opt.no_sync
    dist.barrier(group=barrier_group)
    cpu0 = thread_cpu()
    start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if sync:
            loss = loss_of(ddp(data[0]), data[1])
            t1 = time.perf_counter()
            loss.backward()
        else:
            with no_sync():
                loss = loss_of(ddp(data[0]), data[1])
                t1 = time.perf_counter()
                loss.backward()
        t2 = time.perf_counter()
        opt.step()
        if marks is not None:
            marks.append((t0, t1, t2))
    seconds = time.perf_counter() - start
    cpu1 = thread_cpu()
    cpu = {k: v / steps for k, v in cpu_by_kind(cpu0, cpu1).items()}
    if names is not None:
        names.append({k: v / steps for k, v in cpu_by_name(cpu0, cpu1).items()})
    elapsed = torch.tensor([seconds / steps])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=barrier_group)
    return elapsed.item(), cpu


def last_step_timeline(clocks, marks):
    """Per DDP backend, the buckets of the last timed step (times in ms from
    the start of its backward pass), and the median backward time of the
    step and floor blocks."""
    out = {}
    for name, clock in clocks.items():
        t0, t1, t2 = marks[f"{name}_step"][-1]
        buckets = [{"index": i, "bytes": n, "ready_ms": (r - t1) * 1e3, "launch_ms": (l - r) * 1e3,
                    "done_ms": (d - t1) * 1e3 if d is not None else None}
                   for i, n, r, l, d in clock.events if t1 <= r <= t2]
        out[name] = {"forward_ms": (t1 - t0) * 1e3, "backward_ms": (t2 - t1) * 1e3, "buckets": buckets,
                     "backward_median_ms": statistics.median((b - a) * 1e3 for _, a, b in marks[f"{name}_step"]),
                     "floor_backward_median_ms":
                         statistics.median((b - a) * 1e3 for _, a, b in marks[f"{name}_floor"])}
    return out


def print_cpu(all_cpu, runs):
    print("CPU ms per step by thread (median over blocks; kernel per-thread clocks): main = the model's "
          "thread, boostcomm = bc-* threads, other = the rest (gloo's, Open MPI's, torch's)")
    print(f"{'rank':>4} {'run':16} {'main':>8} {'boostcomm':>10} {'other':>8}")
    for rank, rank_cpu in enumerate(all_cpu):
        for name in runs:
            for kind in ("step", "floor"):
                c = rank_cpu[f"{name}_{kind}"]
                print(f"{rank:4} {name + ' ' + kind:16} {c['main'] * 1e3:8.1f} {c['boostcomm'] * 1e3:10.1f} "
                      f"{c['other'] * 1e3:8.1f}")


def print_cpu_by_name(all_names, runs):
    print("CPU ms per step by thread name (median over blocks; threads of one name added up; under 0.5 ms left out)")
    for rank, rank_names in enumerate(all_names):
        for name in runs:
            for kind in ("step", "floor"):
                used = sorted(rank_names[f"{name}_{kind}"].items(), key=lambda kv: -kv[1])
                print(f"{rank:4} {name + ' ' + kind:16} " +
                      ", ".join(f"{n} {v * 1e3:.1f}" for n, v in used if v >= 5e-4))


def print_timeline(timelines, world):
    print("buckets of the last step (ms from the start of backward; took = done - ready; "
          "MB/s = allreduce bus bytes 2(n-1)/n x size / took)")
    for rank, per_backend in enumerate(timelines):
        for name, t in per_backend.items():
            print(f"rank {rank} {name}: forward {t['forward_ms']:.1f}, backward {t['backward_ms']:.1f} "
                  f"(median {t['backward_median_ms']:.1f}; no_sync floor's {t['floor_backward_median_ms']:.1f})")
            for b in t["buckets"]:
                took = b["done_ms"] - b["ready_ms"] if b["done_ms"] is not None else float("nan")
                rate = 2 * (world - 1) / world * b["bytes"] / (took * 1e3) if took > 0 else float("nan")
                print(f"  bucket {b['index']:2} {b['bytes'] / 2**20:7.2f} MiB ready {b['ready_ms']:8.1f} "
                      f"launch {b['launch_ms']:6.2f} done {b['done_ms'] if b['done_ms'] is not None else float('nan'):8.1f} "
                      f"took {took:7.1f} ({rate:6.1f} MB/s)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["mlp", "transformer", "cnn", "bert"], default="mlp")
    p.add_argument("--torchvision", metavar="ARCH",
                   help="with --model cnn: torchvision.models.ARCH(num_classes=10) instead of the small CNN "
                        "(e.g. resnet18, resnet50; without torchvision, image_models.py's ResNets)")
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--steps", type=int, default=10, help="steps per timed block")
    p.add_argument("--reps", type=int, default=7, help="timed blocks per configuration (median)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--json", help="write the results here (rank 0)")
    p.add_argument("--overlap", choices=["on", "off"], default="on",
                   help="boostcomm backend: off = each collective completes before DDP goes on")
    p.add_argument("--stages", type=int, default=2, help="boostcomm collectives in flight at once")
    p.add_argument("--optimizer", action="store_true",
                   help="also time the plain loop with boostcomm.DistributedOptimizer (no DDP)")
    p.add_argument("--timeline", action="store_true",
                   help="time every bucket of the last step (DDP hook: ready, launched, done) on every rank "
                        "and print it; the hook does what DDP's default one does, in Python")
    p.add_argument("--cpu-by-name", action="store_true",
                   help="also print each rank's CPU per step by thread name (median over the blocks)")
    args = p.parse_args()

    if args.torchvision:
        if args.model != "cnn":
            p.error("--torchvision needs --model cnn (its 3x32x32 image batches)")
        import image_models  # torchvision's models, or the same ResNets without torchvision
        try:
            image_models.build(args.torchvision, num_classes=10)
        except (ValueError, AttributeError) as error:
            p.error(f"--torchvision: {error}")
        MODELS["cnn"] = lambda: image_models.build(args.torchvision, num_classes=10)
    torch.set_num_threads(args.threads)
    boostcomm.configure_overlap(enable=args.overlap == "on", overlap_stages=args.stages)
    bct.init_process_group("gloo")
    rank = dist.get_rank()
    gloo = dist.group.WORLD
    bc = dist.new_group(backend="boostcomm")

    if args.optimizer:
        boostcomm.comm_init(rank, dist.get_world_size(), 0)
    runs = {}
    clocks = {}
    for name, group in (("gloo", gloo), ("boostcomm", bc)) + ((("optimizer", None),) if args.optimizer else ()):
        gen = torch.Generator().manual_seed(1234 + rank)
        torch.manual_seed(0)
        model, data = MODELS[args.model](), batch_of(args.model, args.batch, gen)
        if group is None:  # no DDP: the plain model, boostcomm.DistributedOptimizer averages
            ddp = model
            opt = boostcomm.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3), model)
        else:
            ddp = DDP(model, process_group=group)
            if args.timeline:
                clocks[name] = BucketClock(group)
                ddp.register_comm_hook(None, clocks[name].hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        runs[name] = (ddp, opt, data)
        for _ in range(args.warmup):
            block(ddp, opt, data, 1, True, gloo)
            block(ddp, opt, data, 1, False, gloo)

    times = {f"{n}_{k}": [] for n in runs for k in ("step", "floor")}
    cpus = {key: [] for key in times}
    names = {key: [] for key in times}
    marks = {key: [] for key in times}
    for c in clocks.values():
        c.events.clear()
    boostcomm.get_overlap_stats(reset=True)
    opt_hidden = opt_comm = 0.0
    for _ in range(args.reps):
        for name, (ddp, opt, data) in runs.items():
            for kind in ("step", "floor"):
                key = f"{name}_{kind}"
                if kind == "floor" and name == "optimizer":
                    s = opt.overlap_stats()
                    opt_comm, opt_hidden = s["mean"]["comm_seconds"], s["mean"]["hidden_seconds"]
                seconds, cpu = block(ddp, opt, data, args.steps, kind == "step", gloo,
                                     marks=marks[key] if args.timeline else None,
                                     names=names[key] if args.cpu_by_name else None)
                times[key].append(seconds)
                cpus[key].append(cpu)
    overlap = boostcomm.get_overlap_stats()
    # This rank's CPU per step by kind of thread (median over the blocks), every rank's on rank 0.
    my_cpu = {key: {k: statistics.median(c[k] for c in v) for k in v[0]} for key, v in cpus.items()}
    all_cpu = [None] * dist.get_world_size()
    dist.all_gather_object(all_cpu, my_cpu, group=gloo)
    all_names = [None] * dist.get_world_size()
    if args.cpu_by_name:
        my_names = {key: {n: statistics.median(c.get(n, 0.0) for c in v) for n in set().union(*v)}
                    for key, v in names.items()}
        dist.all_gather_object(all_names, my_names, group=gloo)
    timelines = [None] * dist.get_world_size()
    if args.timeline:
        dist.all_gather_object(timelines, last_step_timeline(clocks, marks), group=gloo)

    med = {k: statistics.median(v) for k, v in times.items()}
    if args.torchvision:
        import image_models
        label = f"{image_models.source()}.{args.torchvision}"
    result = {"model": label if args.torchvision else args.model, "parameters": sum(p.numel() for p in runs["gloo"][0].parameters()),
              "batch_per_rank": args.batch, "world_size": dist.get_world_size(), "steps": args.steps,
              "reps": args.reps, "threads": args.threads, "median_seconds": med, "samples_seconds": times}
    for name in runs:
        result[f"{name}_overhead_ms"] = (med[f"{name}_step"] - med[f"{name}_floor"]) * 1e3
    g, b = result["gloo_overhead_ms"], result["boostcomm_overhead_ms"]
    result["overhead_ratio"] = b / g if g > 0 else float("nan")
    # Against the lower of the two DDP floors (the same compute): step - that floor.
    common = min(med["gloo_floor"], med["boostcomm_floor"])
    result["common_floor_ms"] = common * 1e3
    cg = (med["gloo_step"] - common) * 1e3
    cb = (med["boostcomm_step"] - common) * 1e3
    result["gloo_overhead_common_ms"], result["boostcomm_overhead_common_ms"] = cg, cb
    result["overhead_ratio_common"] = cb / cg if cg > 0 else float("nan")
    result["step_speedup"] = med["gloo_step"] / med["boostcomm_step"]
    result["boostcomm_overlap_efficiency_pct"] = overlap.efficiency
    result["boostcomm_overlap"] = args.overlap
    result["boostcomm_stages"] = args.stages
    result["cpu_ms_per_step"] = [{key: {k: v * 1e3 for k, v in c.items()} for key, c in rank_cpu.items()}
                                 for rank_cpu in all_cpu]
    if args.timeline:
        result["timeline"] = timelines
    if args.optimizer:
        result["optimizer_step_speedup"] = med["gloo_step"] / med["optimizer_step"]
        result["optimizer_overlap_efficiency_pct"] = 100.0 * opt_hidden / opt_comm if opt_comm > 0 else 100.0
    if rank == 0:
        print(f"model {result['model']}: {result['parameters']:,} parameters, batch {args.batch}/rank, "
              f"{dist.get_world_size()} ranks, {args.reps} x {args.steps} steps, {args.threads} thread(s)/rank")
        print(f"{'backend':10} {'step ms':>9} {'floor ms':>9} {'overhead ms':>12}")
        for name in runs:
            print(f"{name:10} {med[name + '_step'] * 1e3:9.2f} {med[name + '_floor'] * 1e3:9.2f} "
                  f"{result[name + '_overhead_ms']:12.2f}")
        print(f"boostcomm overhead / gloo overhead = {result['overhead_ratio']:.3f}; "
              f"step speedup {result['step_speedup']:.2f}x; boostcomm: {overlap.count} collectives, "
              f"{overlap.comm_time * 1e3:.1f} ms in flight, {overlap.efficiency:.0f}% of it hidden")
        print(f"against the lower floor ({result['common_floor_ms']:.2f} ms): overhead gloo "
              f"{result['gloo_overhead_common_ms']:.2f} ms, boostcomm {result['boostcomm_overhead_common_ms']:.2f} ms, "
              f"ratio {result['overhead_ratio_common']:.3f}")
        if args.optimizer:
            print(f"optimizer (boostcomm.DistributedOptimizer, no DDP): step speedup over DDP/gloo "
                  f"{result['optimizer_step_speedup']:.2f}x, overhead / gloo overhead "
                  f"{result['optimizer_overhead_ms'] / g if g > 0 else float('nan'):.3f}, "
                  f"{result['optimizer_overlap_efficiency_pct']:.0f}% of its communication hidden")
        print_cpu(all_cpu, runs)
        if args.cpu_by_name:
            print_cpu_by_name(all_names, runs)
        if args.timeline:
            print_timeline(timelines, dist.get_world_size())
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    # torch 1.13's ~ProcessGroupGloo runs with the GIL held and waits for its
    # worker threads, while a worker still releasing its last work's tensors
    # needs the GIL: a deadlock seen once in a while when the DDP models (their
    # Reducers hold the gloo group) died at return. So drop them while the
    # group is still registered, let the workers finish without the GIL held,
    # and only then destroy the groups.
    runs.clear()
    del ddp, opt, model, data
    gc.collect()
    time.sleep(0.2)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
