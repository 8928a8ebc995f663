"""FSDP2 step time on gloo and on boostcomm, interleaved in one job.

    mpirun -np 4 --oversubscribe --bind-to none .venv/bin/python examples/python/fsdp2_benchmark.py
    scripts/emucluster.sh run -- -np 4 -x PYTHONPATH .venv/bin/python examples/python/fsdp2_benchmark.py --wire bf16

(with PYTHONPATH=build/python from the source tree). The model and data are
fsdp2_train.py's. The default group runs on gloo; a second group over the
same ranks on boostcomm; each gets its own DeviceMesh (DeviceMesh.from_group)
and its own copy of the model, fully_shard'ed the same way (every block, then
the root), with the same initial weights and batches. After --warmup steps
each, blocks of --steps steps alternate between the two, --reps times (the
order flips every rep, so neither always goes first); a block's time is the
slowest rank's. A third arm, "floor", trains the same model unsharded on each
rank alone (no communication at all) in the same rotation: step - floor is
what sharding costs each backend (communication not hidden behind compute,
plus FSDP's own copies). Prints each rep's ms per step, the medians, the
speedup (gloo's time / boostcomm's), both backends' cost over the floor and
their ratio, and the models' last losses.

--wire bf16|fp16|auto adds a fourth arm, "boostcomm+WIRE": a third group
over the same ranks on boostcomm with boostcomm.torch.set_wire(WIRE), so
16-bit messages on the links of its reduce-scatters and all-gathers (the
numerics then differ from gloo's: the losses are printed side by side).

--hsdp shards within pairs of consecutive ranks and replicates across them
(HSDP on a (replicate, shard) mesh of 2 x world/2, each arm's own groups): with
mpirun's default placement and 2 ranks per node, the (node, local) mesh,
whose only inter-node traffic is the gradients' allreduce across replicas.

--collectives BYTES,... times FSDP's pair instead of training: for each size
(of the full, unsharded float32 tensor) reduce_scatter_tensor and
all_gather_into_tensor on each group, the arms interleaved call by call
(each call bracketed by a barrier on its own group), --reps calls per arm
after two untimed ones; prints the slowest rank's median ms and the speedups
against gloo.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

import boostcomm.torch as bct

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fsdp2_train import TransformerLM, add_model_arguments, batch_of  # noqa: E402  (the example's model and data)


def hsdp_groups(backend, size):
    """(replicate, shard) groups of this rank on `backend` for a 2 x size/2 mesh
    of consecutive ranks: shard groups {0..h-1}, {h..2h-1}; replicate {i, h+i}."""
    half, rank = size // 2, dist.get_rank()
    mine = {}
    for kind, members in [("shard", list(range(0, half))), ("shard", list(range(half, size)))] + \
                         [("replicate", [i, half + i]) for i in range(half)]:
        g = dist.new_group(ranks=members, backend=backend)  # collective over the world
        if rank in members:
            mine[kind] = g
    return [mine["replicate"], mine["shard"]]


def build(group, args):
    """The model on `group` (fully_shard'ed; a [replicate, shard] pair: HSDP),
    or unsharded with group None."""
    torch.manual_seed(0)
    model = TransformerLM(args.vocab, args.dim, args.heads, args.layers, args.seq)
    if group is not None:
        if isinstance(group, list):
            size = dist.get_world_size()
            mesh = DeviceMesh.from_group(group, "cpu", mesh=torch.arange(size).view(2, size // 2),
                                         mesh_dim_names=("replicate", "shard"))
        else:
            mesh = DeviceMesh.from_group(group, "cpu")
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=args.lr)


def run_steps(model, opt, batches):
    loss = None
    for x, y in batches:
        loss = F.cross_entropy(model(x).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item()


def timed(model, opt, batches):
    """Seconds of the slowest rank for `batches` (the default group's barrier
    and max, outside the timed region)."""
    dist.barrier()
    start = time.perf_counter()
    loss = run_steps(model, opt, batches)
    t = torch.tensor([time.perf_counter() - start])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item(), loss


def collectives(groups, sizes, reps):
    rank, n = dist.get_rank(), dist.get_world_size()
    names = [name for name, g in groups.items() if g is not None]
    for nbytes in sizes:
        count = nbytes // 4 // n * n
        full, shard = torch.randn(count), torch.randn(count // n)
        ms = {}
        for coll in ("reduce_scatter_tensor", "all_gather_into_tensor"):
            samples = {name: [] for name in names}
            for it in range(reps + 2):
                for name in names:
                    g = groups[name]
                    dist.barrier(group=g)
                    start = time.perf_counter()
                    if coll == "reduce_scatter_tensor":
                        dist.reduce_scatter_tensor(shard, full, group=g)
                    else:
                        dist.all_gather_into_tensor(full, shard, group=g)
                    if it >= 2:
                        samples[name].append(time.perf_counter() - start)
            for name in names:
                t = torch.tensor([statistics.median(samples[name])])
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                ms[(coll, name)] = 1e3 * t.item()
        if rank == 0:
            for coll in ("reduce_scatter_tensor", "all_gather_into_tensor"):
                base = ms[(coll, "gloo")]
                print(f"{nbytes >> 10} KiB {coll}: " + ", ".join(
                    f"{name} {ms[(coll, name)]:.2f} ms" + ("" if name == "gloo" else f" ({base / ms[(coll, name)]:.2f}x)")
                    for name in names), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4, help="steps per timed block")
    p.add_argument("--reps", type=int, default=5, help="timed blocks per backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per backend first")
    p.add_argument("--wire", choices=["off", "bf16", "fp16", "auto"], default="off")
    add_model_arguments(p)
    p.add_argument("--hsdp", action="store_true", help="a (replicate, shard) mesh of 2 x world/2 per arm")
    p.add_argument("--collectives", default="",
                   help="comma-separated sizes in bytes: time reduce_scatter_tensor / all_gather_into_tensor instead")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    bct.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.hsdp and (size % 2 or args.collectives):
        raise SystemExit("--hsdp needs an even number of ranks and training (not --collectives)")
    new = (lambda backend: hsdp_groups(backend, size)) if args.hsdp else \
        (lambda backend: dist.group.WORLD if backend == "gloo" else dist.new_group(backend=backend))
    groups = {"gloo": new("gloo"), "boostcomm": new("boostcomm")}
    wired = f"boostcomm+{args.wire}"
    if args.wire != "off":
        groups[wired] = new("boostcomm")
        for g in groups[wired] if args.hsdp else [groups[wired]]:
            bct.set_wire(g, args.wire)
    groups["floor"] = None
    if args.collectives:
        collectives(groups, [int(s) for s in args.collectives.split(",")], max(args.reps, 3))
        if args.wire != "off" and rank == 0:
            print(f"{wired} wire counts: {bct.wire_counts(groups[wired])}", flush=True)
        dist.destroy_process_group()
        return
    models = {name: build(g, args) for name, g in groups.items()}
    gen = torch.Generator().manual_seed(1000 + rank)
    total = args.warmup + args.reps * args.steps
    data = [batch_of(gen, args.batch, args.seq, args.vocab) for _ in range(total)]
    if rank == 0:
        params = sum(q.numel() for q in TransformerLM(args.vocab, args.dim, args.heads, args.layers, args.seq).parameters())
        print(f"{size} ranks, {params} parameters, {'HSDP 2 x ' + str(size // 2) if args.hsdp else 'flat'} mesh, "
              f"blocks of {args.steps} steps x {args.reps} reps per arm, wire {args.wire}", flush=True)
    losses = {}
    for name, (model, opt) in models.items():
        losses[name] = run_steps(model, opt, data[:args.warmup])
    ms = {name: [] for name in models}
    for rep in range(args.reps):
        batches = data[args.warmup + rep * args.steps: args.warmup + (rep + 1) * args.steps]
        names = list(models)
        order = names[rep % len(names):] + names[:rep % len(names)]  # each arm first in turn
        for name in order:
            seconds, losses[name] = timed(*models[name], batches)
            ms[name].append(1e3 * seconds / args.steps)
        if rank == 0:
            print(f"rep {rep}: " + ", ".join(f"{n} {ms[n][-1]:.1f}" for n in models) + " ms/step", flush=True)
    if rank == 0:
        med = {n: statistics.median(v) for n, v in ms.items()}
        print("median ms/step: " + ", ".join(f"{n} {med[n]:.1f}" for n in models), flush=True)
        for n in models:
            if n in ("gloo", "floor"):
                continue
            cost, base = med[n] - med["floor"], med["gloo"] - med["floor"]
            print(f"{n}: speedup {med['gloo'] / med[n]:.2f}x gloo; over the floor {cost:.1f} ms against gloo's "
                  f"{base:.1f} (ratio {cost / base:.2f})", flush=True)
        print("last loss (rank 0's batch): " + ", ".join(f"{n} {losses[n]:.6f}" for n in models) +
              " (floor: rank 0 alone)", flush=True)
        if args.wire != "off":
            for g in groups[wired] if args.hsdp else [groups[wired]]:
                print(f"{wired} wire counts: {bct.wire_counts(g)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
