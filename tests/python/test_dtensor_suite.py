"""DTensor on the boostcomm backend, through torch's own DTensorTestBase
(torch/testing/_internal/distributed/_tensor/common_dtensor.py in the 2.13
wheel): each test spawns a world of 4 processes that init_process_group over
file:// (boostcomm: its store transport), builds DeviceMeshes and checks
DTensor results against the same computation on full tensors. One set of
tests, run twice: on boostcomm (BoostcommDTensorTest) and on gloo
(GlooDTensorTest), the peer; both must pass everything (docs/PYTHON.md
names the set and the counts).

The op tests use the base's _test_op: DTensorConverter tries every
combination of Shard/Replicate placements of the operands, and each result's
full_tensor() must equal the op on full tensors. Uneven shapes (7 x 10 over 4
ranks) make the shards differ in size."""

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed._tensor.common_dtensor import DTensorTestBase, with_comms

import boostcomm.torch  # noqa: F401  (registers the "boostcomm" backend)


class _DTensorSuite(DTensorTestBase):
    BACKEND = "gloo"

    @property
    def world_size(self):
        return 4

    @property
    def backend(self):
        return self.BACKEND

    def setUp(self):
        # DTensorTestBase.setUp spawns (a fresh interpreter imports torch per
        # rank and test); fork is safe on the CPU and saves those seconds.
        super(DTensorTestBase, self).setUp()
        self._start_processes(torch.multiprocessing.get_context("fork").Process)

    def init_pg(self, eager_init, backend=None):
        # The base accepts torch's own backends only; the rest of its set-up is ours to repeat.
        dist.init_process_group(backend=self.BACKEND, world_size=self.world_size, rank=self.rank,
                                init_method=f"file://{self.file_name}")

    @with_comms
    def test_redistribute_1d(self):
        self.assertEqual(dist.get_backend(), self.BACKEND)
        mesh = init_device_mesh("cpu", (self.world_size,))
        torch.manual_seed(0)  # the same full tensor on every rank
        for shape in ((8, 12), (7, 10)):
            full = torch.randn(*shape)
            sources = [[Shard(0)], [Shard(1)], [Replicate()]]
            targets = sources
            for src in sources:
                for dst in targets:
                    d = distribute_tensor(full, mesh, src).redistribute(mesh, dst)
                    self.assertEqual(d.placements, tuple(dst))
                    self.assertEqual(d.full_tensor(), full)
            # Partial: each rank's local tensor is a summand (sum) or a sample (avg).
            local = full * (self.rank + 1)
            for reduce_op, want in (("sum", full * 10), ("avg", full * 2.5)):
                p = DTensor.from_local(local, mesh, [Partial(reduce_op)], run_check=False)
                for dst in ([Replicate()], [Shard(0)], [Shard(1)]):
                    self.assertEqual(p.redistribute(mesh, dst).full_tensor(), want, atol=1e-5, rtol=1e-5)

    @with_comms
    def test_redistribute_2d(self):
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        full = torch.randn(7, 10)
        layouts = [[Shard(0), Shard(1)], [Shard(1), Shard(0)], [Replicate(), Shard(0)], [Shard(0), Replicate()],
                   [Replicate(), Replicate()], [Shard(0), Shard(0)]]
        for src in layouts:
            for dst in layouts:
                d = distribute_tensor(full, mesh, src).redistribute(mesh, dst)
                self.assertEqual(d.full_tensor(), full)
        local = torch.full((4, 6), float(self.rank))
        p = DTensor.from_local(local, mesh, [Partial(), Shard(0)], run_check=False)
        # Ranks (dp, tp): (0,0)=0 (0,1)=1 (1,0)=2 (1,1)=3; summed over dp, stacked over tp.
        want = torch.cat([torch.full((4, 6), 2.0), torch.full((4, 6), 4.0)])
        self.assertEqual(p.redistribute(mesh, [Replicate(), Replicate()]).full_tensor(), want)

    @with_comms
    def test_pointwise_and_reduction_ops(self):
        mesh = init_device_mesh("cpu", (self.world_size,))
        torch.manual_seed(0)
        a, b = torch.randn(8, 6, requires_grad=False), torch.randn(8, 6)
        self._test_op(mesh, torch.add, a, b)
        self._test_op(mesh, torch.mul, a, b)
        self._test_op(mesh, torch.sum, a)
        self._test_op(mesh, lambda x: torch.sum(x, dim=1), a)
        self._test_op(mesh, lambda x: torch.mean(x, dim=0), a)
        self._test_op(mesh, lambda x: torch.amax(x, dim=1), a)
        self._test_op(mesh, lambda x: torch.softmax(x, dim=-1), a)
        self._test_op(mesh, lambda x: x.norm(), a)

    @with_comms
    def test_matmul_every_sharding(self):
        mesh = init_device_mesh("cpu", (self.world_size,))
        torch.manual_seed(0)
        x, w = torch.randn(8, 12), torch.randn(12, 16)
        self._test_op(mesh, torch.mm, x, w)
        self._test_op(mesh, lambda p, q: (p @ q).relu(), x, w)
        bias = torch.randn(16)
        self._test_op(mesh, F.linear, x, w.t().contiguous(), bias)

    @with_comms
    def test_tensor_parallel_mlp_forward_backward(self):
        mesh = init_device_mesh("cpu", (self.world_size,))
        torch.manual_seed(0)
        ref = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 6))
        tp = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 6))
        tp.load_state_dict(ref.state_dict())
        parallelize_module(tp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        x = torch.randn(5, 10)  # the same input on every rank (the seed above)
        y_ref, y_tp = ref(x), tp(x)
        self.assertEqual(y_tp, y_ref, atol=1e-5, rtol=1e-5)
        y_ref.square().sum().backward()
        y_tp.square().sum().backward()
        for (name, p_ref), p_tp in zip(ref.named_parameters(), tp.parameters()):
            got = p_tp.grad.full_tensor() if isinstance(p_tp.grad, DTensor) else p_tp.grad
            self.assertEqual(got, p_ref.grad, atol=1e-5, rtol=1e-5, msg=name)

    @with_comms
    def test_sharded_backward_and_optimizer_step(self):
        mesh = init_device_mesh("cpu", (self.world_size,))
        torch.manual_seed(0)
        w_full = torch.randn(9, 5)
        x = torch.randn(3, 9)
        w_ref = w_full.clone().requires_grad_()
        w = nn.Parameter(distribute_tensor(w_full, mesh, [Shard(0)]))
        for param, inp in ((w_ref, x), (w, distribute_tensor(x, mesh, [Replicate()]))):
            opt = torch.optim.SGD([param], lr=0.1)
            (inp @ param).tanh().sum().backward()
            opt.step()
        self.assertEqual(w.full_tensor(), w_ref.detach(), atol=1e-6, rtol=1e-6)


class BoostcommDTensorTest(_DTensorSuite):
    BACKEND = "boostcomm"


class GlooDTensorTest(_DTensorSuite):
    BACKEND = "gloo"


del _DTensorSuite  # only the two backends' classes are collected

if __name__ == "__main__":
    run_tests()
