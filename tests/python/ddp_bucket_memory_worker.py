"""One rank of a store-rendezvous job (test_torch_bucket_memory.py): DDP's
gradient buckets on the boostcomm backend, one host.

  - by default (DDP_DISABLE_COMM_MEM unset) every bucket, and so every
    gradient (gradient_as_bucket_view=True), lies in a POSIX shared-memory
    mapping: the backend's allocateTensor served DDP;
  - with the user's DDP_DISABLE_COMM_MEM=1 (argument "opt-out") none does;
  - where no segment can be made (argument "no-room": a file-size limit, as a
    small /dev/shm would refuse it) none does either, and DDP runs (the
    backend's one warning is checked by the caller);
  - either way, after a few steps with several buckets the gradients equal the
    float64 mean of every rank's own float32 gradients and are bitwise the same
    on every rank, and the buckets rebuilt after the first step are served too;
  - the gradients stay readable, unchanged, after destroy_process_group.
Prints "rank R: ok" at the end, or exits non-zero at the first failure."""

import datetime
import os
import resource
import signal
import sys

import torch
import torch.distributed as dist

import boostcomm.torch  # noqa: F401  (registers the backend)


def check(cond, what):
    if not cond:
        print(f"rank {os.environ['RANK']}: FAILED: {what}", flush=True)
        os._exit(1)


def shm_ranges():
    """Address ranges of this process's mappings of POSIX shared-memory objects."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5].startswith("/dev/shm/"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((lo, hi))
    return ranges


def in_shared_memory(t, ranges):
    start = t.data_ptr()
    end = start + t.numel() * t.element_size()
    return any(lo <= start and end <= hi for lo, hi in ranges)


def model():
    torch.manual_seed(0)
    # ~1.1 M parameters over several layers: with bucket_cap_mb=1 several buckets.
    return torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                               torch.nn.Linear(1024, 511), torch.nn.ReLU(), torch.nn.Linear(511, 7))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(16, 64, generator=g), torch.randn(16, 7, generator=g)


def reference_grads(size, step):
    """The mean over ranks, in float64, of each rank's own float32 gradients (what
    each rank computes before DDP's allreduce): only the collective's rounding is
    left between it and DDP's result."""
    net = model()
    total = [torch.zeros_like(p, dtype=torch.float64) for p in net.parameters()]
    for r in range(size):
        net.zero_grad()
        x, y = batch(r, step)
        torch.nn.functional.mse_loss(net(x), y).backward()
        for acc, p in zip(total, net.parameters()):
            acc += p.grad.double()
    return [acc / size for acc in total]


def main():
    torch.set_num_threads(1)
    opt_out = "opt-out" in sys.argv[1:]
    if opt_out:
        os.environ["DDP_DISABLE_COMM_MEM"] = "1"
    dist.init_process_group("boostcomm", init_method=os.environ["BC_TEST_INIT"], rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]), timeout=datetime.timedelta(seconds=120))
    rank, size = dist.get_rank(), dist.get_world_size()
    check(os.environ.get("DDP_DISABLE_COMM_MEM") == ("1" if opt_out else "0"),
          f"DDP_DISABLE_COMM_MEM is {os.environ.get('DDP_DISABLE_COMM_MEM')!r}")
    no_room = "no-room" in sys.argv[1:]
    if no_room:
        # After the group's own segment: no file (a shared-memory object
        # included) may grow past 256 KiB, so the first bucket's segment
        # (~2.1 MB per rank) fails on every rank, and no later one is tried.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    # Where no segment can be made, DDP warns once (on stderr: the caller checks it).
    ddp = torch.nn.parallel.DistributedDataParallel(model(), bucket_cap_mb=1, gradient_as_bucket_view=True)
    expect_shared = not (opt_out or no_room)
    params = list(ddp.parameters())
    for step in range(3):  # buckets are rebuilt after the first step
        ddp.zero_grad(set_to_none=False)
        x, y = batch(rank, step)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        ranges = shm_ranges()
        served = [in_shared_memory(p.grad, ranges) for p in params]
        if not expect_shared:
            check(not any(served), f"step {step}: {sys.argv[1:]}, yet gradients lie in shared memory")
        else:
            check(all(served), f"step {step}: gradients outside shared memory: {served}")
        for i, (p, ref) in enumerate(zip(params, reference_grads(size, step))):
            check(torch.allclose(p.grad.double(), ref, rtol=1e-5, atol=1e-8),
                  f"step {step}: gradient {i} differs from the float64 mean")
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        gathered = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(gathered, flat)
        for r in range(size):
            check(torch.equal(gathered[r].view(torch.int32), flat.view(torch.int32)), f"step {step}: rank {r} differs")
    kept = [p.grad.clone() for p in params]
    dist.destroy_process_group()
    # The buckets outlive the group that allocated them.
    for i, (p, k) in enumerate(zip(params, kept)):
        check(torch.equal(p.grad, k), f"gradient {i} changed after destroy_process_group")
    print(f"rank {rank}: ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
