"""FSDP2, HSDP, tensor parallelism and coalesced ops on the boostcomm backend
(issue 37), against gloo in the same processes and a float64 single-process
reference. Runs under mpirun at 2 and 4 ranks (ctest python.torch_fsdp2.np2 /
.np4): the default group is boostcomm (MPI transport), the mesh dimensions of
the 2-D mesh are subgroups (store transport), gloo is a second world group.

What is compared, on every rank (each rank checks its own values; every test
ends with one agreement so that a failure on one rank fails all of them and no
rank runs ahead into the next test's collectives):
- fully_shard, float32, 20 steps of SGD with momentum on a two-block
  transformer whose embedding and head (37 rows) shard unevenly: the loss of
  every step within 1e-5 of gloo's and within 1e-5 of a float64
  single-process reference; the final parameters (full_tensor) within 1e-5
  of both.
  gloo's reduce_scatter AVG is right in torch 2.13 (checked here: its run is
  held to the reference too), so gloo is the peer throughout.
- PREMUL_SUM (set_gradient_divide_factor(2 n)) and SUM (force_sum_reduction):
  the gradients of one step equal the AVG step's times 1/2 and times 1.
- MixedPrecisionPolicy(param_dtype=bfloat16, so bf16 all-gathers and bf16
  AVG reduce-scatters): 8 steps (20 add only time at 4 oversubscribed
  ranks), every loss within 1e-2 of the float64 reference and within 5e-3 of
  gloo's bf16 run (bf16 keeps 8 significant bits, a relative rounding of up
  to 2^-9 = 2.0e-3 per operation; measured: at most 1.7e-3 and 1.3e-3 at 4
  ranks, identical to gloo at 2).
- A frozen bfloat16 parameter next to float32 ones in one FSDP unit: the
  all-gather runs on uint8 (asserted), 6 steps equal gloo's within 1e-5.
- HSDP on init_device_mesh("cpu", (2, n / 2)) (2 x 2 at 4 ranks, 2 x 1 at 2):
  12 steps, losses within 1e-5 of gloo's HSDP and of the reference.
- ColwiseParallel / RowwiseParallel linear layers (and FSDP x TP on a
  (2, n / 2) mesh): forward, gradients and 3 SGD steps within 1e-5 of the
  reference; DTensor redistribute Shard(0) -> Replicate / Shard(1) exact.
- _coalescing_manager around all_gather_into_tensor (three dtypes) and
  reduce_scatter_tensor (AVG; one dtype, and float32 mixed with float64):
  exact values.
- Bad input on every rank (a wrong output size, a bool reduce_scatter):
  an error naming the argument and the rank, and the group still works.
  Bad input on one rank only: that rank raises at once, the others a
  MismatchError naming its rejected call about 2 s later (no hang).
Fewer steps than 20 where said: the file must stay within ~60 s of wall time
for both world sizes together on a 2-core machine."""

import datetime
import math
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import boostcomm.torch as bct
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

VOCAB, DIM, HEADS, SEQ, BATCH = 37, 20, 2, 8, 2  # 37 rows divide by no world size: padded shards
TOL = 1e-5


@pytest.fixture(scope="module")
def world():
    torch.set_num_threads(1)
    bct.init_process_group("boostcomm", timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=120))  # a failure ends in 2 min
    yield dist.get_rank(), dist.get_world_size(), gloo
    dist.destroy_process_group()


def agree(failures, gloo):
    """Every rank learns whether any rank failed, then asserts its own findings."""
    flag = torch.tensor([len(failures)])
    dist.all_reduce(flag, group=gloo)
    assert not failures, "\n".join(failures)
    assert flag.item() == 0, "another rank failed (see its output)"


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 3 * dim), nn.Linear(3 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.1)
        self.blocks = nn.ModuleList(Block(DIM, HEADS) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.emb(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).flatten(0, 1))  # 2-D: not a view (FSDP2 warns about views)


def fresh_model(**kw):
    torch.manual_seed(0)  # the same initial weights on every rank and in the reference
    return TinyLM(**kw)


def global_batches(steps, size):
    """Every step's global batch (the same on every rank); rank r trains on rows
    [r*BATCH, (r+1)*BATCH). Learnable: each row counts up from a random start
    by a random stride of 1 to 3 (mod VOCAB), so the loss falls."""
    gen = torch.Generator().manual_seed(1234)
    batches = []
    for _ in range(steps):
        start = torch.randint(0, VOCAB, (size * BATCH, 1), generator=gen)
        stride = torch.randint(1, 4, (size * BATCH, 1), generator=gen)
        batches.append((start + stride * torch.arange(SEQ + 1)) % VOCAB)
    return batches


def lm_loss(model, rows):
    logits = model(rows[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, VOCAB), rows[:, 1:].reshape(-1))


def make_opt(params):
    return torch.optim.SGD(params, lr=0.2, momentum=0.9)


def train(model, batches, rank, step_hook=None):
    """Local (this rank's rows) loss of every step."""
    opt = make_opt(model.parameters())
    losses = []
    for batch in batches:
        loss = lm_loss(model, batch[rank * BATCH:(rank + 1) * BATCH])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def reference(batches, size, rank, dtype=torch.float64, **kw):
    """One process, the whole global batch, in float64: this rank's rows' loss per
    step, and the final parameters. The gradient is the mean over ranks of each
    rank's mean loss, as data-parallel training averages."""
    model = fresh_model(**kw).to(dtype)
    opt = make_opt(model.parameters())
    losses = []
    for batch in batches:
        per_rank = [lm_loss(model, batch[r * BATCH:(r + 1) * BATCH]) for r in range(size)]
        torch.stack(per_rank).mean().backward()
        opt.step()
        opt.zero_grad()
        losses.append(per_rank[rank].item())
    return losses, {n: p.detach() for n, p in model.named_parameters()}


def shard(model, mesh, **kw):
    for block in model.blocks:
        fully_shard(block, mesh=mesh, **kw)
    fully_shard(model, mesh=mesh, **kw)
    return model


def full_params(model):
    return {n: p.full_tensor().detach() for n, p in model.named_parameters()}


def compare(failures, what, got, want, tol):
    worst = max(abs(a - b) for a, b in zip(got, want))
    if not worst <= tol:
        failures.append(f"{what}: largest difference {worst:.3g} > {tol:g}\n  got  {got}\n  want {want}")
    return worst


def compare_params(failures, what, got, want, tol):
    for name, p in got.items():
        d = (p.double() - want[name].double()).abs().max().item()
        if not d <= tol:
            failures.append(f"{what}: parameter {name} differs by {d:.3g} > {tol:g}")


class CollectiveLog:
    """Records the dtype and op of FSDP's all-gathers and reduce-scatters.
    torch 2.13's FSDP2 calls dist.all_gather_single / reduce_scatter_single
    by name; the older names are wrapped too, for other torch versions (a
    call that goes through both is recorded twice: the checks use sets)."""

    def __init__(self, monkeypatch):
        self.gathers, self.scatters = [], []
        for name in ("all_gather_single", "all_gather_into_tensor"):
            if hasattr(dist, name):
                monkeypatch.setattr(dist, name, self._gather(getattr(dist, name)))
        for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
            if hasattr(dist, name):
                monkeypatch.setattr(dist, name, self._scatter(getattr(dist, name)))

    def _gather(self, fn):
        def wrapper(output, input, *args, **kwargs):
            self.gathers.append(input.dtype)
            return fn(output, input, *args, **kwargs)
        return wrapper

    def _scatter(self, fn):
        def wrapper(output, input, op=dist.ReduceOp.SUM, *args, **kwargs):
            self.scatters.append((input.dtype, str(getattr(op, "op", op)).rsplit(".", 1)[-1]))
            return fn(output, input, op, *args, **kwargs)
        return wrapper


def test_fully_shard_float32(world, monkeypatch):
    rank, size, gloo = world
    batches = global_batches(20, size)
    log = CollectiveLog(monkeypatch)
    t0 = time.perf_counter()
    bc_model = shard(fresh_model(), init_device_mesh("cpu", (size,)))
    bc = train(bc_model, batches, rank)
    bc_time = time.perf_counter() - t0
    ops = set(log.scatters)
    gloo_model = shard(fresh_model(), DeviceMesh.from_group(gloo, "cpu"))
    gl = train(gloo_model, batches, rank)
    ref_losses, ref_params = reference(batches, size, rank)
    failures = []
    vs_gloo = compare(failures, "boostcomm vs gloo losses", bc, gl, TOL)
    vs_ref = compare(failures, "boostcomm vs float64 reference losses", bc, ref_losses, TOL)
    gloo_vs_ref = compare(failures, "gloo vs float64 reference losses (gloo's AVG)", gl, ref_losses, TOL)
    bc_params = full_params(bc_model)
    compare_params(failures, "final, boostcomm vs gloo", bc_params, full_params(gloo_model), TOL)
    compare_params(failures, "final, boostcomm vs float64 reference", bc_params, ref_params, TOL)
    if ops != {(torch.float32, "AVG")}:
        failures.append(f"expected FSDP's reduce_scatter to run float32 AVG, saw {ops}")
    if not all(math.isfinite(x) for x in bc) or not bc[-1] < bc[0]:
        failures.append(f"the loss did not fall: {bc}")
    print(f"rank {rank}: fully_shard 20 steps {bc_time:.2f} s, loss {bc[0]:.5f} -> {bc[-1]:.5f}; largest loss "
          f"difference {vs_gloo:.1e} vs gloo, {vs_ref:.1e} vs float64 (gloo {gloo_vs_ref:.1e})")
    agree(failures, gloo)


def one_step_grads(model, batch, rank):
    lm_loss(model, batch[rank * BATCH:(rank + 1) * BATCH]).backward()
    grads = {n: p.grad.to_local().clone() for n, p in model.named_parameters()}
    model.zero_grad()
    return grads


def test_premul_sum_and_sum(world, monkeypatch):
    """set_gradient_divide_factor(2 n) makes FSDP reduce-scatter with
    PREMUL_SUM(1 / 2n); force_sum_reduction_for_comms with SUM then a division."""
    rank, size, gloo = world
    batch = global_batches(1, size)[0]
    mesh = init_device_mesh("cpu", (size,))
    log = CollectiveLog(monkeypatch)
    avg = one_step_grads(shard(fresh_model(), mesh), batch, rank)
    premul_model = shard(fresh_model(), mesh)
    premul_model.set_gradient_divide_factor(2.0 * size)
    for block in premul_model.blocks:
        block.set_gradient_divide_factor(2.0 * size)
    premul = one_step_grads(premul_model, batch, rank)
    sum_model = shard(fresh_model(), mesh)
    sum_model.set_force_sum_reduction_for_comms(True)
    for block in sum_model.blocks:
        block.set_force_sum_reduction_for_comms(True)
    summed = one_step_grads(sum_model, batch, rank)
    failures = []
    ops = {op for _, op in log.scatters}
    if ops != {"AVG", "PREMUL_SUM", "SUM"}:
        failures.append(f"expected PREMUL_SUM and SUM reduce-scatters, saw {ops}")
    for name, g in avg.items():
        for what, other, factor in (("PREMUL_SUM", premul, 0.5), ("SUM", summed, 1.0)):
            d = (other[name] - g * factor).abs().max().item()
            if not d <= 1e-6:
                failures.append(f"{what}: gradient of {name} differs from AVG's x {factor} by {d:.3g}")
    agree(failures, gloo)


def test_mixed_precision_bf16(world, monkeypatch):
    rank, size, gloo = world
    steps = 8
    batches = global_batches(steps, size)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    log = CollectiveLog(monkeypatch)
    bc = train(shard(fresh_model(), init_device_mesh("cpu", (size,)), mp_policy=mp), batches, rank)
    seen = (set(log.gathers), set(log.scatters))
    gl = train(shard(fresh_model(), DeviceMesh.from_group(gloo, "cpu"), mp_policy=mp), batches, rank)
    ref_losses, _ = reference(batches, size, rank)
    failures = []
    if seen[0] != {torch.bfloat16} or {dtype for dtype, _ in seen[1]} != {torch.bfloat16}:
        failures.append(f"expected bf16 all-gathers and reduce-scatters, saw {seen}")
    worst_ref = compare(failures, "bf16 boostcomm vs float64 reference losses", bc, ref_losses, 1e-2)
    worst_gloo = compare(failures, "bf16 boostcomm vs bf16 gloo losses", bc, gl, 5e-3)
    print(f"rank {rank}: bf16 largest loss difference: {worst_ref:.2e} vs reference, {worst_gloo:.2e} vs gloo")
    agree(failures, gloo)


class FrozenBf16(nn.Module):
    """A float32 model with a frozen bfloat16 table in the same FSDP unit: the
    unit's all-gather mixes dtypes, so FSDP gathers it as uint8."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lm = TinyLM(layers=1)
        self.bias = nn.Parameter(torch.randn(VOCAB).to(torch.bfloat16), requires_grad=False)
        self.blocks = self.lm.blocks

    def forward(self, tokens):
        return self.lm(tokens) + self.bias.float()


def test_mixed_dtype_all_gather_uint8(world, monkeypatch):
    rank, size, gloo = world
    batches = global_batches(6, size)
    log = CollectiveLog(monkeypatch)
    bc = train(shard(FrozenBf16(), init_device_mesh("cpu", (size,))), batches, rank)
    gathers = set(log.gathers)
    gl = train(shard(FrozenBf16(), DeviceMesh.from_group(gloo, "cpu")), batches, rank)
    failures = []
    if torch.uint8 not in gathers:
        failures.append(f"expected a uint8 all-gather of the mixed-dtype unit, saw {gathers}")
    compare(failures, "frozen-bf16 model, boostcomm vs gloo losses", bc, gl, TOL)
    agree(failures, gloo)


def test_hsdp_2d_mesh(world):
    rank, size, gloo = world
    if size % 2:
        pytest.skip("a (2, n / 2) mesh needs an even world size")  # alike on every rank
    steps = 12
    batches = global_batches(steps, size)
    names = ("replicate", "shard")
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=names)
    gloo_mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=names,
                                 backend_override={"replicate": "gloo", "shard": "gloo"})
    failures = []
    backends = [dist.get_backend(m.get_group(n)) for m in (mesh, gloo_mesh) for n in names]
    if backends != ["boostcomm", "boostcomm", "gloo", "gloo"]:
        failures.append(f"mesh backends (boostcomm mesh, then gloo mesh): {backends}")
    bc = train(shard(fresh_model(), mesh), batches, rank)
    gl = train(shard(fresh_model(), gloo_mesh), batches, rank)
    ref_losses, _ = reference(batches, size, rank)
    vs_gloo = compare(failures, "HSDP boostcomm vs gloo losses", bc, gl, TOL)
    vs_ref = compare(failures, "HSDP boostcomm vs float64 reference losses", bc, ref_losses, TOL)
    print(f"rank {rank}: HSDP largest loss difference {vs_gloo:.1e} vs gloo, {vs_ref:.1e} vs float64")
    agree(failures, gloo)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.fc1, self.fc2 = nn.Linear(DIM, 3 * DIM), nn.Linear(3 * DIM, DIM)  # 60: divides by 2, 3 and 4

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def test_tensor_parallel_linear(world):
    """Column- then row-parallel linears on a 1-D mesh over all ranks: 3 steps."""
    rank, size, gloo = world
    tp = parallelize_module(Mlp(), init_device_mesh("cpu", (size,)),
                            {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    ref = Mlp().double()
    opt, ref_opt = torch.optim.SGD(tp.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(7)
    failures = []
    for step in range(3):
        x = torch.randn(4, DIM, generator=gen)  # the same input on every rank (replicated)
        y, y_ref = tp(x), ref(x.double())
        d = (y.double() - y_ref).abs().max().item()
        if not d <= TOL:
            failures.append(f"step {step}: TP output differs from the reference by {d:.3g}")
        y.square().mean().backward()
        y_ref.square().mean().backward()
        for (name, p), q in zip(tp.named_parameters(), ref.parameters()):
            d = (p.grad.full_tensor().double() - q.grad).abs().max().item()
            if not d <= TOL:
                failures.append(f"step {step}: gradient of {name} differs by {d:.3g}")
        opt.step(), ref_opt.step()
        opt.zero_grad(), ref_opt.zero_grad()
    agree(failures, gloo)


def test_fsdp_x_tp_2d(world):
    """fully_shard over the "dp" dimension of a (2, n / 2) mesh whose "tp"
    dimension holds column/row-parallel linears: 4 steps against the reference."""
    rank, size, gloo = world
    if size % 2:
        pytest.skip("a (2, n / 2) mesh needs an even world size")  # alike on every rank
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    model = Mlp()
    parallelize_module(model, mesh["tp"], {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    fully_shard(model, mesh=mesh["dp"])
    ref = Mlp().double()
    opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(11)
    dp_rank = mesh.get_local_rank("dp")
    failures = []
    for step in range(4):
        x = torch.randn(2, 4, DIM, generator=gen)  # dp row i trains on x[i]
        loss = model(x[dp_rank]).square().mean()
        loss.backward()
        ref_losses = [ref(x[i].double()).square().mean() for i in range(2)]
        torch.stack(ref_losses).mean().backward()
        d = abs(loss.item() - ref_losses[dp_rank].item())
        if not d <= TOL:
            failures.append(f"step {step}: FSDP x TP loss differs from the reference by {d:.3g}")
        opt.step(), ref_opt.step()
        opt.zero_grad(), ref_opt.zero_grad()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        d = (p.full_tensor().double() - q.detach()).abs().max().item()
        if not d <= TOL:
            failures.append(f"final {name} differs from the reference by {d:.3g}")
    agree(failures, gloo)


def test_dtensor_redistribute(world):
    rank, size, gloo = world
    mesh = init_device_mesh("cpu", (size,))
    full = torch.arange(size * 3 * size * 2, dtype=torch.float32).reshape(size * 3, size * 2)
    d = distribute_tensor(full, mesh, [Shard(0)])
    failures = []
    if not torch.equal(d.to_local(), full.chunk(size, 0)[rank]):
        failures.append("Shard(0) local block is wrong")
    if not torch.equal(d.redistribute(mesh, [Replicate()]).to_local(), full):
        failures.append("Shard(0) -> Replicate is wrong")
    if not torch.equal(d.redistribute(mesh, [Shard(1)]).to_local(), full.chunk(size, 1)[rank]):
        failures.append("Shard(0) -> Shard(1) is wrong")
    if not torch.equal(d.full_tensor(), full):
        failures.append("full_tensor is wrong")
    agree(failures, gloo)


def test_coalescing_manager(world):
    rank, size, gloo = world
    dtypes = (torch.float32, torch.bfloat16, torch.int64)
    ins = [torch.arange(k + 2, dtype=dt) + 100 * rank for k, dt in enumerate(dtypes)]
    outs = [torch.empty(size * t.numel(), dtype=t.dtype) for t in ins]
    rs_ins = [torch.arange(size * 5, dtype=torch.float32) * (rank + 1),
              torch.arange(size * 3, dtype=torch.float32) - rank]
    rs_outs = [torch.empty(5), torch.empty(3)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(rs_outs, rs_ins):
            dist.reduce_scatter_tensor(o, i, op=dist.ReduceOp.AVG)
    cm.wait()
    # A reduce-scatter block that mixes dtypes (as gloo takes): one collective per dtype, one Work.
    mixed_ins = [torch.arange(size * 2, dtype=dt) * (rank + 1) for dt in (torch.float32, torch.float64, torch.float32)]
    mixed_outs = [torch.empty(2, dtype=t.dtype) for t in mixed_ins]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(mixed_outs, mixed_ins):
            dist.reduce_scatter_tensor(o, i, op=dist.ReduceOp.AVG)
    cm.wait()
    failures = []
    for k, o in enumerate(mixed_outs):
        w = torch.arange(size * 2, dtype=o.dtype)[rank * 2:(rank + 1) * 2] * (size + 1) / 2
        if not torch.allclose(o, w, rtol=0, atol=1e-6):
            failures.append(f"mixed-dtype coalesced reduce_scatter_tensor {k} ({o.dtype}): "
                            f"{o.tolist()} != {w.tolist()}")
    for k, (o, dt) in enumerate(zip(outs, dtypes)):
        want = torch.cat([torch.arange(k + 2, dtype=dt) + 100 * r for r in range(size)])
        if not torch.equal(o, want):
            failures.append(f"coalesced all_gather_into_tensor {k} ({dt}): {o.tolist()} != {want.tolist()}")
    mean_factor = sum(r + 1 for r in range(size)) / size
    want = [torch.arange(size * 5, dtype=torch.float32)[rank * 5:(rank + 1) * 5] * mean_factor,
            (torch.arange(size * 3, dtype=torch.float32) - (size - 1) / 2)[rank * 3:(rank + 1) * 3]]
    for k, (o, w) in enumerate(zip(rs_outs, want)):
        if not torch.allclose(o, w, rtol=0, atol=1e-6):
            failures.append(f"coalesced reduce_scatter_tensor {k} (AVG): {o.tolist()} != {w.tolist()}")
    agree(failures, gloo)


def test_bad_input_names_argument_and_rank(world):
    """Every rank passes the same bad call: each raises at once, naming the
    argument and itself, and the group works afterwards."""
    rank, size, gloo = world
    failures = []
    cases = [
        (f"output has {3 * size + 1} elements",
         lambda: dist.all_gather_into_tensor(torch.empty(3 * size + 1), torch.ones(3))),
        (f"input has {3 * size + 1} elements",
         lambda: dist.reduce_scatter_tensor(torch.empty(3), torch.ones(3 * size + 1))),
        ("input has dtype Bool", lambda: dist.reduce_scatter_tensor(torch.empty(2, dtype=torch.bool),
                                                                   torch.ones(2 * size, dtype=torch.bool))),
        ("input is not contiguous", lambda: dist.reduce_scatter_tensor(torch.empty(2), torch.ones(2 * size, 2)[:, 0])),
    ]
    for words, call in cases:
        try:
            call()
            failures.append(f"no error for {words}")
        except RuntimeError as e:
            if words not in str(e) or f"rank {rank}" not in str(e):
                failures.append(f"error text lacks {words!r} or 'rank {rank}': {e}")
    out = torch.empty(size)
    dist.all_gather_into_tensor(out, torch.tensor([float(rank)]))
    if out.tolist() != [float(r) for r in range(size)]:
        failures.append(f"the group after the errors: {out.tolist()}")
    agree(failures, gloo)


def test_bad_input_on_one_rank_fails_everyone(world):
    """Rank 1 alone passes a wrong output size: it raises at once, naming
    itself; every other rank, already inside the all-gather, raises a
    MismatchError naming rank 1's rejected call within seconds (the call
    status's 2 s grace), not at the group timeout. On a group of its own
    (a failed collective leaves its communicator unusable): at 2 ranks the
    whole world (MPI transport), at 4 a reordered subgroup (the store
    transport, as the dimensions of a 2-D mesh); one each, as the wait costs
    2 s of the file's time budget. The watchdog also prints the mismatch to
    stderr ("boostcomm: error: rank 0: collective mismatch ..."): expected."""
    rank, size, gloo = world
    transport = "mpi" if size == 2 else "store"
    ranks = list(range(size)) if transport == "mpi" else list(reversed(range(size)))
    group = dist.new_group(ranks, backend="boostcomm", timeout=datetime.timedelta(seconds=60))
    me = dist.get_rank(group)
    ok = torch.empty(size)
    dist.all_gather_into_tensor(ok, torch.ones(1), group=group)  # past the first call's setup
    failures = []
    t0 = time.perf_counter()
    try:
        dist.all_gather_into_tensor(torch.empty(size + (me == 1)), torch.ones(1), group=group)
        failures.append("no error")
    except Exception as e:  # noqa: BLE001 - the type is checked below
        waited = time.perf_counter() - t0
        text = str(e)
        if me == 1:
            if f"output has {size + 1} elements" not in text or "rank 1" not in text:
                failures.append(f"the bad rank's error lacks its argument or rank: {text}")
        elif "REJECTED" not in text or "rank 1" not in text or not waited < 30:
            failures.append(f"after {waited:.1f} s: {type(e).__name__}: {text}")
    agree(failures, gloo)
