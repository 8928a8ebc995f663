"""mpi4py under libboostcomm_mpi.so: the collectives an mpi4py program issues
(buffer-based Allreduce, Bcast, Allgather[v], Reduce_scatter[_block],
Barrier, Iallreduce with Wait / Test / Waitall, and the pickle-based
lowercase ones) give the exact results, and the interposer reports the
buffer-based ones as routed. mpi4py calls MPI_* (nm -D on its MPI module), so
preloading is enough.

    mpirun -np 2 -x LD_PRELOAD=.../libboostcomm_mpi.so .venv/bin/python test_mpi4py.py --expect-preload
"""
import ctypes
import sys

import numpy as np
from mpi4py import MPI

ROUTED, OP, NATIVE = 0, 10, 14

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
expect_preload = "--expect-preload" in sys.argv
try:
    last_reason = ctypes.CDLL(None).boostcomm_mpi_last_reason
except AttributeError:
    last_reason = None
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print(f"rank {rank}: FAIL {what}", file=sys.stderr, flush=True)


def routed(what, reason=ROUTED):
    if expect_preload:
        got = last_reason() if last_reason else None
        check(got == reason or (reason == ROUTED and got == NATIVE),
              f"{what}: interposer reason {last_reason() if last_reason else None}, expected {reason}")


def pattern(n, r, dtype, seed=0):
    return ((np.arange(n, dtype=np.int64) * 7 + r * 31 + seed * 3) % 13 - 6).astype(dtype)


check(not expect_preload or last_reason is not None, "boostcomm_mpi_last_reason is not loaded")
print(f"rank {rank}: thread level {MPI.Query_thread()} (MULTIPLE={MPI.THREAD_MULTIPLE})", flush=True)

for dtype in (np.float32, np.float64, np.int32, np.int64):
    for n in (0, 1, 7, 1031, 262147):
        send = pattern(n, rank, dtype)
        want = sum(pattern(n, r, dtype) for r in range(size)).astype(dtype)
        recv = np.empty_like(send)
        comm.Allreduce(send, recv, MPI.SUM)
        routed(f"Allreduce {dtype.__name__} n={n}")
        check(np.array_equal(recv, want), f"Allreduce {dtype.__name__} n={n}")
        comm.Allreduce(MPI.IN_PLACE, send, MPI.MAX)
        routed(f"Allreduce in place {dtype.__name__} n={n}")
        check(np.array_equal(send, np.max([pattern(n, r, dtype) for r in range(size)], axis=0) if n else send),
              f"Allreduce MAX in place {dtype.__name__} n={n}")

buf = pattern(4099, rank, np.float64) if rank == size - 1 else np.zeros(4099)
comm.Bcast(buf, root=size - 1)
routed("Bcast")
check(np.array_equal(buf, pattern(4099, size - 1, np.float64)), "Bcast")

mine = pattern(1000, rank, np.float32)
everyone = np.empty(1000 * size, dtype=np.float32)
comm.Allgather(mine, everyone)
routed("Allgather")
check(np.array_equal(everyone, np.concatenate([pattern(1000, r, np.float32) for r in range(size)])), "Allgather")

counts = [10 + r for r in range(size)]
displs = [sum(counts[:r]) for r in range(size)]
gathered = np.empty(sum(counts), dtype=np.int32)
comm.Allgatherv(pattern(counts[rank], rank, np.int32), [gathered, counts, displs, MPI.INT])
routed("Allgatherv")
check(np.array_equal(gathered, np.concatenate([pattern(counts[r], r, np.int32) for r in range(size)])),
      "Allgatherv")

full = pattern(513 * size, rank, np.float64)
block = np.empty(513)
comm.Reduce_scatter_block(full, block, MPI.SUM)
routed("Reduce_scatter_block")
total = sum(pattern(513 * size, r, np.float64) for r in range(size))
check(np.array_equal(block, total[513 * rank:513 * (rank + 1)]), "Reduce_scatter_block")
comm.Reduce_scatter(full, block, [513] * size, MPI.SUM)
routed("Reduce_scatter")
check(np.array_equal(block, total[513 * rank:513 * (rank + 1)]), "Reduce_scatter")

comm.Barrier()
routed("Barrier")

# Nonblocking: real requests, completed by Wait, Test loops and Waitall.
nonblocking = ROUTED if MPI.Query_thread() == MPI.THREAD_MULTIPLE else 8
sends = [pattern(n, rank, np.float32, seed) for seed, n in enumerate((3, 4099, 262147))]
recvs = [np.empty_like(s) for s in sends]
reqs = []
for s, r in zip(sends, recvs):
    reqs.append(comm.Iallreduce(s, r, MPI.SUM))
    routed("Iallreduce", nonblocking)
reqs[0].Wait()
while not reqs[1].Test():
    pass
MPI.Request.Waitall(reqs[2:])
for seed, (s, r) in enumerate(zip(sends, recvs)):
    want = sum(pattern(len(s), q, np.float32, seed) for q in range(size)).astype(np.float32)
    check(np.array_equal(r, want), f"Iallreduce {len(s)}")

# A user op stays with MPI, and the result is still right.
add = MPI.Op.Create(lambda a, b, t: np.add(np.frombuffer(a, np.float64), np.frombuffer(b, np.float64),
                                           out=np.frombuffer(b, np.float64)), commute=True)
x = pattern(100, rank, np.float64)
y = np.empty_like(x)
comm.Allreduce(x, y, add)
routed("Allreduce user op", OP)
check(np.array_equal(y, sum(pattern(100, r, np.float64) for r in range(size))), "Allreduce user op")
add.Free()

# Pickle-based collectives (Python objects) and sub-communicators.
check(comm.allreduce(rank + 1) == size * (size + 1) // 2, "allreduce(object)")
check(comm.bcast({"k": rank}, root=0) == {"k": 0}, "bcast(object)")
check(comm.allgather(rank) == list(range(size)), "allgather(object)")
sub = comm.Split(rank % 2, rank)
v = np.full(5, float(rank))
w = np.empty_like(v)
sub.Allreduce(v, w, MPI.SUM)
members = [r for r in range(size) if r % 2 == rank % 2]
check(np.array_equal(w, np.full(5, float(sum(members)))), "Allreduce on a split")
dup = comm.Dup()
r = dup.Iallreduce(v, w, MPI.SUM)
# Its first call is nonblocking: set up in the background (reserved by Dup), routed at once.
routed("Iallreduce on a fresh dup", ROUTED)
r.Wait()
check(np.array_equal(w, np.full(5, float(sum(range(size))))), "Iallreduce on a fresh dup")
dup.Free()
sub.Free()

bad = comm.allreduce(len(failures))
done = comm.allreduce(checks)
if rank == 0:
    print(f"test_mpi4py: {size} ranks, {done} checks, {bad} failures{' (preloaded)' if expect_preload else ''}")
sys.exit(1 if bad else 0)
