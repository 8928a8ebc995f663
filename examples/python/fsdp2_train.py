"""A small transformer language model trained with FSDP2 (fully_shard) on the
boostcomm backend, CPU only.

    torchrun --standalone --nproc-per-node 2 examples/python/fsdp2_train.py
    mpirun -np 2 --oversubscribe --bind-to none .venv/bin/python examples/python/fsdp2_train.py
    # variants: --mp bf16 (bfloat16 parameters and gradients on the wire),
    #           --wire bf16 (float32 training, 16-bit messages on the links: set_wire),
    #           --hsdp (a (replicate, shard) mesh: 2 x world/2), --backend gloo (the same run on gloo)

(with PYTHONPATH=build/python from the source tree). The training code is
plain PyTorch: init_process_group("boostcomm"), a DeviceMesh, fully_shard on
each block and on the root, an optimizer on the sharded parameters. Each rank
trains on its own batches of a synthetic, learnable sequence task; rank 0
prints the mean loss over ranks and the step time of every step (the slowest
rank's), and at the end the median step time; then every rank prints its
last loss and a checksum of the full parameters (equal on every rank).
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import boostcomm.torch as bct  # registers the "boostcomm" c10d backend


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TransformerLM(nn.Module):
    def __init__(self, vocab, dim, heads, layers, seq):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        # Logits of every position, (batch * seq, vocab): the head on a 2-D
        # input returns a fresh tensor (on 3-D, a view, which FSDP2 warns about).
        return self.head(self.norm(x).flatten(0, 1))


def batch_of(gen, batch, seq, vocab):
    """Rows that count up from a random start by a random stride of 1-3 (mod
    vocab): the next token is predictable from the context, so the loss falls."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    stride = torch.randint(1, 4, (batch, 1), generator=gen)
    rows = (start + stride * torch.arange(seq + 1)) % vocab
    return rows[:, :-1], rows[:, 1:]


def add_model_arguments(p):
    """The model's and the data's options (shared with fsdp2_benchmark.py)."""
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")


def init(backend):
    """mpirun: RANK, WORLD_SIZE and MASTER_* come from the MPI launcher
    (bct.init_process_group); torchrun: its env:// settings."""
    if bct._launched_by_mpi() and "RANK" not in os.environ:
        bct.init_process_group(backend)
        return "mpirun"
    dist.init_process_group(backend)
    return "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "env://"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="boostcomm", help="c10d backend (boostcomm, gloo)")
    p.add_argument("--steps", type=int, default=20)
    add_model_arguments(p)
    p.add_argument("--mp", choices=["off", "bf16"], default="off",
                   help="bf16: MixedPrecisionPolicy(param_dtype=bfloat16); float32 master weights")
    p.add_argument("--wire", choices=["off", "bf16", "fp16", "auto"], default="off",
                   help="boostcomm.torch.set_wire on every mesh dimension's group: its reduce-scatters and "
                        "all-gathers send 16-bit messages across links (hier: across nodes), sums in float32")
    p.add_argument("--hsdp", action="store_true",
                   help="a (replicate, shard) mesh of 2 x world/2: shard within a pair, replicate across")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    launcher = init(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    if args.hsdp:
        if size % 2:
            raise SystemExit(f"--hsdp needs an even number of ranks, got {size}")
        mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cpu", (size,))
    if args.wire != "off":
        if args.backend != "boostcomm":
            raise SystemExit(f"--wire is boostcomm's option (backend {args.backend})")
        for dim in range(mesh.ndim):
            bct.set_wire(mesh.get_group(dim), args.wire)

    torch.manual_seed(0)  # the same initial weights on every rank
    model = TransformerLM(args.vocab, args.dim, args.heads, args.layers, args.seq)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16) if args.mp == "bf16" else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=mp)  # one all-gather / reduce-scatter per block
    fully_shard(model, mesh=mesh, mp_policy=mp)     # the rest: embedding, head, norms
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    if rank == 0:
        params = sum(p.numel() for p in TransformerLM(args.vocab, args.dim, args.heads, args.layers,
                                                      args.seq).parameters())
        print(f"{args.backend} via {launcher}: {size} ranks, mesh {tuple(mesh.shape)}, {params} parameters, "
              f"mixed precision {args.mp}, wire {args.wire}", flush=True)

    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    times = []
    for step in range(args.steps):
        x, y = batch_of(gen, args.batch, args.seq, args.vocab)
        start = time.perf_counter()
        loss = F.cross_entropy(model(x).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        elapsed = time.perf_counter() - start
        # Outside the timed step: the mean loss over ranks and the slowest rank's time.
        stats = torch.tensor([loss.item() / size, elapsed])
        dist.all_reduce(stats[:1])
        dist.all_reduce(stats[1:], op=dist.ReduceOp.MAX)
        times.append(stats[1].item())
        if rank == 0:
            print(f"step {step:3d}  loss {stats[0].item():.4f}  step time {1e3 * times[-1]:.1f} ms", flush=True)
    if rank == 0:
        later = times[1:] or times  # the first step includes lazy initialisation
        print(f"median step time {1e3 * statistics.median(later):.1f} ms over {len(later)} steps", flush=True)
    # Every rank gathers the full parameters (full_tensor: an all-gather of the
    # shards) and prints their sum: the same on every rank.
    checksum = sum(p.full_tensor().double().sum().item() for p in model.parameters())
    print(f"rank {rank}: last loss {loss.item():.6f} (own batch), parameter checksum {checksum:.12e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
