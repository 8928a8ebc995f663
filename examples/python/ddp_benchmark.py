"""DDP step time: boostcomm backend vs gloo, same model, same run.

    mpirun -np 2 --oversubscribe --bind-to none .venv/bin/python \
        examples/python/ddp_benchmark.py --model mlp --reps 7
    torchrun --standalone --nproc-per-node 2 examples/python/ddp_benchmark.py --model bert

For each backend the step is also timed under DDP's no_sync() (same model,
same data, no gradient communication): that is the compute floor, and
DDP's overhead = step - floor. Backends and floors are measured interleaved
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


def block(ddp, opt, data, steps, sync, barrier_group):
    """Mean seconds per step over `steps` steps (slowest rank). `ddp` is a
    DDP module, or the plain model when `opt` is a boostcomm.DistributedOptimizer
    (whose no_sync() then gives the floor)."""
    no_sync = ddp.no_sync if isinstance(ddp, DDP) else opt.no_sync
    dist.barrier(group=barrier_group)
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        if sync:
            loss_of(ddp(data[0]), data[1]).backward()
        else:
            with no_sync():
                loss_of(ddp(data[0]), data[1]).backward()
        opt.step()
    elapsed = torch.tensor([(time.perf_counter() - start) / steps])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=barrier_group)
    return elapsed.item()


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
    for name, group in (("gloo", gloo), ("boostcomm", bc)) + ((("optimizer", None),) if args.optimizer else ()):
        gen = torch.Generator().manual_seed(1234 + rank)
        torch.manual_seed(0)
        model, data = MODELS[args.model](), batch_of(args.model, args.batch, gen)
        if group is None:  # no DDP: the plain model, boostcomm.DistributedOptimizer averages
            ddp = model
            opt = boostcomm.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3), model)
        else:
            ddp = DDP(model, process_group=group)
            opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        runs[name] = (ddp, opt, data)
        for _ in range(args.warmup):
            block(ddp, opt, data, 1, True, gloo)
            block(ddp, opt, data, 1, False, gloo)

    times = {f"{n}_{k}": [] for n in runs for k in ("step", "floor")}
    boostcomm.get_overlap_stats(reset=True)
    opt_hidden = opt_comm = 0.0
    for _ in range(args.reps):
        for name, (ddp, opt, data) in runs.items():
            times[f"{name}_step"].append(block(ddp, opt, data, args.steps, True, gloo))
            if name == "optimizer":
                s = opt.overlap_stats()
                opt_comm, opt_hidden = s["mean"]["comm_seconds"], s["mean"]["hidden_seconds"]
            times[f"{name}_floor"].append(block(ddp, opt, data, args.steps, False, gloo))
    overlap = boostcomm.get_overlap_stats()

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
    result["step_speedup"] = med["gloo_step"] / med["boostcomm_step"]
    result["boostcomm_overlap_efficiency_pct"] = overlap.efficiency
    result["boostcomm_overlap"] = args.overlap
    result["boostcomm_stages"] = args.stages
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
        if args.optimizer:
            print(f"optimizer (boostcomm.DistributedOptimizer, no DDP): step speedup over DDP/gloo "
                  f"{result['optimizer_step_speedup']:.2f}x, overhead / gloo overhead "
                  f"{result['optimizer_overhead_ms'] / g if g > 0 else float('nan'):.3f}, "
                  f"{result['optimizer_overlap_efficiency_pct']:.0f}% of its communication hidden")
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
