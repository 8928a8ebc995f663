"""DistributedOptimizer: the plain training loop, with gradients averaged
across ranks and overlapped with backward, without DDP.

    optimizer = boostcomm.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model)
    for x, y in data:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()   # buckets are reduced while backward goes on
        optimizer.step()                   # waits for the last buckets, then steps

How: every parameter's gradient tensor is allocated once (zeros) and handed
to an OverlapEngine in segment-list mode, so each bucket is reduced in place
on the gradients themselves: no flat bucket, no pack or unpack copy (with
bucket_view=True the gradients live in the engine's bucket memory instead).
A post-accumulate-grad hook on each parameter (grad_sync.GradientSync, shared
with configure_overlap's plain-loop sync) marks the gradient ready once
backward has finished with it;
the engine launches a bucket's allreduce as soon as all its gradients are
ready. `step()` marks the rest (parameters that got no gradient this step keep
theirs, zero after zero_grad, and are averaged like the others, as DDP's
find_unused_parameters does), waits, then runs the wrapped optimizer.

The gradient memory must stay where the engine saw it, so `zero_grad()`
zeroes in place (set_to_none is ignored for the parameters it manages) and
a `.grad` that something replaced is copied back into its place at the next
hook. The returned object is an instance of the wrapped optimizer's class
(learning-rate schedulers accept it) sharing its state: param_groups, state,
state_dict() and load_state_dict() are the wrapped optimizer's own.

Lifetime: with bucket_view=True the gradients live in memory the
ranks registered together, and it is released (a collective call) when the
optimizer and the parameters' gradients are gone: drop them at the same
point on every rank, as any communicator object (the optimizer holds no
reference cycle, so that point is where the program drops it).
"""

import contextlib

import torch

from . import InvalidArgumentError
from .grad_sync import GradientSync


class _Distributed:
    """Mixed in front of the wrapped optimizer's class (see DistributedOptimizer)."""

    def _bc_setup(self, named, bucket_bytes, first_bucket_bytes, average, backward_passes_per_step, timeout,
                  bucket_view):
        self._bc = GradientSync(named, None, average=average, bucket_bytes=bucket_bytes,
                                first_bucket_bytes=first_bucket_bytes, timeout=timeout, bucket_view=bucket_view,
                                backward_passes_per_step=backward_passes_per_step, finish="step")
        self._bc_managed = set(id(p) for _, p in named)

    def synchronize(self):
        """Waits until every gradient is averaged across ranks (step() calls it)."""
        self._bc.synchronize()

    def step(self, closure=None):
        if self._bc.enabled:
            self.synchronize()
        return super().step(closure)

    def zero_grad(self, set_to_none=False):  # noqa: ARG002 - in place: the engine holds this memory
        self._bc.zero_grad()
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) not in self._bc_managed and p.grad is not None:
                    p.grad = None if set_to_none else p.grad.detach().zero_()

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally (no communication, step() does not
        average); the first backward after the block averages the sum."""
        self._bc.enabled = False
        try:
            yield
        finally:
            self._bc.enabled = True

    def overlap_stats(self):
        """The engine's step statistics (docs/OVERLAP.md); also what
        boostcomm.get_overlap_stats() reports without a process group."""
        return self._bc.stats()


def DistributedOptimizer(optimizer, model=None, named_parameters=None, bucket_bytes=0, first_bucket_bytes=0,
                         average=True, backward_passes_per_step=1, timeout=None, bucket_view=False):
    """Wraps `optimizer` so that step() applies gradients averaged (average=
    False: summed) over every rank of the default communicator.

    Parameters come from `model.named_parameters()`, or `named_parameters`
    [(name, tensor)], else from the optimizer's param groups (named param.K);
    those that require grad, in that (forward) order, which sets the buckets
    (backward order, as DDP). Collective: every rank constructs it with the
    same parameters. bucket_bytes / first_bucket_bytes as OverlapEngine.
    backward_passes_per_step: backward passes accumulated locally before a
    step averages them. bucket_view=True allocates the gradients in the
    engine's bucket memory (shared memory between the ranks of a node), which
    its collectives then read and write in place: faster on one host, but
    that memory is released by a collective call when the optimizer and the
    gradients are gone, so the program must drop them at the same point on
    every rank (see Lifetime above). The default keeps ordinary gradient
    tensors, reduced in place as segment lists: nothing collective happens
    when they are freed."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgumentError(f"DistributedOptimizer: optimizer must be a torch.optim.Optimizer, got "
                                   f"{type(optimizer).__name__}")
    if model is not None and named_parameters is not None:
        raise InvalidArgumentError("DistributedOptimizer: pass model or named_parameters, not both")
    if model is not None:
        named = list(model.named_parameters())
    elif named_parameters is not None:
        named = list(named_parameters)
    else:
        named = [(f"param.{k}", p) for k, p in
                 enumerate(p for g in optimizer.param_groups for p in g["params"])]
    named = [(n, p) for n, p in named if p.requires_grad]
    in_optimizer = set(id(p) for g in optimizer.param_groups for p in g["params"])
    for n, p in named:
        if id(p) not in in_optimizer:
            raise InvalidArgumentError(f"DistributedOptimizer: parameter '{n}' is not in the optimizer's "
                                       "param_groups")
    cls = type("Distributed" + type(optimizer).__name__, (_Distributed, type(optimizer)), {})
    wrapped = cls.__new__(cls)
    wrapped.__dict__ = optimizer.__dict__  # one state: param_groups, state, defaults
    wrapped._bc_setup(named, bucket_bytes, first_bucket_bytes, average, backward_passes_per_step, timeout,
                      bool(bucket_view))
    return wrapped
