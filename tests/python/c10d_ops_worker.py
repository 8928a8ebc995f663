"""One rank of a store-rendezvous job (started by test_torch_c10d_ops.py): the
c10d ops beyond the collectives -- send / recv / recvAnysource / isend / irecv /
batch_isend_irecv, list alltoall, monitored_barrier, sequence numbers, many
groups alive at once (rows and columns of a 2-D mesh, new_subgroups), the
group timeout and abort -- checked against references on every rank. Prints
"rank R: ok" at the end, or exits non-zero at the first failure.

argv[1] picks the part: "ops" (everything but the failure cases), "timeout"
(a rank skips an allreduce: the others fail within the group timeout,
naming it), "monitored" (a rank skips monitored_barrier: rank 0 names it; rank 0 alone with
timeout 0 reports its own timeout),
"abort" (abort_process_group ends a pending recv at once)."""

import datetime
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import boostcomm.torch as bct

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.uint8]


def check(cond, what):
    if not cond:
        print(f"rank {dist.get_rank()}: FAILED: {what}", flush=True)
        sys.stdout.flush()
        os._exit(1)


def payload(src, dst, count, dtype, salt=0):
    """What rank src sends rank dst: small integers, exact in every dtype."""
    rng = np.random.default_rng(10007 * src + 101 * dst + salt)
    return torch.from_numpy(rng.integers(0, 100, size=count).astype(np.float64)).to(dtype)


def point_to_point(rank, size):
    # Every ordered pair, odd counts, every dtype, blocking send/recv in an
    # order that cannot deadlock (lower rank sends first).
    for salt, (dtype, count) in enumerate((d, c) for d in DTYPES for c in (0, 1, 7, 1000, 65537)):
        for a in range(size):
            for b in range(a + 1, size):
                if rank == a:
                    dist.send(payload(a, b, count, dtype, salt), b, tag=salt)
                    got = torch.empty(count, dtype=dtype)
                    dist.recv(got, b, tag=salt)
                    check(torch.equal(got, payload(b, a, count, dtype, salt)), f"recv {b}->{a} {dtype} x{count}")
                elif rank == b:
                    got = torch.empty(count, dtype=dtype)
                    src = dist.recv(got, a, tag=salt)
                    check(src == a and torch.equal(got, payload(a, b, count, dtype, salt)),
                          f"recv {a}->{b} {dtype} x{count}")
                    dist.send(payload(b, a, count, dtype, salt), a, tag=salt)
    # isend / irecv with several tags in flight at once, received in the other order.
    works, expect = [], []
    for peer in range(size):
        if peer == rank:
            continue
        for tag in (3, 4, 5):
            works.append(dist.isend(payload(rank, peer, 33, torch.float32, tag), peer, tag=tag))
    for peer in range(size):
        if peer == rank:
            continue
        for tag in (5, 4, 3):
            t = torch.empty(33)
            works.append(dist.irecv(t, peer, tag=tag))
            expect.append((t, payload(peer, rank, 33, torch.float32, tag)))
    for w in works:
        w.wait()
    check(all(torch.equal(t, e) for t, e in expect), "isend/irecv with tags in flight")
    # Messages between one pair and one tag arrive in posting order.
    if rank == 0:
        for i in range(5):
            dist.send(torch.full((4,), float(i)), 1, tag=9)
    elif rank == 1:
        got = []
        for _ in range(5):
            t = torch.empty(4)
            dist.recv(t, 0, tag=9)
            got.append(t[0].item())
        check(got == [0.0, 1.0, 2.0, 3.0, 4.0], f"non-overtaking order: {got}")
    # recv from any source: rank 0 hears from every other rank and learns who sent.
    if rank == 0:
        seen = []
        for _ in range(size - 1):
            t = torch.empty(8, dtype=torch.int64)
            src = dist.recv(t, tag=11)
            check(torch.equal(t, payload(src, 0, 8, torch.int64, 11)), f"any-source payload from {src}")
            seen.append(src)
        check(sorted(seen) == list(range(1, size)), f"any-source senders {seen}")
    else:
        dist.send(payload(rank, 0, 8, torch.int64, 11), 0, tag=11)
    # batch_isend_irecv: a ring shift.
    right, left = (rank + 1) % size, (rank - 1) % size
    out = payload(rank, right, 17, torch.float64, 12)
    inp = torch.empty(17, dtype=torch.float64)
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, out, right), dist.P2POp(dist.irecv, inp, left)]):
        w.wait()
    check(torch.equal(inp, payload(left, rank, 17, torch.float64, 12)), "batch_isend_irecv ring")
    dist.barrier()


def alltoall(rank, size):
    # Uneven blocks: rank r sends (r + j + 1) elements to rank j.
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        ins = [payload(rank, j, rank + j + 1, dtype, 20) for j in range(size)]
        outs = [torch.empty(j + rank + 1, dtype=dtype) for j in range(size)]
        dist.all_to_all(outs, ins)
        for j in range(size):
            check(torch.equal(outs[j], payload(j, rank, j + rank + 1, dtype, 20)), f"all_to_all block from {j} {dtype}")


def sparse_allreduce(rank, size):
    # SUM of sparse COO tensors (gloo offers it), against the dense sum: an
    # entry on every rank that holds any (index 0, twice each: uncoalesced
    # input), one entry of each such rank alone, a rank with none (rank 1
    # from 3 ranks on), integer
    # and float64 values, a dense part (hybrid), a leaf that requires grad.
    def gathered(x):
        out = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(out, x.contiguous())
        return out

    empty = size >= 3 and rank == 1
    holders = [r for r in range(size) if not (size >= 3 and r == 1)]
    for dtype in (torch.float32, torch.float64, torch.int64):
        idx = [] if empty else [0, 0, rank + 1]
        vals = torch.tensor([float(10 * rank + k + 1) for k in range(len(idx))], dtype=torch.float64).to(dtype)
        t = torch.sparse_coo_tensor(torch.tensor(idx, dtype=torch.long).reshape(1, -1), vals, (size + 2,))
        want = t.to_dense().clone()
        dist.all_reduce(want)
        dist.all_reduce(t)
        check(t.is_sparse and t.is_coalesced() and torch.equal(t.to_dense(), want),
              f"sparse allreduce {dtype}: {t.to_dense()} != {want}")
        check(t._nnz() == 1 + len(holders), f"sparse allreduce {dtype}: nnz {t._nnz()}, want {1 + len(holders)}")
        # Every rank ends with the same bits: the same indices and values, not only the same dense view.
        for part in (t._indices().reshape(-1), t._values().reshape(-1)):
            check(all(torch.equal(g, part) for g in gathered(part)), f"sparse allreduce {dtype}: ranks differ")
    rows = torch.tensor([[rank % 2, 3]])
    hybrid = torch.sparse_coo_tensor(rows, torch.full((2, 3), float(rank + 1)), (4, 3), requires_grad=True)
    want = hybrid.detach().to_dense().clone()
    dist.all_reduce(want)
    work = dist.all_reduce(hybrid, async_op=True)
    work.wait()
    check(torch.equal(hybrid.detach().to_dense(), want), "sparse allreduce with a dense part (requires grad)")
    check(torch.equal(work.result()[0].detach().to_dense(), want), "sparse allreduce: the Work's result")


def sequence_numbers(rank, size):
    # torch 2.x's ProcessGroup answers for gloo, nccl and ucc only ("ProcessGroup
    # custom does not yet support sequence numbers"); the backend itself answers.
    pg = bct.backend_of()
    before = pg._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(3))
    dist.broadcast(torch.ones(3), 0)
    after = pg._get_sequence_number_for_group()
    check(after == before + 2, f"sequence number {before} -> {after} over two collectives")
    both = [torch.zeros(1, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(both, torch.tensor([after], dtype=torch.int64))
    check(all(int(b) == after for b in both), f"sequence numbers differ across ranks: {both}")


def monitored_ok(rank, size):
    bct.monitored_barrier(timeout=datetime.timedelta(seconds=60))
    bct.monitored_barrier(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)


def mesh(rank, size):
    # 2-D mesh of rows x cols (size 4: 2 x 2; else 1 x size), every row and
    # column group alive at once, used interleaved.
    rows = 2 if size % 2 == 0 else 1
    cols = size // rows
    row_groups = [dist.new_group([r * cols + c for c in range(cols)]) for r in range(rows)]
    col_groups = [dist.new_group([r * cols + c for r in range(rows)]) for c in range(cols)]
    my_row, my_col = rank // cols, rank % cols
    for step in range(3):
        t = torch.full((5,), float(rank + step))
        dist.all_reduce(t, group=row_groups[my_row])
        want = sum(my_row * cols + c + step for c in range(cols))
        check(torch.all(t == want), f"row allreduce step {step}: {t} != {want}")
        u = torch.full((3,), float(rank * step))
        dist.all_reduce(u, group=col_groups[my_col])
        want = sum((r * cols + my_col) * step for r in range(rows))
        check(torch.all(u == want), f"column allreduce step {step}")
    # Subgroups of consecutive ranks (1 rank when size is odd, else 2), as
    # new_subgroups makes them: every rank creates every subgroup and keeps
    # its own. (torch 1.13's new_subgroups and new_subgroups_by_enumeration
    # refuse to run without CUDA, whatever the backend.)
    group_size = 2 if size % 2 == 0 else 1
    subgroups = [dist.new_group(list(range(b, b + group_size))) for b in range(0, size, group_size)]
    cur = subgroups[rank // group_size]
    check(len(subgroups) == size // group_size, "new_subgroups count")
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=cur)
    base = rank - rank % group_size
    check(t.item() == sum(range(base, base + group_size)), f"new_subgroups allreduce {t}")
    # p2p inside a subgroup uses global ranks in torch's API.
    if size >= 2:
        pair = dist.new_group([0, size - 1])
        if rank == 0:
            dist.send(torch.arange(6.0), size - 1, group=pair, tag=1)
        elif rank == size - 1:
            t = torch.empty(6)
            dist.recv(t, 0, group=pair, tag=1)
            check(torch.equal(t, torch.arange(6.0)), "send/recv in a subgroup")
    dist.barrier()


def bad_input(rank, size):
    """Errors every rank raises alike (each passes the same bad argument), and the group stays usable."""
    def raises(fn, words, what):
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            text = str(e)
            check(all(w in text for w in words), f"{what}: error {text!r} lacks {words}")
            return
        check(False, f"{what}: no error")

    base = torch.arange(12.0).reshape(3, 4)
    raises(lambda: dist.all_reduce(base.t()), ["not contiguous"], "non-contiguous allreduce")
    # Non-CPU tensors cannot reach the backend here: the CPU build has no other
    # device, and torch 2.x's meta kernels of the c10d ops take "meta" tensors
    # without calling any backend (tensor_view.cc's device check stays untested).
    sparse = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    raises(lambda: dist.all_reduce(sparse, op=dist.ReduceOp.MAX), ["sparse", "rank 0 passed reduce op", "SUM only"],
           "sparse allreduce MAX")
    # One rank's refusal is raised on every rank, naming it (no rank left waiting).
    raises(lambda: dist.all_reduce(sparse, op=dist.ReduceOp.MAX if rank == size - 1 else dist.ReduceOp.SUM),
           ["sparse", f"rank {size - 1} passed reduce op", "SUM only"], "sparse allreduce MAX on one rank")
    # Shapes that differ between ranks: every rank raises, naming a rank, before data moves.
    odd = torch.sparse_coo_tensor([[0]], [1.0], (4 + rank % 2,))
    if size > 1:
        raises(lambda: dist.all_reduce(odd), ["sparse", "has sizes [4]", "has sizes [5]", f"rank {rank} has"],
               "sparse allreduce of different sizes")
    raises(lambda: dist.send(torch.ones(2), size + 3), ["rank"], "send to an out-of-range rank")
    raises(lambda: dist.recv(torch.ones(2), rank), ["this rank"], "recv from this rank")
    raises(lambda: dist.send(torch.ones(2), (rank + 1) % size, tag=-1), ["tag -1"], "negative tag")
    raises(lambda: dist.new_group([0, size + 5]), ["rank"], "new_group with an out-of-range rank")
    t = torch.ones(4)
    dist.all_reduce(t)
    check(torch.all(t == size), "allreduce after rejected calls")
    # An op on a group this rank is not in: torch returns without running it (a warning), no hang.
    if size >= 3:
        others = dist.new_group([1, 2])
        if rank not in (1, 2):
            check(dist.all_reduce(torch.ones(2), group=others) is None, "non-member op")
        else:
            u = torch.ones(2)
            dist.all_reduce(u, group=others)
            check(torch.all(u == 2), "member op beside a non-member")
    # Duplicate ranks: torch 2.x refuses them on every rank before any backend
    # (the backend's creator refuses them too, naming the rank, should torch not).
    t0 = time.monotonic()
    try:
        dist.new_group([0, 0], timeout=datetime.timedelta(seconds=4))
        check(False, "new_group([0, 0]) was accepted")
    except (RuntimeError, ValueError) as e:
        text = str(e)
        check("duplicate" in text, f"duplicate ranks: {text}")
    check(time.monotonic() - t0 < 30, "duplicate ranks took too long")
    t = torch.ones(4)
    dist.all_reduce(t)
    check(torch.all(t == size), "allreduce after a refused group")
    dist.barrier()


def timeout_case(rank, size):
    # A group with a 3 s timeout whose last rank never joins the allreduce.
    g = dist.new_group(list(range(size)), timeout=datetime.timedelta(seconds=3))
    if rank == size - 1:
        time.sleep(8)
        return
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4), group=g)
        check(False, "allreduce without the last rank must time out")
    except RuntimeError as e:
        waited = time.monotonic() - t0
        check("did not complete within" in str(e) or "imeout" in str(e), f"timeout error text: {e}")
        check(waited < 30, f"timeout took {waited:.1f} s")


def monitored_zero_timeout(rank, size):
    """Rank 0 alone, timeout 0: as gloo, rank 0 reports its own timeout (torch's suite,
    test_monitored_barrier_gloo_rank_0_timeout, checks "Rank 0 timed out in monitoredBarrier")."""
    g = dist.new_group(list(range(size)))
    if rank != 0:
        return
    try:
        bct.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=0))
        check(False, "monitored_barrier with timeout 0 must raise")
    except RuntimeError as e:
        check("Rank 0 timed out in monitoredBarrier" in str(e), f"monitored_barrier timeout 0: {e}")


def monitored_missing(rank, size):
    if rank == size - 1:
        time.sleep(6)  # never arrives in time
        return
    try:
        bct.monitored_barrier(timeout=datetime.timedelta(seconds=2), wait_all_ranks=True)
        check(rank != 0, "rank 0 must name the missing rank")
    except RuntimeError as e:
        text = str(e)
        if rank == 0:
            check(f"Rank {size - 1} failed to pass monitoredBarrier" in text, f"monitored_barrier error: {text}")
        else:
            # Rank 0 tells every rank that arrived which rank did not, before it raises.
            check(f"rank 0 reports Rank {size - 1} failed to pass monitoredBarrier" in text,
                  f"monitored_barrier error on rank {rank}: {text}")


def abort_case(rank, size):
    g = dist.new_group(list(range(size)))
    store = dist.distributed_c10d._get_default_store()
    if rank != 0:
        # Alive until rank 0 has checked: a peer that exits first closes its
        # connections, and rank 0's pending recv may then fail with
        # "Connection closed by peer" before the abort (seen once in CI-like runs).
        store.wait(["abort_checked"], datetime.timedelta(seconds=60))
    if rank == 0:
        work = dist.irecv(torch.empty(3), 1, group=g, tag=2)  # never sent
        t0 = time.monotonic()
        bct.abort_process_group(g)
        try:
            work.wait()
            check(False, "wait after abort must raise")
        except RuntimeError as e:
            check("abort" in str(e), f"abort error: {e}")
        check(time.monotonic() - t0 < 10, "abort returned late")
        try:
            dist.all_reduce(torch.ones(1), group=g)
            check(False, "an op after abort must raise")
        except RuntimeError as e:
            check("abort" in str(e) or "shutdown" in str(e), f"op after abort: {e}")
        store.set("abort_checked", "1")


def rejected_case(rank, size):
    # The last rank's tensor fails the backend's own checks (not contiguous);
    # the others entered the allreduce. They must fail within seconds naming
    # it (its rejection is marked in its call status), not at the group's
    # 60 s timeout.
    g = dist.new_group(list(range(size)), timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(4), group=g)
    t0 = time.monotonic()
    try:
        if rank == size - 1:
            dist.all_reduce(torch.ones(8, 2).t(), group=g)
        else:
            dist.all_reduce(torch.ones(16), group=g)
        check(False, "the allreduce with a rejected call on one rank must raise")
    except RuntimeError as e:
        waited = time.monotonic() - t0
        text = str(e)
        if rank == size - 1:
            check("not contiguous" in text, f"culprit's error: {text}")
        else:
            check(f"rank {size - 1}: allreduce" in text and "REJECTED" in text, f"peer's error: {text}")
            check(waited < 20, f"the peer waited {waited:.1f} s")
    if rank == size - 1:
        time.sleep(5)  # alive past the 2 s grace: its peers read its rejection, not its exit


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else "ops"
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("boostcomm", init_method=os.environ["BC_TEST_INIT"], rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    if part == "ops":
        point_to_point(rank, size)
        alltoall(rank, size)
        sparse_allreduce(rank, size)
        sequence_numbers(rank, size)
        monitored_ok(rank, size)
        mesh(rank, size)
        bad_input(rank, size)
    elif part == "timeout":
        timeout_case(rank, size)
    elif part == "monitored":
        monitored_zero_timeout(rank, size)
        monitored_missing(rank, size)
    elif part == "abort":
        abort_case(rank, size)
    elif part == "rejected":
        rejected_case(rank, size)
    print(f"rank {rank}: ok", flush=True)
    os._exit(0)  # no interpreter teardown: ranks end together with their output flushed


if __name__ == "__main__":
    main()
