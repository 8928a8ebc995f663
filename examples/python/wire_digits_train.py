"""Training evidence for 16-bit wire formats: scikit-learn's digits, DDP.

    mpirun -np 2 --oversubscribe --bind-to none /usr/bin/python3 examples/python/wire_digits_train.py \
        --out /tmp/digits_np2.json
    python3 examples/python/wire_digits_train.py --plot docs/img/wire_digits.png /tmp/digits_np*.json

Trains one small MLP on the 8x8 digits images that python3-sklearn ships
(1797 samples, 10 classes; 80/20 split, fixed seed) with DDP over gloo,
once per gradient exchange, from the same initial weights on the same
batches:
  float32         DDP's own allreduce (the reference);
  bc-bf16+ef      boostcomm.wire_hooks.bf16_wire_hook, error feedback on;
  bc-bf16         the same without error feedback;
  bc-fp16+ef      boostcomm.wire_hooks.fp16_wire_hook, error feedback on;
  torch-bf16      torch's default_hooks.bf16_compress_hook (casts the
                  bucket to bfloat16 and allreduces bfloat16 tensors, here
                  on a boostcomm process group since gloo cannot sum
                  bfloat16; called through a wrapper, see attach());
  group-bf16+ef   no hook: DDP on a boostcomm process group with
                  boostcomm.torch.set_wire(group, "bf16", error_feedback=True)
                  (run it with BOOSTCOMM_ALGO=allreduce:ring, or the group's
                  selection moves float32 on one host: wire_counts says).
The boostcomm hooks force the flat ring (algorithm="ring"): on one host the
selection would move float32 through shared memory, and the point here is
what the rounding does to training. First measures each exchange's
averaged gradient against a float64 reference (--error-batches). Prints per-epoch loss and test
accuracy, the final accuracy and the median step time per mode; --out
writes them as JSON (rank 0), --plot draws loss curves from such files.
"""

import argparse
import copy
import json
import statistics
import sys
import time

MODES = ["float32", "bc-bf16+ef", "bc-bf16", "bc-fp16+ef", "torch-bf16", "group-bf16+ef"]


def load_digits(seed):
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split
    import torch
    x, y = sk_digits(return_X_y=True)
    x = x / 16.0  # pixel values 0..16
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    as_t = lambda a, t: torch.tensor(a, dtype=t)  # noqa: E731
    return (as_t(xtr, torch.float32), as_t(ytr, torch.int64), as_t(xte, torch.float32), as_t(yte, torch.int64))


def make_model(seed):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                               torch.nn.ReLU(), torch.nn.Linear(128, 10))


_group = None


def _bf16_group():
    global _group
    if _group is None:
        import torch.distributed as dist
        _group = dist.new_group(backend="boostcomm")
    return _group


_wired = None


def _wire_group():
    """The boostcomm group of mode group-bf16+ef (bf16 wire, error feedback)."""
    global _wired
    if _wired is None:
        import torch.distributed as dist
        import boostcomm.torch as bct
        _wired = dist.new_group(backend="boostcomm")
        bct.set_wire(_wired, "bf16", error_feedback=True)
    return _wired


class _GroupCounts:
    """wire_counts of the group mode, shaped like a hook state's."""

    def __init__(self, group):
        import boostcomm.torch as bct
        bct.wire_counts(group, reset=True)
        self.group = group

    @property
    def wire_counts(self):
        import boostcomm.torch as bct
        return {k: v for k, v in bct.wire_counts(self.group).items() if v}


def attach(ddp, mode):
    """Registers the mode's comm hook; returns the hook state (or None)."""
    import boostcomm.wire_hooks as wh
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    if mode == "float32":
        return None
    if mode == "torch-bf16":
        # torch 1.13's register_comm_hook refuses this hook by name without
        # CUDA 11 + NCCL 2.10 (a GPU-only check; gloo sums bfloat16 on CPU):
        # call it, unchanged, through a wrapper of another name.
        # Gloo 1.13 cannot sum bfloat16 ("Invalid scalar type"), so the hook
        # allreduces on a boostcomm process group, which can (bfloat16 in
        # memory: each partial sum is stored as bfloat16, as with NCCL).
        def torch_bf16_compress(state, bucket):
            return default_hooks.bf16_compress_hook(state, bucket)
        ddp.register_comm_hook(_bf16_group(), torch_bf16_compress)
        return None
    wire = "fp16" if "fp16" in mode else "bf16"
    state = wh.WireHookState(wire=wire, error_feedback=mode.endswith("+ef"), algorithm="ring")
    ddp.register_comm_hook(state, wh.bf16_wire_hook if wire == "bf16" else wh.fp16_wire_hook)
    return state


def train(mode, data, args, rank, world):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    xtr, ytr, xte, yte = data
    if mode == "group-bf16+ef":
        ddp = DDP(make_model(args.seed), process_group=_wire_group())
        state = _GroupCounts(_wire_group())
    else:
        ddp = DDP(make_model(args.seed))
        state = attach(ddp, mode)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(args.seed + 1)  # the same batches on every rank and in every mode
    per_rank = args.batch // world
    losses, accuracies, step_ms = [], [], []
    for _ in range(args.epochs):
        order = torch.randperm(len(xtr), generator=gen)
        total, batches = torch.zeros(1, dtype=torch.float64), 0
        for start in range(0, len(order) - args.batch + 1, args.batch):
            mine = order[start + rank * per_rank:start + (rank + 1) * per_rank]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(xtr[mine]), ytr[mine])
            loss.backward()
            opt.step()
            step_ms.append((time.perf_counter() - t0) * 1e3)
            total += loss.item()
            batches += 1
        dist.all_reduce(total)  # float64 over gloo: the mean training loss of the epoch over all ranks
        losses.append(total.item() / batches / world)
        with torch.no_grad():
            accuracies.append((ddp.module(xte).argmax(1) == yte).double().mean().item() * 100)
    # DDP keeps replicas identical: check it (bitwise) before trusting the numbers.
    flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    identical = all(torch.equal(gathered[0], g) for g in gathered)
    return {"loss": losses, "test_accuracy": accuracies, "final_accuracy": accuracies[-1],
            "median_step_ms": statistics.median(step_ms), "ranks_identical": identical,
            "wire_counts": dict(state.wire_counts) if state is not None else {}}


def gradient_error(data, args, rank, world):
    """How far each exchange's averaged gradient is from the float64 mean of
    the ranks' float32 gradients: relative to sum|g_r|/n per element, max and
    mean over every element of the first --error-batches batches (the initial
    model; no feedback, which by design changes a step's result)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    xtr, ytr = data[0], data[1]
    per_rank = args.batch // world
    order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(args.seed + 1))
    out = {}
    for mode in ("bc-bf16", "bc-fp16", "torch-bf16"):
        worst, total, elements = 0.0, 0.0, 0
        ddp = DDP(make_model(args.seed))
        attach(ddp, mode)
        for b in range(args.error_batches):
            batch = order[b * args.batch:(b + 1) * args.batch]
            local = []  # every rank's float32 gradients, recomputed here from the shared batch order
            for r in range(world):
                m = make_model(args.seed)
                idx = batch[r * per_rank:(r + 1) * per_rank]
                torch.nn.functional.cross_entropy(m(xtr[idx]), ytr[idx]).backward()
                local.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).double())
            stacked = torch.stack(local)
            exact, scale = stacked.mean(0), stacked.abs().sum(0) / world
            ddp.zero_grad()
            mine = batch[rank * per_rank:(rank + 1) * per_rank]
            torch.nn.functional.cross_entropy(ddp(xtr[mine]), ytr[mine]).backward()
            got = torch.cat([p.grad.reshape(-1) for p in ddp.module.parameters()]).double()
            nz = scale > 0
            rel = (got - exact).abs()[nz] / scale[nz]
            worst = max(worst, rel.max().item())
            total += rel.sum().item()
            elements += rel.numel()
        out[mode] = {"max_rel_error": worst, "mean_rel_error": total / elements}
    return out


def run(args):
    import torch
    import torch.distributed as dist
    import boostcomm
    import boostcomm.torch as bct
    torch.set_num_threads(1)
    comm = boostcomm.comm_init()
    bct.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the world size {world}")
    data = load_digits(args.seed)
    results = {"world_size": world, "epochs": args.epochs, "batch": args.batch, "lr": args.lr, "seed": args.seed,
               "modes": {}}
    if args.error_batches:
        results["gradient_error"] = gradient_error(data, args, rank, world)
        if rank == 0:
            for mode, e in results["gradient_error"].items():
                print(f"{mode:12s} averaged gradient vs float64: max rel {e['max_rel_error']:.2e}  "
                      f"mean rel {e['mean_rel_error']:.2e}", flush=True)
    for mode in args.modes:
        r = train(mode, data, args, rank, world)
        results["modes"][mode] = r
        if rank == 0:
            print(f"{mode:12s} final accuracy {r['final_accuracy']:6.2f}%  final loss {r['loss'][-1]:.5f}  "
                  f"median step {r['median_step_ms']:.2f} ms  ranks identical {r['ranks_identical']}  "
                  f"wire {r['wire_counts']}", flush=True)
    if rank == 0:
        ref = results["modes"].get("float32")
        if ref:
            for mode, r in results["modes"].items():
                print(f"{mode:12s} accuracy - float32: {r['final_accuracy'] - ref['final_accuracy']:+.2f} pp  "
                      f"step time / float32: {r['median_step_ms'] / ref['median_step_ms']:.2f}")
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)
    dist.destroy_process_group()
    del comm


def plot(png, files):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = [json.load(open(f)) for f in files]
    fig, axes = plt.subplots(len(runs), 2, figsize=(11, 3.6 * len(runs)), squeeze=False)
    for row, run_ in zip(axes, runs):
        for mode, r in run_["modes"].items():
            epochs = range(1, len(r["loss"]) + 1)
            row[0].plot(epochs, r["loss"], label=mode)
            row[1].plot(epochs, r["test_accuracy"], label=f"{mode} ({r['final_accuracy']:.2f}%)")
        row[0].set(title=f"digits, {run_['world_size']} ranks: training loss", xlabel="epoch", ylabel="loss",
                   yscale="log")
        row[1].set(title=f"{run_['world_size']} ranks: test accuracy", xlabel="epoch", ylabel="%",
                   ylim=(90, 100))
        for ax in row:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=90)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=48, help="global batch (a multiple of the world size)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    p.add_argument("--error-batches", type=int, default=10,
                   help="first measure each exchange's gradient error on this many batches (0: skip)")
    p.add_argument("--out", help="write the results as JSON (rank 0)")
    p.add_argument("--plot", nargs="+", metavar=("PNG", "JSON"), help="draw PNG from result files and exit")
    args = p.parse_args()
    if args.plot:
        if len(args.plot) < 2:
            p.error("--plot PNG RESULT.json [RESULT.json ...]")
        plot(args.plot[0], args.plot[1:])
        return
    args.modes = args.modes.split(",")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        p.error(f"--modes: unknown {unknown}; valid: {', '.join(MODES)}")
    run(args)


if __name__ == "__main__":
    sys.exit(main())
