"""dist.init_process_group("boostcomm") as the default group: unchanged DDP
code trains, and the averaged gradient of one step equals a float64
reference computed locally from every rank's data."""

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import boostcomm.torch as bct


def test_init_default_boostcomm_and_ddp():
    torch.set_num_threads(1)
    bct.init_process_group("boostcomm")
    assert dist.get_backend() == "boostcomm"
    rank, size = dist.get_rank(), dist.get_world_size()

    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    assert torch.all(t == size * (size + 1) / 2)

    torch.manual_seed(0)
    model = torch.nn.Linear(20, 3).double()
    ddp = DDP(model)  # constructor: parameter verification (allgather) + broadcast of rank 0's state

    def batch(r):
        g = torch.Generator().manual_seed(r)
        return torch.randn(8, 20, generator=g, dtype=torch.float64)

    ddp(batch(rank)).sum().backward()
    # The reference gradient: mean over ranks of each rank's local gradient.
    ref = torch.zeros_like(model.weight)
    for r in range(size):
        local = torch.nn.Linear(20, 3).double()
        local.load_state_dict(model.state_dict())
        local(batch(r)).sum().backward()
        ref += local.weight.grad / size
    np.testing.assert_allclose(model.weight.grad.numpy(), ref.numpy(), rtol=1e-12)
    dist.destroy_process_group()
