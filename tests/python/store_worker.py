"""One rank of a store-rendezvous job (no mpirun): started by test_torch_store.py
with RANK / WORLD_SIZE and either MASTER_ADDR / MASTER_PORT (env://) or
BC_TEST_INIT=file://... . Checks every collective of the boostcomm backend
against a float64 reference on every rank, that all ranks end bitwise
identical, and subgroups; exits non-zero on the first failure."""

import datetime
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import boostcomm.torch  # noqa: F401  (registers the backend)

COUNTS = [0, 1, 7, 1000, 65537]
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]
OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
       "prod": dist.ReduceOp.PRODUCT, "avg": dist.ReduceOp.AVG}


def data(rank, count, salt, high=7):
    rng = np.random.default_rng(1000 * rank + salt)
    return rng.integers(0, high, size=count).astype(np.float64)


def reference(size, count, salt, op, high=7):
    s = np.stack([data(r, count, salt, high) for r in range(size)]) if count else np.zeros((size, 0))
    return {"sum": s.sum(0), "max": s.max(0), "min": s.min(0), "prod": s.prod(0), "avg": s.mean(0)}[op]


def check(cond, what):
    if not cond:
        print(f"rank {dist.get_rank()}: FAILED: {what}", flush=True)
        sys.exit(1)


def same_everywhere(t, group=None):
    """All ranks of `group` hold bitwise-identical `t`."""
    raw = t.contiguous().view(torch.uint8) if t.numel() else torch.zeros(0, dtype=torch.uint8)
    n = dist.get_world_size(group)
    outs = [torch.empty_like(raw) for _ in range(n)]
    dist.all_gather(outs, raw, group=group)
    return all(torch.equal(o, raw) for o in outs)


def run(group, rank, size, tag, members):
    salt = 0
    for dtype in DTYPES:
        for count in COUNTS:
            for name, op in OPS.items():
                if name == "avg" and not dtype.is_floating_point:
                    continue
                if name == "prod" and count > 1000:
                    continue
                salt += 1
                high = 3 if name == "prod" else 7
                t = torch.from_numpy(data(rank, count, salt, high)).to(dtype)
                dist.all_reduce(t, op=op, group=group)
                ref = torch.from_numpy(reference(size, count, salt, name, high))
                tol = 0.0
                if dtype in (torch.float16, torch.bfloat16):
                    tol = 1e-2 * float(ref.abs().max()) if count else 0.0
                elif name == "avg" and count:  # the division rounds in the tensor's dtype
                    tol = 4 * torch.finfo(dtype).eps * max(1.0, float(ref.abs().max()))
                ok = torch.allclose(t.double(), ref, rtol=0, atol=tol) if tol else torch.equal(t.double(), ref)
                check(ok, f"{tag} allreduce {name} {dtype} count {count}")
                check(same_everywhere(t, group), f"{tag} allreduce {name} {dtype} count {count}: ranks differ")
    for count in COUNTS:
        for root in range(size):
            salt += 1
            t = torch.from_numpy(data(rank, count, salt)).float()
            dist.broadcast(t, src=members[root], group=group)
            check(torch.equal(t.double(), torch.from_numpy(data(root, count, salt))),
                  f"{tag} broadcast root {root} count {count}")
        salt += 1
        mine = torch.from_numpy(data(rank, count, salt))
        outs = [torch.empty(count, dtype=torch.float64) for _ in range(size)]
        dist.all_gather(outs, mine, group=group)
        for r in range(size):
            check(torch.equal(outs[r], torch.from_numpy(data(r, count, salt))), f"{tag} all_gather count {count} from {r}")
        flat = torch.empty(size * count, dtype=torch.float64)
        dist.all_gather_into_tensor(flat, mine, group=group)
        check(torch.equal(flat, torch.cat(outs)), f"{tag} all_gather_into_tensor count {count}")
        salt += 1
        full = torch.from_numpy(data(rank, size * count, salt))
        ref = torch.from_numpy(reference(size, size * count, salt, "sum"))
        out = torch.empty(count, dtype=torch.float64)
        dist.reduce_scatter(out, list(full.split(count)) if count else [torch.empty(0, dtype=torch.float64)] * size,
                            group=group)
        check(torch.equal(out, ref[rank * count:(rank + 1) * count]), f"{tag} reduce_scatter count {count}")
        out2 = torch.empty(count, dtype=torch.float64)
        dist.reduce_scatter_tensor(out2, full, group=group)
        check(torch.equal(out2, out), f"{tag} reduce_scatter_tensor count {count}")
        for root in range(size):
            salt += 1
            t = torch.from_numpy(data(rank, count, salt))
            before = t.clone()
            dist.reduce(t, dst=members[root], op=dist.ReduceOp.SUM, group=group)
            if rank == root:
                check(torch.equal(t, torch.from_numpy(reference(size, count, salt, "sum"))), f"{tag} reduce root {root}")
            else:
                check(torch.equal(t, before), f"{tag} reduce leaves non-root {rank} unchanged")
            salt += 1
            mine = torch.from_numpy(data(rank, count, salt)).float()
            glist = [torch.empty(count) for _ in range(size)] if rank == root else None
            dist.gather(mine, gather_list=glist, dst=members[root], group=group)
            if rank == root:
                for r in range(size):
                    check(torch.equal(glist[r].double(), torch.from_numpy(data(r, count, salt))),
                          f"{tag} gather root {root} from {r} count {count}")
            salt += 1
            out = torch.empty(count, dtype=torch.int64)
            slist = [torch.from_numpy(data(r, count, salt)).long() for r in range(size)] if rank == root else None
            dist.scatter(out, scatter_list=slist, src=members[root], group=group)
            check(torch.equal(out.double(), torch.from_numpy(data(rank, count, salt))), f"{tag} scatter root {root}")
    # all_to_all_single: equal splits, then uneven splits (rank r sends r + j + 1 rows
    # of 3 elements to rank j, some empty), against the blocks every rank computes.
    for uneven in (False, True):
        send_rows = [(rank + j + 1) % 3 if uneven else 2 for j in range(size)]
        recv_rows = [(r + rank + 1) % 3 if uneven else 2 for r in range(size)]
        inp = torch.cat([torch.full((send_rows[j], 3), float(100 * rank + j)) for j in range(size)])
        out = torch.empty(sum(recv_rows), 3)
        dist.all_to_all_single(out, inp, recv_rows if uneven else None, send_rows if uneven else None, group=group)
        expect = torch.cat([torch.full((recv_rows[r], 3), float(100 * r + rank)) for r in range(size)])
        check(torch.equal(out, expect), f"{tag} all_to_all_single uneven={uneven}")
    ins = [torch.full((n,), float(rank + 1)) for n in (3, 0, 5)]
    outl = [[torch.empty(n) for n in (3, 0, 5)] for _ in range(size)]
    dist.all_gather_coalesced(outl, ins, group=group)
    check(all(torch.all(outl[r][i] == r + 1) for r in range(size) for i in range(3)), f"{tag} all_gather_coalesced")
    ts = [torch.full((n,), float(rank + 1)) for n in (3, 0, 1000)]
    dist.all_reduce_coalesced(ts, group=group)
    check(all(torch.all(t == size * (size + 1) / 2) for t in ts), f"{tag} all_reduce_coalesced")
    work = dist.all_reduce(torch.ones(10), group=group, async_op=True)
    work.wait()
    dist.barrier(group=group)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init = os.environ.get("BC_TEST_INIT", "env://")
    torch.set_num_threads(1)
    dist.init_process_group("boostcomm", init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    check(dist.get_backend() == "boostcomm", "default backend")
    run(None, rank, size, "world", list(range(size)))
    # Bad input: rank 0 expects one row fewer from the last rank than it sends:
    # every rank raises, naming the pair, and the group stays usable.
    recv_rows = [2] * size
    if rank == 0:
        recv_rows[-1] = 1
    try:
        dist.all_to_all_single(torch.empty(sum(recv_rows), 3), torch.ones(2 * size, 3), recv_rows, [2] * size)
        check(False, "mismatched all_to_all_single splits must raise")
    except RuntimeError as e:
        check(f"rank {size - 1} sends 2 rows to rank 0, which expects 1" in str(e), f"split mismatch error: {e}")
    t = torch.ones(3)
    dist.all_reduce(t)
    check(torch.all(t == size), "allreduce after a rejected all_to_all_single")
    if size >= 2:
        # A subgroup of the last two ranks (created by every rank, as torch requires)
        # and one of rank 0 alone beside it.
        members = [size - 2, size - 1]
        sub = dist.new_group(members, backend="boostcomm")
        solo = dist.new_group([0], backend="boostcomm")
        if rank in members:
            run(sub, members.index(rank), 2, "subgroup", members)
        else:
            check(sub == dist.GroupMember.NON_GROUP_MEMBER, "non-member sees NON_GROUP_MEMBER")
        if rank == 0:
            t = torch.arange(5.0)
            dist.all_reduce(t, group=solo)
            check(torch.equal(t, torch.arange(5.0)), "one-rank group")
        dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    main()
