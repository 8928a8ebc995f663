"""One rank of a store-rendezvous job (started by test_torch2_backend.py) or
of an mpirun job (MPI transport; ctest python.torch2_backend_mpi): what
torch 2.x routes to a CPU backend beyond the 1.x ops, checked against float64
references on every rank, with every rank's result compared bitwise:
  - init_process_group("cpu:boostcomm") (the device-qualified form)
  - allreduce with SUM, AVG, MIN, MAX, PRODUCT and PREMUL_SUM (scalar and tensor factor)
  - reduce_scatter_tensor and reduce_scatter with SUM, AVG (gloo's sums: upstream
    bug pytorch#162338) and PREMUL_SUM, odd sizes; all_gather_into_tensor
  - _coalescing_manager over all_gather_into_tensor (uint8 views of mixed
    dtypes, as FSDP2 gathers), reduce_scatter_tensor and all_reduce
  - functional collectives (torch.distributed._functional_collectives)
  - ProcessGroup.split_group: subgroups, None for non-members
  - a torch.compile'd DDP model: the same parameters as eager DDP
Prints "rank R: ok" at the end, or exits non-zero at the first failure."""

import copy
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import boostcomm.torch as bct

FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def check(cond, what):
    if not cond:
        print(f"rank {dist.get_rank()}: FAILED: {what}", flush=True)
        os._exit(1)


def same_on_every_rank(t, what, group=None):
    """Every rank holds the same bits (compared as raw bytes)."""
    raw = t.contiguous().view(torch.uint8).reshape(-1)
    n = dist.get_world_size(group)
    gathered = torch.empty(n * raw.numel(), dtype=torch.uint8)
    dist.all_gather_into_tensor(gathered, raw, group=group)
    for r in range(n):
        check(torch.equal(gathered[r * raw.numel():(r + 1) * raw.numel()], raw), f"{what}: rank {r} differs")


def close(got, ref, dtype, what):
    """got (dtype) against a float64 reference: exact for float64, else within
    the dtype's rounding of the sum (float32 accumulation for 16-bit types)."""
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    check(torch.allclose(got.double(), ref, rtol=tol, atol=tol), f"{what} ({dtype}): {got[:6].tolist()} vs "
          f"{ref[:6].tolist()}")


def data(rank, count, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return (torch.rand(count, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)


def allreduce_ops(rank, size):
    count = 1001
    for dtype in FLOATS:
        inputs = [data(r, count, dtype, 1).double() for r in range(size)]
        refs = {"sum": sum(inputs), "avg": sum(inputs) / size, "min": torch.stack(inputs).min(0).values,
                "max": torch.stack(inputs).max(0).values}
        for name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("min", dist.ReduceOp.MIN),
                         ("max", dist.ReduceOp.MAX)):
            t = data(rank, count, dtype, 1)
            dist.all_reduce(t, op=op)
            close(t, refs[name], dtype, f"all_reduce {name}")
            same_on_every_rank(t, f"all_reduce {name} {dtype}")
        for factor in (0.25, torch.tensor([0.25], dtype=torch.float64)):
            t = data(rank, count, dtype, 1)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
            close(t, sum(i.to(dtype).double() * 0.25 for i in inputs), dtype, "all_reduce PREMUL_SUM")
            same_on_every_rank(t, f"all_reduce premul {dtype}")
    t = torch.full((7,), 1.0 + rank % 2, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
    check(torch.equal(t, torch.full((7,), 2.0 ** (size // 2), dtype=torch.float64)), "all_reduce PRODUCT")


def reduce_scatter_ops(rank, size):
    for count in (1, 5, 1000):
        for dtype in (torch.float32, torch.float64, torch.bfloat16):
            inputs = [data(r, size * count, dtype, 2 + count).double() for r in range(size)]
            block = slice(rank * count, (rank + 1) * count)
            for name, op, scale in (("sum", dist.ReduceOp.SUM, 1.0), ("avg", dist.ReduceOp.AVG, 1.0 / size),
                                    ("premul", dist._make_nccl_premul_sum(0.5), 0.5)):
                inp = data(rank, size * count, dtype, 2 + count)
                before = inp.clone()
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, inp, op=op)
                ref = sum(i.to(dtype).double() * (0.5 if name == "premul" else 1.0) for i in inputs)[block]
                close(out, ref if name != "avg" else ref * scale, dtype, f"reduce_scatter_tensor {name} n={count}")
                check(torch.equal(inp, before), f"reduce_scatter_tensor {name} changed its input")
            # The list form with AVG (gloo sums here).
            out = torch.empty(count, dtype=dtype)
            blocks = list(data(rank, size * count, dtype, 2 + count).chunk(size))
            dist.reduce_scatter(out, blocks, op=dist.ReduceOp.AVG)
            close(out, sum(inputs)[block] / size, dtype, f"reduce_scatter list avg n={count}")
        out = torch.empty(size * count, dtype=torch.float32)
        dist.all_gather_into_tensor(out, torch.full((count,), float(rank)))
        check(torch.equal(out, torch.arange(size, dtype=torch.float32).repeat_interleave(count)),
              f"all_gather_into_tensor n={count}")


def coalesced(rank, size):
    # FSDP2's all-gather: uint8 views of parameters of several dtypes, one collective.
    params = [data(rank, 13, torch.float32, 3), data(rank, 6, torch.bfloat16, 4), data(rank, 9, torch.float64, 5)]
    ins = [p.view(torch.uint8) for p in params]
    outs = [torch.empty(size * i.numel(), dtype=torch.uint8) for i in ins]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for k, (o, p) in enumerate(zip(outs, params)):
        for r in range(size):
            want = data(r, p.numel(), p.dtype, 3 + k).view(torch.uint8)
            check(torch.equal(o[r * want.numel():(r + 1) * want.numel()], want), f"coalesced all_gather {k} rank {r}")
    # Reduce-scatter of gradients, AVG, one collective.
    grads = [data(rank, size * n, torch.float32, 6 + n) for n in (3, 10)]
    outs = [torch.empty(g.numel() // size) for g in grads]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, g in zip(outs, grads):
            dist.reduce_scatter_tensor(o, g, op=dist.ReduceOp.AVG)
    cm.wait()
    for o, g, n in zip(outs, grads, (3, 10)):
        ref = sum(data(r, size * n, torch.float32, 6 + n).double() for r in range(size)) / size
        close(o, ref[rank * n:(rank + 1) * n], torch.float32, f"coalesced reduce_scatter n={n}")
    # all_reduce under the manager (the allreduce_coalesced path), then the synchronous form.
    ts = [torch.full((4,), float(rank)), torch.full((2,), 1.0)]
    with dist._coalescing_manager():
        for t in ts:
            dist.all_reduce(t)
    check(torch.equal(ts[0], torch.full((4,), float(sum(range(size))))) and torch.equal(ts[1], torch.full((2,), float(size))),
          "coalesced all_reduce")


def functional(rank, size):
    group = dist.group.WORLD
    t = funcol.all_reduce(torch.full((5,), float(rank + 1)), "sum", group)
    check(torch.equal(t, torch.full((5,), float(size * (size + 1) // 2))), "funcol.all_reduce")
    g = funcol.all_gather_tensor(torch.full((2,), float(rank)), 0, group)
    check(torch.equal(g, torch.arange(size, dtype=torch.float32).repeat_interleave(2)), "funcol.all_gather_tensor")
    rs = funcol.reduce_scatter_tensor(torch.arange(3 * size, dtype=torch.float32), "avg", 0, group)
    check(torch.equal(rs, torch.arange(3 * rank, 3 * rank + 3, dtype=torch.float32)), "funcol.reduce_scatter_tensor avg")


def split(rank, size):
    pg = dist.distributed_c10d._get_default_group()
    members = list(range(0, size, 2))  # ranks 0, 2, ...
    sub = pg.split_group(members, timeout=datetime.timedelta(seconds=60), opts=None, group_name="bc_split_even",
                         group_desc="even ranks")
    if rank not in members:
        check(sub is None, "split_group: a non-member got a group")
        return
    check(sub is not None and sub.size() == len(members) and sub.rank() == members.index(rank), "split_group size/rank")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=sub)
    check(torch.equal(t, torch.full((3,), float(sum(members)))), "all_reduce on the split group")
    check(bct.backend_of(sub) is not None, "the split group runs on boostcomm")


def compiled_ddp(rank, size):
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    results = []
    for compiled in (False, True):
        model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base))
        run = torch.compile(model, backend="aot_eager") if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            g = torch.Generator().manual_seed(100 * rank + step)
            x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(run(x), y).backward()
            opt.step()
        results.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    torch.testing.assert_close(results[1], results[0], rtol=1e-5, atol=1e-6)
    same_on_every_rank(results[1], "compiled DDP parameters")


def main():
    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=120)
    if "OMPI_COMM_WORLD_SIZE" in os.environ:  # under mpirun: the MPI transport
        bct.init_process_group("cpu:boostcomm", timeout=timeout)
    else:
        dist.init_process_group("cpu:boostcomm", init_method=os.environ["BC_TEST_INIT"], rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=timeout)
    rank, size = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "boostcomm" or "boostcomm" in str(dist.get_backend()), f"backend {dist.get_backend()}")
    check(bct.backend_of() is not None, "the default group's CPU backend is boostcomm")
    for part in (allreduce_ops, reduce_scatter_ops, coalesced, functional, split, compiled_ddp):
        part(rank, size)
        print(f"rank {rank}: {part.__name__} ok", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
