"""Unchanged DDP training on the boostcomm backend, compared with gloo.

    mpirun -np 2 --oversubscribe --bind-to none /usr/bin/python3 examples/python/ddp_train.py --model cnn
    mpirun -np 2 --oversubscribe --bind-to none /usr/bin/python3 examples/python/ddp_train.py --model transformer

Trains the same model from the same initial weights on the same synthetic
data twice, once with DDP over gloo and once over boostcomm, and prints the
loss curves, the step times and the largest parameter difference at the end
(float rounding only: both average the same gradients). The training loop is
plain PyTorch; only the process group differs.
"""

import argparse
import copy
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct
from ddp_benchmark import MODELS, batch_of, loss_of


def train(model, group, data_seed, steps, batch, model_name):
    ddp = DDP(model, process_group=group)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(data_seed)
    losses, start = [], time.perf_counter()
    for _ in range(steps):
        x, y = batch_of(model_name, batch, gen)  # a fresh synthetic batch per step
        opt.zero_grad()
        loss = loss_of(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, (time.perf_counter() - start) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["cnn", "transformer", "mlp"], default="cnn")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16)
    args = p.parse_args()
    torch.set_num_threads(1)

    bct.init_process_group("gloo")  # env:// from the MPI launcher; DDP code below is unchanged
    rank = dist.get_rank()
    bc = dist.new_group(backend="boostcomm")

    torch.manual_seed(0)
    base = MODELS[args.model]()
    results = {}
    for name, group in (("gloo", dist.group.WORLD), ("boostcomm", bc)):
        model = copy.deepcopy(base)
        losses, step_s = train(model, group, 100 + rank, args.steps, args.batch, args.model)
        results[name] = (model, losses, step_s)

    diff = max((a - b).abs().max().item() for a, b in zip(results["gloo"][0].parameters(),
                                                            results["boostcomm"][0].parameters()))
    stats = boostcomm.get_overlap_stats()
    if rank == 0:
        print(f"{args.model}: {sum(p.numel() for p in base.parameters()):,} parameters, "
              f"{dist.get_world_size()} ranks, batch {args.batch}/rank, {args.steps} steps")
        for name, (_, losses, step_s) in results.items():
            curve = " ".join(f"{v:.3f}" for v in losses[:: max(1, len(losses) // 8)])
            print(f"  {name:10} {step_s * 1e3:8.1f} ms/step   loss {curve} ... {losses[-1]:.3f}")
        print(f"  largest parameter difference gloo vs boostcomm: {diff:.2e}")
        print(f"  boostcomm overlap: {stats.efficiency:.0f}% of {stats.comm_time * 1e3:.1f} ms communication hidden")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
