"""The "boostcomm" c10d backend beside gloo in one job: torch.distributed
collectives on a boostcomm group, DDP on boostcomm ends with the same
parameters as DDP on gloo (and identical on every rank), the DDP comm hook,
and overlap statistics under DDP."""

import copy
import inspect
import json
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct

STEPS = 5


@pytest.fixture(scope="module")
def groups():
    torch.set_num_threads(1)
    if not dist.is_initialized():
        bct.init_process_group("gloo")
    bc = dist.new_group(backend="boostcomm")
    yield dist.group.WORLD, bc
    dist.destroy_process_group()  # lets a later file make boostcomm the default group


def test_backend_registered(groups):
    _, bc = groups
    assert dist.get_backend(bc) == "boostcomm"
    assert bc.rank() == dist.get_rank() and bc.size() == dist.get_world_size()


def test_collectives_on_boostcomm_group(groups):
    _, bc = groups
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.arange(10, dtype=torch.float32) + rank
    dist.all_reduce(t, group=bc)
    assert torch.equal(t, sum(torch.arange(10, dtype=torch.float32) + r for r in range(size)))
    t = torch.full((3,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=bc)
    assert torch.all(t == size)
    b = torch.full((7,), float(rank))
    dist.broadcast(b, src=size - 1, group=bc)
    assert torch.all(b == size - 1)
    outs = [torch.empty(4, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(outs, torch.full((4,), rank, dtype=torch.int64), group=bc)
    for r in range(size):
        assert torch.all(outs[r] == r)
    out = torch.empty(5)
    dist.reduce_scatter(out, [torch.full((5,), float(rank * 10 + i)) for i in range(size)], group=bc)
    assert torch.all(out == sum(r * 10 + rank for r in range(size)))
    flat = torch.empty(size * 3, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(flat, torch.full((3,), float(rank), dtype=torch.bfloat16), group=bc)
    assert torch.equal(flat.float(), torch.arange(size).repeat_interleave(3).float())
    dist.barrier(group=bc)
    work = dist.all_reduce(torch.ones(100), group=bc, async_op=True)
    assert work.wait()
    fut = dist.all_reduce(torch.ones(4), group=bc, async_op=True).get_future()
    assert torch.all(fut.wait()[0] == size)


def test_backend_errors(groups):
    _, bc = groups
    with pytest.raises(RuntimeError, match="not contiguous"):
        dist.all_reduce(torch.ones(4, 4).t(), group=bc)
    with pytest.raises(RuntimeError, match="supported: float32"):
        dist.all_reduce(torch.ones(4, dtype=torch.int8), group=bc)
    with pytest.raises(RuntimeError, match="BAND|not supported"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND, group=bc)
    # Still usable.
    t = torch.ones(3)
    dist.all_reduce(t, group=bc)
    assert torch.all(t == dist.get_world_size())


def c10d_marker_step(t, group):
    dist.all_reduce(t, group=group)  # the marked op


def test_flight_record_has_the_python_stack_of_each_op(groups):
    # The c10d backend's ops carry the Python stack that issued them (torch
    # calls the group with the GIL released; the backend takes it to capture).
    _, bc = groups
    t = torch.ones(4)
    c10d_marker_step(t, bc)
    record = json.loads(bct.backend_of(bc)._flight_record())
    last = [e for e in record["entries"] if e["seq"] == record["started"] - 1][0]
    stack = last["python_stack"]
    lines, first = inspect.getsourcelines(c10d_marker_step)
    line = first + next(i for i, text in enumerate(lines) if "the marked op" in text)
    assert stack[0].endswith(" in all_reduce") and "distributed_c10d.py" in stack[0], stack
    # torch 2.x wraps the collectives in logging decorators (c10d_logger.py): their frames come next.
    ours = [s for s in stack[1:] if "/torch/" not in s]
    assert ours and ours[0].endswith(f"test_torch_ddp.py:{line} in c10d_marker_step"), stack


def wait_completed(works, seconds=30.0):
    """Polls is_completed() (never wait()) until every work completed; the
    library's progress thread, not the caller, must finish them."""
    deadline = time.monotonic() + seconds
    while not all(w.is_completed() for w in works):
        assert time.monotonic() < deadline, "boostcomm op not completed without wait() after %.0f s" % seconds
        time.sleep(0.001)


def test_async_op_completes_without_wait(groups):
    _, bc = groups
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.arange(1000, dtype=torch.float64) + rank
    work = dist.all_reduce(t, group=bc, async_op=True)
    fut = dist.all_reduce(torch.ones(3), group=bc, async_op=True).get_future()
    wait_completed([work])
    deadline = time.monotonic() + 30
    while not fut.done():
        assert time.monotonic() < deadline, "future not done without wait()"
        time.sleep(0.001)
    assert torch.equal(t, sum(torch.arange(1000, dtype=torch.float64) + r for r in range(size)))
    assert torch.all(fut.value()[0] == size)


def test_all_reduce_coalesced_in_place(groups):
    # One segment-list collective over separate tensors (no packed copy): the
    # results land in the tensors themselves, also async and with odd sizes.
    _, bc = groups
    rank, size = dist.get_rank(), dist.get_world_size()
    tensors = [torch.arange(n, dtype=torch.float32) + rank for n in (1, 0, 7, 1021, 65537)]
    ptrs = [t.data_ptr() for t in tensors]
    dist.all_reduce_coalesced(tensors, group=bc)
    for t, p in zip(tensors, ptrs):
        assert t.data_ptr() == p
        assert torch.equal(t, torch.arange(t.numel(), dtype=torch.float32) * size + sum(range(size)))
    work = dist.all_reduce_coalesced(tensors[2:], op=dist.ReduceOp.MAX, group=bc, async_op=True)
    work.wait()
    assert torch.equal(tensors[2], torch.arange(7, dtype=torch.float32) * size + sum(range(size)))


def test_packed_temporaries_survive_until_completion(groups):
    # reduce_scatter packs its input list and allgather gathers into a
    # temporary: both live in the launch closure, which must outlive the
    # collective. Many ops in flight of changing sizes make a freed temporary
    # get reused (and the result wrong) if it is released early.
    _, bc = groups
    rank, size = dist.get_rank(), dist.get_world_size()
    for it in range(40):
        n = 1 + (it * 37) % 3000
        pending = []
        for k in range(4):
            m = n + k
            out = torch.empty(m, dtype=torch.float64)
            ins = [torch.arange(m, dtype=torch.float64) * (r + 1) + rank * 1000 + k for r in range(size)]
            pending.append(("rs", out, m, k, dist.reduce_scatter(out, ins, group=bc, async_op=True)))
            del ins
            outs = [torch.empty(m, dtype=torch.int64) for _ in range(size)]
            inp = torch.arange(m, dtype=torch.int64) + rank * 100000 + k
            pending.append(("ag", outs, m, k, dist.all_gather(outs, inp, group=bc, async_op=True)))
            del inp
            torch.randn(4 * m)  # allocate over what an early free would release
        wait_completed([p[-1] for p in pending])
        for kind, got, m, k, _ in pending:
            if kind == "rs":
                want = sum(torch.arange(m, dtype=torch.float64) * (rank + 1) + r * 1000 + k for r in range(size))
                assert torch.equal(got, want), (it, k, "reduce_scatter")
            else:
                for r in range(size):
                    assert torch.equal(got[r], torch.arange(m, dtype=torch.int64) + r * 100000 + k), (it, k, r)


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def train(model, steps, rank, hook=None, **ddp_kwargs):
    ddp = DDP(model, bucket_cap_mb=0.01, **ddp_kwargs)  # several buckets, so several collectives per step
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)  # different data on every rank
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen)
        y = torch.randint(0, 4, (16,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def assert_same_on_every_rank(params, group):
    flat = torch.cat([p.reshape(-1) for p in params])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat, group=group)
    for other in gathered:
        assert torch.equal(other, flat)  # bitwise: every rank applied the same averaged gradients


def test_ddp_boostcomm_matches_gloo(groups):
    world, bc = groups
    rank = dist.get_rank()
    base = make_model(0)
    with_gloo = train(copy.deepcopy(base), STEPS, rank, process_group=world)
    with_bc = train(copy.deepcopy(base), STEPS, rank, process_group=bc)
    initial = list(base.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(with_bc, initial))  # training moved the weights
    for a, b in zip(with_bc, with_gloo):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank(with_bc, world)


def test_ddp_comm_hook_any_group(groups):
    world, _ = groups
    rank = dist.get_rank()
    base = make_model(1)
    with_gloo = train(copy.deepcopy(base), STEPS, rank, process_group=world)
    with_hook = train(copy.deepcopy(base), STEPS, rank, hook=bct.hook, process_group=world)
    for a, b in zip(with_hook, with_gloo):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank(with_hook, world)


def test_hook_returns_future_with_tensor(groups):
    class Bucket:  # the part of dist.GradBucket the hook uses
        def __init__(self, t):
            self._t = t

        def buffer(self):
            return self._t

    t = torch.full((6,), float(dist.get_rank()))
    fut = bct.hook(None, Bucket(t))
    assert isinstance(fut, torch.futures.Future)
    result = fut.wait()
    assert isinstance(result, torch.Tensor)
    assert torch.allclose(result, torch.full((6,), (dist.get_world_size() - 1) / 2))


def test_overlap_stats_under_ddp(groups):
    _, bc = groups
    boostcomm.get_overlap_stats(reset=True)
    train(make_model(2), 3, dist.get_rank(), process_group=bc)
    stats = boostcomm.get_overlap_stats()
    assert stats.source == "process_group" and stats.count > 0
    assert stats.comm_time > 0 and 0.0 <= stats.hidden_comm_time <= stats.comm_time
    assert 0.0 <= stats.efficiency <= 100.0


def test_overlap_disabled_is_synchronous_and_correct(groups):
    world, bc = groups
    boostcomm.configure_overlap(enable=False, overlap_stages=1)
    try:
        work = dist.all_reduce(torch.ones(10), group=bc, async_op=True)
        assert work.is_completed()  # completed before the call returned
        rank = dist.get_rank()
        base = make_model(3)
        sync = train(copy.deepcopy(base), 2, rank, process_group=bc)
        ref = train(copy.deepcopy(base), 2, rank, process_group=world)
        for a, b in zip(sync, ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    finally:
        boostcomm.configure_overlap(enable=True, overlap_stages=2)
