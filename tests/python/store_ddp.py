"""DDP under torchrun on the boostcomm backend (store transport): a small model
trained a few steps with DDP on boostcomm and, from the same start, with DDP on
a gloo group of the same processes; both must end with the same parameters
(to float32 rounding), and boostcomm's bitwise identical on every rank.
Started by test_torch_store.py::test_ddp_under_torchrun, or by hand:
    python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1 store_ddp.py
"""

import copy
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm.torch  # noqa: F401  (registers the backend)


def main():
    torch.set_num_threads(1)
    dist.init_process_group("boostcomm")  # env:// from torchrun
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 4))
    ref = copy.deepcopy(net)
    ddp_bc = DDP(net, bucket_cap_mb=0.01)  # several buckets
    ddp_gloo = DDP(ref, process_group=gloo, bucket_cap_mb=0.01)
    opt_bc = torch.optim.SGD(ddp_bc.parameters(), lr=0.05)
    opt_gloo = torch.optim.SGD(ddp_gloo.parameters(), lr=0.05)
    for step in range(5):
        g = torch.Generator().manual_seed(100 * step + rank)
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 4, generator=g)
        for model, opt in ((ddp_bc, opt_bc), (ddp_gloo, opt_gloo)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    ok = True
    for (name, a), b in zip(net.named_parameters(), ref.parameters()):
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
            print(f"rank {rank}: {name} differs from gloo by {float((a - b).abs().max())}", flush=True)
            ok = False
        gathered = [torch.empty_like(a) for _ in range(size)]
        dist.all_gather(gathered, a.detach(), group=gloo)
        if not all(torch.equal(t, a) for t in gathered):
            print(f"rank {rank}: {name} differs between ranks", flush=True)
            ok = False
    dist.barrier(group=gloo)
    print(f"rank {rank}: {'ok' if ok else 'FAILED'}", flush=True)
    sys.stderr.flush()
    # Not sys.exit: at interpreter exit torch 1.13's ProcessGroupGloo destructor
    # (reached from the gloo DDP's Reducer) joins its worker threads while this
    # thread holds the GIL, and a worker freeing its last tensor waits for the
    # GIL: seen hanging here one time in a few at 3 ranks (gdb: main thread in
    # ~ProcessGroupGloo -> thread::join, worker in PyEval_AcquireThread).
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
