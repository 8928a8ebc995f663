"""The small model, per-rank batches and local gradients that the 16-bit
wire tests share (test_wire_hooks.py, test_torch_wire_group.py)."""

import copy

import torch


def make_model(dtype=torch.float32):
    torch.manual_seed(0)
    # Odd sizes: 37*13+13 + 13*5+5 = 564 gradients, buckets not a multiple of anything.
    return torch.nn.Sequential(torch.nn.Linear(37, 13), torch.nn.Tanh(), torch.nn.Linear(13, 5)).to(dtype)


def rank_batch(rank, dtype=torch.float32):
    g = torch.Generator().manual_seed(100 + rank)
    # Scales spread over a few orders of magnitude so fp16's scale matters.
    x = torch.randn(16, 37, generator=g, dtype=torch.float64) * (10.0 ** (rank % 3))
    y = torch.randn(16, 5, generator=g, dtype=torch.float64)
    return x.to(dtype), y.to(dtype)


def local_grads(model, rank):
    """This rank's gradients as DDP computes them before reducing them."""
    m = copy.deepcopy(model)
    x, y = rank_batch(rank, next(m.parameters()).dtype)
    torch.nn.functional.mse_loss(m(x), y).backward()
    return [p.grad.detach().clone() for p in m.parameters()]
