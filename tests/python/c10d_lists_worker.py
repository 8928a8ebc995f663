"""One rank of a store-rendezvous job (started by test_torch_c10d_ops.py): the
c10d ops that run as one collective over torch's tensor lists, in place
(allreduce_coalesced, the list forms of all_gather and reduce_scatter,
all_gather_coalesced), checked against float64 references on every rank, at
odd sizes with several tensors, and bitwise-identical across ranks. Then a
list whose shape differs between ranks: an error on every rank, no hang.
Prints "rank R: ok" at the end, or exits non-zero at the first failure.

argv[1] names the run (for the log only); BOOSTCOMM_ALGO set by the caller
picks the algorithm (unset: the table's, shm on one host)."""

import datetime
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

import boostcomm.torch  # noqa: F401  (registers the backend)

# Odd and prime counts, an empty tensor, one straddling the engine's 256 KiB chunk.
COUNTS = [1, 0, 7, 1000, 4099, 65537 + 3]
# all_gather / reduce_scatter list forms run on the lists from 1 MiB per block
# (process_group.cc, kListMinBytes) and packed below: both paths, odd sizes.
BLOCK_COUNTS = COUNTS + [262147, 300007]


def check(cond, what):
    if not cond:
        print(f"rank {dist.get_rank()}: FAILED: {what}", flush=True)
        os._exit(1)


def data(rank, index, count, salt):
    """Rank `rank`'s tensor `index`, in float64: values exact in float32, not small integers."""
    rng = np.random.default_rng(7919 * rank + 31 * index + salt)
    return torch.from_numpy(rng.standard_normal(count)).to(torch.float32).to(torch.float64)


def same_on_every_rank(tensors, what):
    """Bitwise: every rank's results gathered (as raw bytes, through gloo) and compared."""
    parts = [t.contiguous().reshape(-1).view(torch.uint8) for t in tensors if t.numel() > 0]
    flat = torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)
    got = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(got, flat, group=GLOO)
    check(all(torch.equal(g, got[0]) for g in got), f"{what}: results differ between ranks")


def allreduce_coalesced(rank, size):
    for salt, (dtype, op) in enumerate([(torch.float32, dist.ReduceOp.SUM), (torch.float64, dist.ReduceOp.SUM),
                                        (torch.float32, dist.ReduceOp.MAX), (torch.int64, dist.ReduceOp.SUM)]):
        tensors = [data(rank, i, c, salt).to(dtype) if dtype.is_floating_point
                   else torch.arange(c, dtype=dtype) * (rank + 1) + i for i, c in enumerate(COUNTS)]
        dist.all_reduce_coalesced(tensors, op=op)
        for i, (c, t) in enumerate(zip(COUNTS, tensors)):
            if dtype.is_floating_point:
                inputs = torch.stack([data(r, i, c, salt) for r in range(size)]) if c else torch.zeros(size, 0, dtype=torch.float64)
                ref = inputs.sum(0) if op == dist.ReduceOp.SUM else inputs.max(0).values
                tol = 1e-5 * size if dtype == torch.float32 else 1e-12 * size
                check(torch.allclose(t.to(torch.float64), ref, rtol=tol, atol=tol),
                      f"allreduce_coalesced {dtype} {op} tensor {i} (x{c}): max error "
                      f"{(t.to(torch.float64) - ref).abs().max() if c else 0}")
            else:
                ref = torch.arange(c, dtype=dtype) * sum(r + 1 for r in range(size)) + i * size
                check(torch.equal(t, ref), f"allreduce_coalesced int64 tensor {i}")
        same_on_every_rank(tensors, f"allreduce_coalesced {dtype} {op}")


def all_gather_list(rank, size):
    # Pure data movement: exact equality with what each rank sent, any dtype.
    for salt, dtype in enumerate([torch.float32, torch.float64, torch.int32, torch.bool, torch.float16]):
        for c in BLOCK_COUNTS:
            mine = data(rank, 0, c, salt).to(dtype)
            outs = [torch.full((c,), 3, dtype=dtype) for _ in range(size)]
            dist.all_gather(outs, mine)
            for r in range(size):
                check(torch.equal(outs[r], data(r, 0, c, salt).to(dtype)), f"all_gather {dtype} x{c} block {r}")
    # In place: the outputs are chunks of one tensor and the input is this rank's chunk.
    for c in (4099, 300007):
        whole = torch.zeros(size * c)
        chunks = list(whole.chunk(size))
        chunks[rank].copy_(data(rank, 1, c, 9).to(torch.float32))
        dist.all_gather(chunks, chunks[rank])
        want = torch.cat([data(r, 1, c, 9).to(torch.float32) for r in range(size)])
        check(torch.equal(whole, want), f"all_gather in place (input is this rank's output chunk) x{c}")


def all_gather_coalesced(rank, size):
    # Several tensors of odd sizes in one call (torch wants one dtype per call).
    for salt, d in enumerate([torch.float32, torch.bfloat16, torch.int64], start=5):
        ins = [data(rank, i, c, salt).to(d) for i, c in enumerate(COUNTS)]
        outs = [[torch.empty_like(t) for t in ins] for _ in range(size)]
        dist.all_gather_coalesced(outs, ins)
        for r in range(size):
            for i, c in enumerate(COUNTS):
                check(torch.equal(outs[r][i], data(r, i, c, salt).to(d)), f"all_gather_coalesced {d} rank {r} tensor {i}")


def reduce_scatter_list(rank, size):
    for salt, (dtype, op) in enumerate([(torch.float32, dist.ReduceOp.SUM), (torch.float64, dist.ReduceOp.SUM),
                                        (torch.float32, dist.ReduceOp.MIN)]):
        for c in BLOCK_COUNTS:
            # Block j of rank r's input: data(r, j, c).
            ins = [data(rank, j, c, 20 + salt).to(dtype) for j in range(size)]
            out = torch.full((c,), 5, dtype=dtype)
            dist.reduce_scatter(out, ins, op=op)
            blocks = torch.stack([data(r, rank, c, 20 + salt) for r in range(size)]) if c else torch.zeros(size, 0, dtype=torch.float64)
            ref = blocks.sum(0) if op == dist.ReduceOp.SUM else blocks.min(0).values
            tol = 1e-5 * size if dtype == torch.float32 else 1e-12 * size
            check(torch.allclose(out.to(torch.float64), ref, rtol=tol, atol=tol), f"reduce_scatter {dtype} {op} x{c}")
    # In place: the output is this rank's input block.
    for c in (1000, 300007):
        ins = [data(rank, j, c, 30).to(torch.float32) for j in range(size)]
        ref = torch.stack([data(r, rank, c, 30) for r in range(size)]).sum(0)
        dist.reduce_scatter(ins[rank], ins)
        check(torch.allclose(ins[rank].to(torch.float64), ref, rtol=1e-5 * size, atol=1e-5 * size),
              f"reduce_scatter in place (output is this rank's input block) x{c}")
    # Every rank's block, gathered through gloo, against the reference.
    c = 300007
    outs = torch.empty(c)
    dist.reduce_scatter(outs, [data(r, 0, c, 31).to(torch.float32) * (rank + 1) for r in range(size)])
    full = [torch.empty(c) for _ in range(size)]
    dist.all_gather(full, outs, group=GLOO)
    ref = [data(r, 0, c, 31) * sum(q + 1 for q in range(size)) for r in range(size)]
    check(all(torch.allclose(full[r].to(torch.float64), ref[r], rtol=1e-5 * size, atol=1e-5 * size)
              for r in range(size)), "reduce_scatter blocks on every rank")


def mismatched_lists(rank, size):
    """Rank 0's list has a different shape: every rank gets an error, none hangs, the group stays usable."""
    counts = [5, 3] if rank != 0 else [5, 4]
    ins = [torch.ones(c) for c in counts]
    outs = [[torch.empty(c) for c in counts] for _ in range(size)]
    try:
        dist.all_gather_coalesced(outs, ins)
        check(False, "all_gather_coalesced with lists that differ between ranks was accepted")
    except RuntimeError as e:
        check("allgatherManyPerRank" in str(e) and "rank" in str(e), f"mismatch error text: {e}")
    tensors = [torch.ones(c) for c in counts]
    try:
        dist.all_reduce_coalesced(tensors)
        check(False, "all_reduce_coalesced with lists that differ between ranks was accepted")
    except RuntimeError as e:
        check("allreduceMany" in str(e), f"mismatch error text: {e}")
    t = torch.ones(3)
    dist.all_reduce(t)
    check(torch.all(t == size), "allreduce after rejected list calls")


GLOO = None


def main():
    global GLOO
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("boostcomm", init_method=os.environ["BC_TEST_INIT"], rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    GLOO = dist.new_group(backend="gloo")
    allreduce_coalesced(rank, size)
    all_gather_list(rank, size)
    all_gather_coalesced(rank, size)
    reduce_scatter_list(rank, size)
    mismatched_lists(rank, size)
    dist.barrier()
    print(f"rank {rank}: ok ({sys.argv[1] if len(sys.argv) > 1 else 'default'})", flush=True)
    os._exit(0)  # torch 1.13's process groups can hang at interpreter exit


if __name__ == "__main__":
    main()
