"""boostcomm.wire_hooks (DDP comm hooks with a 16-bit wire and float32
accumulation), under mpirun -np 2 and -np 3: gradients against a float64
reference within the documented bound (docs/ALGORITHMS.md "Wire formats"),
bitwise identical on every rank, error feedback's residual exact, a short
training run identical across ranks, and bad input raised on every rank."""

import copy
import math

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct
import boostcomm.wire_hooks as wh
from wire_model import local_grads, make_model, rank_batch

UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}


@pytest.fixture(scope="module")
def world():
    torch.set_num_threads(1)
    comm = boostcomm.comm_init()
    if not dist.is_initialized():
        bct.init_process_group("gloo")
    yield comm
    dist.destroy_process_group()


def roundings(algorithm, n):
    """R of the documented bound: the roundings an element passes through."""
    if algorithm == "ring":
        return n
    if algorithm == "rhd":
        p = 1 << (n.bit_length() - 1)
        return int(math.log2(p)) + 1 + (1 if p != n else 0)
    return n + 2  # hier on one node is float32 (R = 0); generous for any selection


def ddp_step(model, comm, state, hook):
    ddp = DDP(model, bucket_cap_mb=0.001)  # ~1 KiB buckets: several of them
    ddp.register_comm_hook(state, hook)
    x, y = rank_batch(comm.rank, next(model.parameters()).dtype)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    return [p.grad.detach().clone() for p in ddp.module.parameters()]


def gathered(comm, tensors):
    """Every rank's concatenated tensors, one row per rank (exact: float32 all_gather)."""
    flat = torch.cat([t.reshape(-1) for t in tensors]).float().contiguous()
    out = torch.empty(comm.size * flat.numel())
    boostcomm.all_gather(flat, out)
    return out.reshape(comm.size, -1)


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
@pytest.mark.parametrize("algorithm", ["ring", "rhd"])
@pytest.mark.parametrize("error_feedback", [False, True])
def test_gradients_within_bound_and_identical(world, wire, algorithm, error_feedback):
    comm = world
    n = comm.size
    model = make_model()
    per_rank = [local_grads(model, r) for r in range(n)]
    state = wh.WireHookState(wire=wire, error_feedback=error_feedback, algorithm=algorithm)
    hook = wh.bf16_wire_hook if wire == "bf16" else wh.fp16_wire_hook
    grads = ddp_step(model, comm, state, hook)
    assert state.wire_counts[wire] >= 1 and set(state.wire_counts) == {wire}, state.wire_counts
    if error_feedback:
        assert state.residuals and all(e.abs().max() > 0 for e in state.residuals.values())
    u, R = UNIT_ROUNDOFF[wire], roundings(algorithm, n)
    worst = 0.0
    for i, g in enumerate(grads):
        xs = torch.stack([per_rank[r][i].double() for r in range(n)])
        exact, magnitude = xs.mean(0), xs.abs().sum(0) / n
        bound = (R * u + (n + 1) * 2.0 ** -24) * magnitude
        err = (g.double() - exact).abs()
        assert torch.all(err <= bound), f"param {i}: max excess {(err - bound).max().item()}"
        worst = max(worst, (err / magnitude.clamp_min(1e-30)).max().item())
    assert worst > 0  # it did compress: a float32 sum of 2-3 terms is not this far off
    rows = gathered(comm, grads)
    for r in range(1, n):
        assert torch.equal(rows[0], rows[r]), f"rank {r} differs from rank 0"


def test_error_feedback_residual_is_exact(world):
    state = wh.WireHookState(wire="bf16", error_feedback=True, algorithm="ring")
    g1 = torch.randn(1001, generator=torch.Generator().manual_seed(7))
    t = g1.clone()
    state._feedback(3, t, "bf16")
    expected = g1.clone()
    boostcomm._C.round_through_wire(expected, "bf16")
    assert torch.equal(t, expected)                     # sends round(g)
    assert torch.equal(t + state.residuals[3], g1)      # nothing lost: e = g - round(g) exactly
    g2 = torch.randn(1001, generator=torch.Generator().manual_seed(8))
    t2 = g2.clone()
    state._feedback(3, t2, "bf16")
    v = g2 + (g1 - expected)
    expected2 = v.clone()
    boostcomm._C.round_through_wire(expected2, "bf16")
    assert torch.equal(t2, expected2)                    # step 2 sends round(g2 + e1)
    assert torch.equal(t2 + state.residuals[3], v)


def test_training_identical_across_ranks_and_close_to_float32(world):
    comm = world
    base = make_model()
    ref = DDP(copy.deepcopy(base))  # float32 over gloo
    ddp = DDP(copy.deepcopy(base), bucket_cap_mb=0.001)
    state = wh.WireHookState(wire="bf16", error_feedback=True, algorithm="ring")
    ddp.register_comm_hook(state, wh.bf16_wire_hook)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(6):
        x, y = rank_batch(comm.rank + 10 * step)
        x = x / x.abs().max()  # a well-conditioned step: differences stay rounding-sized
        for m, o in ((ref, opt_ref), (ddp, opt)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()
    rows = gathered(comm, list(ddp.parameters()))
    for r in range(1, comm.size):
        assert torch.equal(rows[0], rows[r]), f"rank {r} parameters differ from rank 0"
    for p, q in zip(ddp.parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=2e-3 * q.abs().max().item()), (p - q).abs().max()
    assert state.wire_counts["bf16"] > 0 and state.wire_counts["off"] == 0


def test_selection_and_float64_buckets(world):
    comm = world
    # No algorithm: the selection decides; whatever it picked, the result is in bound.
    model = make_model()
    n = comm.size
    per_rank = [local_grads(model, r) for r in range(n)]
    state = wh.WireHookState(wire="bf16")
    grads = ddp_step(model, comm, state, wh.bf16_wire_hook)
    assert sum(state.wire_counts.values()) >= 1 and set(state.wire_counts) <= {"bf16", "off"}
    for i, g in enumerate(grads):
        xs = torch.stack([per_rank[r][i].double() for r in range(n)])
        bound = ((n + 2) * 2.0 ** -8 + (n + 1) * 2.0 ** -24) * xs.abs().sum(0) / n
        assert torch.all((g.double() - xs.mean(0)).abs() <= bound)
    # float64 buckets travel as they are (no error, no residual).
    model64 = make_model(torch.float64)
    per_rank = [local_grads(model64, r) for r in range(n)]
    state = wh.WireHookState(wire="bf16", algorithm="ring")
    grads = ddp_step(model64, comm, state, wh.bf16_wire_hook)
    assert set(state.wire_counts) == {"off"} and not state.residuals
    for i, g in enumerate(grads):
        exact = torch.stack([per_rank[r][i] for r in range(n)]).mean(0)
        assert torch.allclose(g, exact, rtol=1e-12, atol=1e-15)


def test_bad_input_on_every_rank(world):
    comm = world
    # Only rank 0 is wrong: it raises its own error, the others a MismatchError naming it.
    expected, text = ((boostcomm.InvalidArgumentError, "wire must be one of") if comm.rank == 0 else
                      (boostcomm.MismatchError, r"rank\(s\) \[0\] passed invalid"))
    with pytest.raises(expected, match=text):
        wh.WireHookState(wire="int8" if comm.rank == 0 else "bf16")
    with pytest.raises(boostcomm.MismatchError, match="differ from rank 0"):
        wh.WireHookState(wire="bf16", error_feedback=comm.rank != 1)
    with pytest.raises(boostcomm.InvalidArgumentError, match="unknown 'bogus'"):
        boostcomm.all_reduce(torch.ones(4), wire="bogus")
    state = wh.WireHookState(wire="fp16", algorithm="ring")
    ddp = DDP(make_model())
    ddp.register_comm_hook(state, wh.bf16_wire_hook)
    x, y = rank_batch(comm.rank)
    with pytest.raises(Exception, match="has wire='fp16'"):
        torch.nn.functional.mse_loss(ddp(x), y).backward()
