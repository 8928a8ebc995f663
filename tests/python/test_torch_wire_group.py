"""boostcomm.torch.set_wire: the per-group wire option of the c10d backend,
under mpirun -np 2 and -np 3 with BOOSTCOMM_ALGO=ring (the flat ring of
allreduce, reduce_scatter and allgather compresses every hop; on one host
the selection would move float32 through shared memory). Results against a
float64 reference within the documented bound (docs/ALGORITHMS.md "Wire
formats", R = n for the ring allreduce, n - 1 for its reduce_scatter, one
rounding per all-gathered value), bitwise identical on every rank, the list
all_gather, gather and all_to_all exact, error feedback's effect checked exactly,
DDP on a compressed group, one group's setting not leaking into another,
non-float32 tensors passing through exactly, and bad input raised on every
rank."""

import copy

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm
import boostcomm.torch as bct
from wire_model import local_grads, make_model, rank_batch

UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
SIZES = (1, 7, 1001, 65537)


@pytest.fixture(scope="module")
def groups():
    torch.set_num_threads(1)
    if not dist.is_initialized():
        bct.init_process_group("gloo")
    wired = dist.new_group(backend="boostcomm")
    plain = dist.new_group(backend="boostcomm")
    yield wired, plain
    dist.destroy_process_group()


def rank_data(rank, count, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 * rank + count)
    # Magnitudes spread over orders of magnitude (fp16's scale matters).
    return (torch.rand(count, generator=g, dtype=torch.float64) * 2 - 1) * (10.0 ** (rank % 3))


def gathered(group, t):
    """Every rank's tensor, one row per rank (all_gather moves bytes exactly)."""
    rows = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(rows, t, group=group)
    return rows


def assert_identical(group, t):
    rows = gathered(group, t)
    for r in range(1, len(rows)):
        assert torch.equal(rows[0], rows[r]), f"rank {r} differs from rank 0"


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_allreduce_within_bound_and_identical(groups, wire):
    wired, plain = groups
    n, rank = dist.get_world_size(), dist.get_rank()
    bct.set_wire(wired, wire)
    assert bct.get_wire(wired) == (wire, False)
    bct.wire_counts(wired, reset=True)
    u = UNIT_ROUNDOFF[wire]
    worst = 0.0
    for count in SIZES:
        xs = torch.stack([rank_data(r, count) for r in range(n)])  # float64, every rank's input
        for op, exact in ((dist.ReduceOp.SUM, xs.float().double().sum(0)),
                          (dist.ReduceOp.AVG, xs.float().double().mean(0))):
            t = xs[rank].float().clone()
            dist.all_reduce(t, op=op, group=wired)
            magnitude = xs.float().double().abs().sum(0) / (n if op == dist.ReduceOp.AVG else 1)
            bound = (n * u + (n + 1) * 2.0 ** -24) * magnitude
            err = (t.double() - exact).abs()
            assert torch.all(err <= bound), f"{count} {op}: max excess {(err - bound).max().item()}"
            worst = max(worst, (err / magnitude.clamp_min(1e-30)).max().item())
            assert_identical(wired, t)
    assert worst > 2.0 ** -20  # it compressed: float32 sums of 2-3 terms are not this far off
    assert bct.wire_counts(wired) == {"off": 0, "bf16": 2 * len(SIZES) if wire == "bf16" else 0,
                                      "fp16": 2 * len(SIZES) if wire == "fp16" else 0}
    # The other group is untouched: float32 on the link, exact sums of 2-3 float32 terms.
    t = rank_data(rank, 1001).float()
    dist.all_reduce(t, group=plain)
    assert bct.wire_counts(plain)["bf16"] == 0 and bct.wire_counts(plain)["fp16"] == 0
    assert bct.get_wire(plain)[0] == "off"
    bct.set_wire(wired, "off")


def agree(problems):
    """Every rank's problems, agreed over the world before anyone asserts:
    a failure on one rank then fails every rank at the same point instead of
    leaving the others to run the next collectives alone."""
    flag = torch.tensor([1 if problems else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    assert not problems, problems
    assert flag.item() == 0, "another rank failed (its own report says why)"


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_reduce_scatter_and_all_gather_into_tensor(groups, wire):
    """FSDP's pair: reduce_scatter_tensor within n - 1 roundings of partial
    sums, all_gather_into_tensor within one rounding of each value and the
    same bits on every rank (the owner keeps the rounded value too); both
    visibly rounded (a schedule ignoring the wire would pass the bounds)."""
    wired, _ = groups
    n, rank = dist.get_world_size(), dist.get_rank()
    bct.set_wire(wired, wire)
    bct.wire_counts(wired, reset=True)
    u = UNIT_ROUNDOFF[wire]
    problems = []
    try:
        for count in SIZES:
            xs = torch.stack([rank_data(r, n * count) for r in range(n)]).float().double()
            for op, divisor in ((dist.ReduceOp.SUM, 1), (dist.ReduceOp.AVG, n)):
                out = torch.empty(count)
                dist.reduce_scatter_tensor(out, xs[rank].float(), op=op, group=wired)
                mine = slice(rank * count, (rank + 1) * count)
                exact = xs[:, mine].sum(0) / divisor
                magnitude = xs[:, mine].abs().sum(0) / divisor
                err = (out.double() - exact).abs()
                excess = err - ((n - 1) * u + (n + 1) * 2.0 ** -24) * magnitude
                if excess.max() > 0:
                    problems.append(f"reduce_scatter {count} {op}: max excess {excess.max().item()}")
                if count >= 1001 and (err > (n + 1) * 2.0 ** -24 * magnitude).sum() < count // 4:
                    problems.append(f"reduce_scatter {count} {op}: the results look uncompressed")
            shard = xs[rank, :count].float()
            full = torch.empty(n * count)
            dist.all_gather_into_tensor(full, shard, group=wired)
            want = xs[:, :count].reshape(-1)
            # fp16's per-message scale: a value far below its message's largest
            # sits in float16's subnormals (absolute floor 2^-39 of that largest).
            floor = 2.0 ** -39 * want.abs().max()
            err = (full.double() - want).abs()
            if not torch.all(err <= u * want.abs() + floor):
                problems.append(f"all_gather {count}: max error {err.max().item()}")
            if count >= 1001 and (err > 0).sum() < n * count // 2:
                problems.append(f"all_gather {count}: the values look uncompressed")
            rows = gathered(wired, full)
            problems += [f"all_gather {count}: rank {r} differs from rank 0" for r in range(1, n)
                         if not torch.equal(rows[0], rows[r])]
        counts = bct.wire_counts(wired)
        want_counts = {"off": 0, "bf16": 3 * len(SIZES) if wire == "bf16" else 0,
                       "fp16": 3 * len(SIZES) if wire == "fp16" else 0}
        if counts != want_counts:
            problems.append(f"wire counts {counts}, expected {want_counts}")
        agree(problems)
    finally:
        bct.set_wire(wired, "off")


def test_gather_all_to_all_and_list_all_gather_stay_exact(groups):
    """They run on an allgather too, but move values: never rounded."""
    wired, _ = groups
    n, rank = dist.get_world_size(), dist.get_rank()
    bct.set_wire(wired, "bf16")
    problems = []
    try:
        xs = torch.stack([rank_data(r, 1001 * n) for r in range(n)]).float()
        rows = gathered(wired, xs[rank])
        problems += [f"all_gather list: row {r} changed" for r in range(n) if not torch.equal(rows[r], xs[r])]
        outs = [torch.empty(1001 * n) for _ in range(n)] if rank == 0 else None
        dist.gather(xs[rank], outs, dst=0, group=wired)
        if rank == 0:
            problems += [f"gather: row {r} changed" for r in range(n) if not torch.equal(outs[r], xs[r])]
        swapped = torch.empty(1001 * n)
        dist.all_to_all_single(swapped, xs[rank], group=wired)
        problems += [f"all_to_all_single: block {r} changed" for r in range(n)
                     if not torch.equal(swapped[r * 1001:(r + 1) * 1001], xs[r, rank * 1001:(rank + 1) * 1001])]
        agree(problems)
    finally:
        bct.set_wire(wired, "off")


def test_fully_shard_on_a_compressed_group(groups):
    """FSDP2 on the wired group: its all-gathers (parameters) and
    reduce-scatters (gradients) travel bf16. Every rank ends with the same
    full parameters, and each rank's loss follows the float32 run on the
    plain group within 0.5% over 8 steps (measured: under 0.05%). The
    verdict is agreed over the world first, so a failure fails every rank
    at the same point instead of desynchronising the later tests."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    wired, plain = groups
    rank = dist.get_rank()
    bct.set_wire(wired, "bf16")
    try:
        g = torch.Generator().manual_seed(100 + rank)
        x, y = torch.randn(16, 37, generator=g), torch.randn(16, 5, generator=g)
        losses, compressed = {}, {}
        for name, group in (("bf16", wired), ("float32", plain)):
            bct.wire_counts(group, reset=True)
            model = make_model()
            mesh = DeviceMesh.from_group(group, "cpu")
            fully_shard(model[0], mesh=mesh)
            fully_shard(model, mesh=mesh)
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            losses[name] = []
            for _ in range(8):
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                losses[name].append(loss.item())
            full = torch.cat([p.full_tensor().reshape(-1) for p in model.parameters()])
            assert_identical(group, full)
            compressed[name] = bct.wire_counts(group)["bf16"]
        deviation = max(abs(a - b) / abs(b) for a, b in zip(losses["bf16"], losses["float32"]))
        worst = torch.tensor([deviation])
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        assert compressed["bf16"] > 0 and compressed["float32"] == 0, compressed
        assert 0 < worst.item() <= 5e-3, (worst.item(), losses)
    finally:
        bct.set_wire(wired, "off")


def test_error_feedback_carries_the_residual(groups):
    """Rank 0 contributes g, the others zeros: the ring then only rounds
    rank 0's value (adding zeros is exact, rounding is idempotent), so the
    result is exactly what rank 0 sent."""
    wired, _ = groups
    rank = dist.get_rank()
    g = rank_data(0, 1001).float()
    mine = g if rank == 0 else torch.zeros_like(g)
    r1 = g.clone()
    boostcomm._C.round_through_wire(r1, "bf16")          # round(g)
    e1 = g - r1
    r2 = g + e1
    boostcomm._C.round_through_wire(r2, "bf16")          # round(g + e1)
    assert not torch.equal(r1, r2)
    bct.set_wire(wired, "bf16", error_feedback=True)
    t = mine.clone()
    dist.all_reduce(t, group=wired)
    assert torch.equal(t, r1)                             # step 1 sends round(g)
    t.copy_(mine)                                         # same tensor (storage), next step
    dist.all_reduce(t, group=wired)
    assert torch.equal(t, r2)                             # step 2 sends round(g + e1)
    fresh = mine.clone()                                  # another tensor: no residual of its own yet
    dist.all_reduce(fresh, group=wired)
    assert torch.equal(fresh, r1)
    # Without feedback the same steps send round(g) every time.
    bct.set_wire(wired, "bf16", error_feedback=False)
    t.copy_(mine)
    dist.all_reduce(t, group=wired)
    assert torch.equal(t, r1)
    bct.set_wire(wired, "off")


@pytest.mark.parametrize("wire", ["bf16", "fp16"])
def test_ddp_on_a_compressed_group(groups, wire):
    wired, _ = groups
    n, rank = dist.get_world_size(), dist.get_rank()
    model = make_model()
    per_rank = [local_grads(model, r) for r in range(n)]
    bct.set_wire(wired, wire, error_feedback=True)
    bct.wire_counts(wired, reset=True)
    ddp = DDP(model, process_group=wired, bucket_cap_mb=0.001)
    x, y = rank_batch(rank)
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    counts = bct.wire_counts(wired)
    assert counts[wire] >= 1 and counts["off"] == 0, counts
    u = UNIT_ROUNDOFF[wire]
    for i, p in enumerate(ddp.module.parameters()):
        xs = torch.stack([per_rank[r][i].double() for r in range(n)])
        # DDP divides by n in float32 before the SUM: one more float32 rounding.
        bound = (n * u + (n + 2) * 2.0 ** -24) * xs.abs().sum(0) / n
        err = (p.grad.double() - xs.mean(0)).abs()
        assert torch.all(err <= bound), f"param {i}: max excess {(err - bound).max().item()}"
        assert_identical(wired, p.grad)
    bct.set_wire(wired, "off")


def test_training_identical_across_ranks_and_close_to_float32(groups):
    """Several steps: DDP rebuilds its buckets after the first one (new
    buffers, new residuals) and feedback then runs per bucket."""
    wired, _ = groups
    base = make_model()
    ref = DDP(copy.deepcopy(base))  # float32 over gloo
    ddp = DDP(copy.deepcopy(base), process_group=wired, bucket_cap_mb=0.001)
    bct.set_wire(wired, "bf16", error_feedback=True)
    bct.wire_counts(wired, reset=True)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(6):
        x, y = rank_batch(dist.get_rank() + 10 * step)
        x = x / x.abs().max()  # a well-conditioned step: differences stay rounding-sized
        for m, o in ((ref, opt_ref), (ddp, opt)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()
    counts = bct.wire_counts(wired)
    assert counts["bf16"] >= 6 and counts["off"] == 0, counts
    for p, q in zip(ddp.parameters(), ref.parameters()):
        assert_identical(wired, p.detach().clone())
        assert torch.allclose(p, q, rtol=0, atol=2e-3 * q.abs().max().item()), (p - q).abs().max()
    bct.set_wire(wired, "off")


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_non_float32_tensors_pass_through_exactly(groups, dtype):
    wired, _ = groups
    n, rank = dist.get_world_size(), dist.get_rank()
    bct.set_wire(wired, "bf16", error_feedback=True)
    bct.wire_counts(wired, reset=True)
    if dtype.is_floating_point:
        xs = torch.stack([rank_data(r, 1001) for r in range(n)]).to(dtype)
    else:
        xs = torch.stack([(rank_data(r, 1001) * 1e6).to(dtype) for r in range(n)])
    t = xs[rank].clone()
    dist.all_reduce(t, group=wired)
    expected = xs.sum(0)
    if dtype.is_floating_point:  # float64 ring sums in float64, no 16-bit rounding
        assert torch.allclose(t, expected, rtol=1e-14, atol=1e-14)
    else:
        assert torch.equal(t, expected)
    assert bct.wire_counts(wired) == {"off": 1, "bf16": 0, "fp16": 0}
    bct.set_wire(wired, "off")


def test_bad_input_on_every_rank(groups):
    wired, _ = groups
    rank = dist.get_rank()
    # Only rank 0 is wrong: it names the argument and its rank, the others point at it.
    if rank == 0:
        with pytest.raises(ValueError, match=r"wire must be one of .*'int8' \(rank 0\)"):
            bct.set_wire(wired, "int8")
    else:
        with pytest.raises(RuntimeError, match="another rank of the group passed invalid arguments"):
            bct.set_wire(wired, "bf16")
    if rank == 1:
        with pytest.raises(ValueError, match=r"error_feedback must be a bool.*\(rank 1\)"):
            bct.set_wire(wired, "bf16", error_feedback="yes")
    else:
        with pytest.raises(RuntimeError, match="invalid arguments"):
            bct.set_wire(wired, "bf16", error_feedback=True)
    # Valid but different values: every rank raises.
    with pytest.raises(RuntimeError, match="disagree"):
        bct.set_wire(wired, "bf16", error_feedback=rank == 0)
    with pytest.raises(RuntimeError, match="disagree"):
        bct.set_wire(wired, "bf16" if rank == 0 else "fp16")
    # Nothing changed, and the group still works.
    assert bct.get_wire(wired) == ("off", False)
    t = torch.ones(5)
    dist.all_reduce(t, group=wired)
    assert torch.equal(t, torch.full((5,), float(dist.get_world_size())))
    with pytest.raises(ValueError, match="not a boostcomm process group"):
        bct.set_wire(dist.group.WORLD, "bf16")


def test_subgroup_on_the_store_transport(groups):
    """Ranks 0 and 1 as a group: under -np 3 a subgroup, which runs on the
    c10d store + Gloo TCP transport (under -np 2 it is the MPI world again):
    set_wire and its agreement work there too, and only its members call it."""
    members = [0, 1]
    sub = dist.new_group(ranks=members, backend="boostcomm")  # collective over the world
    if dist.get_rank() not in members:
        return
    bct.set_wire(sub, "bf16")
    bct.wire_counts(sub, reset=True)
    xs = torch.stack([rank_data(r, 1001) for r in members]).float()
    t = xs[dist.get_rank()].clone()
    dist.all_reduce(t, group=sub)
    exact, magnitude = xs.double().sum(0), xs.double().abs().sum(0)
    err = (t.double() - exact).abs()
    assert torch.all(err <= (2 * 2.0 ** -8 + 3 * 2.0 ** -24) * magnitude)
    assert err.max() > 0
    assert bct.wire_counts(sub) == {"off": 0, "bf16": 1, "fp16": 0}
    assert_identical(sub, t)
