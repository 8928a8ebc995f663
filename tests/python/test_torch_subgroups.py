"""Subgroups of the boostcomm c10d backend under mpirun -np 2: the default group
on boostcomm, a group of both ranks and one-rank groups alive at once, used
interleaved. With BOOSTCOMM_TORCH_TRANSPORT unset (auto) the whole-world groups
run on MPI and the one-rank groups on the store transport (they are not an MPI
world); ctest python.torch_store_under_mpirun runs the same file with
BOOSTCOMM_TORCH_TRANSPORT=store (every group on the store transport)."""

import torch
import torch.distributed as dist

import boostcomm.torch as bct


def test_groups_alive_at_once():
    torch.set_num_threads(1)
    if not dist.is_initialized():
        bct.init_process_group("boostcomm")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert size == 2 and dist.get_backend() == "boostcomm"
    both = dist.new_group([0, 1], backend="boostcomm")
    only1 = dist.new_group([1], backend="boostcomm")
    only0 = dist.new_group([0], backend="boostcomm")
    mine = only0 if rank == 0 else only1
    other = only1 if rank == 0 else only0
    assert other == dist.GroupMember.NON_GROUP_MEMBER
    for step in range(3):
        t = torch.arange(6, dtype=torch.float64) + rank + step
        dist.all_reduce(t, group=both)
        assert torch.equal(t, 2 * torch.arange(6, dtype=torch.float64) + 1 + 2 * step)
        s = torch.full((4,), float(rank * 10 + step))
        dist.all_reduce(s, group=mine)
        assert torch.all(s == rank * 10 + step)
        w = torch.full((3,), float(rank + 1))
        dist.all_reduce(w)
        assert torch.all(w == 3)
        b = torch.full((5,), float(rank))
        dist.broadcast(b, src=1, group=both)
        assert torch.all(b == 1)
    dist.barrier()
    dist.destroy_process_group()
