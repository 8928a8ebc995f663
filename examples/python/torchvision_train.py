"""Train a torchvision model with unchanged DDP code on the boostcomm backend,
launched any way PyTorch jobs are launched.

The model is torchvision's where torchvision imports, else the same ResNet
from image_models.py (torch 2.13.0's CPU build has no matching torchvision on
PyPI). The data is scikit-learn's bundled digits set (1797 real 8x8
images of 10 digits), upsampled to --size x --size RGB so an
ImageNet architecture accepts it; each rank trains on its own shard and the
held-out fifth is scored at the end. The training loop is plain PyTorch.

    # torchrun
    torchrun --standalone --nproc_per_node 2 examples/python/torchvision_train.py
    # env:// by hand, one command per rank
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 python3 examples/python/torchvision_train.py &
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 python3 examples/python/torchvision_train.py
    # file://, one command per rank
    WORLD_SIZE=2 RANK=0 python3 examples/python/torchvision_train.py --init file:///tmp/rdv &
    WORLD_SIZE=2 RANK=1 python3 examples/python/torchvision_train.py --init file:///tmp/rdv
    # mpirun (MPI transport)
    mpirun -np 2 --oversubscribe --bind-to none python3 examples/python/torchvision_train.py
    # the emulated 2-node cluster, torchrun on each node (docs/PYTHON.md, "Launch recipes")

Prints, on rank 0, the loss every few steps, the median step time, the
held-out accuracy, and whether every rank ends with rank 0's weights. --backend gloo runs the
same script on gloo for comparison.
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm.torch as bct
import image_models


def launched_by_mpi():
    return "OMPI_COMM_WORLD_SIZE" in os.environ and "RANK" not in os.environ


def init(args):
    if launched_by_mpi():
        bct.init_process_group(args.backend)  # sets RANK / WORLD_SIZE / MASTER_* from mpirun
        return "mpirun"
    if args.init.startswith("file://"):
        dist.init_process_group(args.backend, init_method=args.init, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))
        return "file://"
    dist.init_process_group(args.backend, init_method="env://")
    return "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "env://"


def digits(size):
    """The digits as float RGB images of size x size in [0, 1], and labels; a fixed 80/20 split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
    y = torch.tensor(d.target, dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    cut = len(y) * 4 // 5
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet18", help="a torchvision.models constructor (resnet18, resnet50, ...; without torchvision: "
                        "resnet18/34/50/101 from image_models.py)")
    p.add_argument("--backend", choices=["boostcomm", "gloo"], default="boostcomm")
    p.add_argument("--init", default="env://", help="env:// (torchrun, or RANK/WORLD_SIZE/MASTER_* set) or file://PATH")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=16, help="images per rank per step")
    p.add_argument("--size", type=int, default=32, help="image side in pixels")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    torch.set_num_threads(1)
    launcher = init(args)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = DDP(image_models.build(args.model, num_classes=10))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    (train_x, train_y), (test_x, test_y) = digits(args.size)
    shard_x, shard_y = train_x[rank::world], train_y[rank::world]
    gen = torch.Generator().manual_seed(100 + rank)

    times = []
    model.train()
    for step in range(args.steps):
        idx = torch.randint(len(shard_y), (args.batch,), generator=gen)
        start = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(shard_x[idx]), shard_y[idx])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}", flush=True)

    model.eval()
    with torch.no_grad():
        correct = (model(test_x).argmax(1) == test_y).sum()
    dist.all_reduce(correct)  # the same model on every rank: the sum is world x the count
    accuracy = correct.item() / world / len(test_y)
    # Every rank must end with the same weights (DDP averages the same gradients everywhere).
    flat = torch.cat([q.detach().reshape(-1) for q in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    same = bool(torch.equal(flat, ref))
    if rank == 0:
        print(f"{args.model} on {world} ranks via {launcher}, backend {args.backend}"
              f": median step {1000 * statistics.median(times[len(times) // 4:]):.1f} ms, "
                f"held-out accuracy {100 * accuracy:.1f}%")
    print(f"rank {rank}: weights {'identical to' if same else 'DIFFER from'} rank 0's", flush=True)
    dist.barrier()
    if launched_by_mpi() or os.environ.get("OMPI_COMM_WORLD_SIZE"):
        dist.destroy_process_group()
        raise SystemExit(0 if same else 1)  # boostcomm finalizes MPI at exit, as mpirun expects
    # torch 1.13's gloo teardown can hang at interpreter exit: leave without it.
    os._exit(0 if same else 1)


if __name__ == "__main__":
    main()
