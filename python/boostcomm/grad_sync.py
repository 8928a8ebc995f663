"""Gradients averaged across ranks as backward produces them: GradientSync,
and the plain training loop's gradient sync that configure_overlap switches on.

GradientSync hands every parameter's gradient tensor to an OverlapEngine and
marks it ready from the parameter's post-accumulate-grad hook (torch 2.x:
Tensor.register_post_accumulate_grad_hook, which runs once the gradient is
in `.grad`); the engine launches a bucket's allreduce as soon as the bucket is
complete, while backward goes on, and bucket k always after bucket k-1, so
every rank issues the same collectives in the same order. Two ways to wait:
  finish="step"      the owner calls synchronize() before using the gradients
                     (DistributedOptimizer.step);
  finish="backward"  the end of every backward pass waits (autograd's final
                     callback, as DDP's reducer does), so k backward passes
                     before a step average each pass, as DDP without no_sync.
The engine needs the gradients where it first saw them: a `.grad` that
something replaced (zero_grad(set_to_none=True), torch 2.x's default, then
the next backward allocates a new one) is copied back into place in its hook
(one copy per step, as DDP's default copy into its buckets).

The plain loop (configure_overlap(enable=True, overlap_stages=["backward",
"allreduce"]), or sync_gradients=True): a global optimizer step pre-hook
(torch.optim.optimizer.register_optimizer_step_pre_hook) finds each
optimizer at its first step() and, collectively:
  1. checks that its parameters are identical on every rank (one 8-byte
     digest per parameter, gathered): gradients averaged from different
     starting points are not DDP's. Different ones raise on every rank,
     naming the parameter (broadcast_parameters() makes them equal);
  2. gives it a communicator of its own (its engine launches from the
     progress thread: sharing one with other collectives would order them
     differently on different ranks) and a GradientSync(finish="backward");
  3. averages that first step's gradients at once (backward ran before the
     hooks existed); from the next backward on, they are averaged during it.
Exact: each step applies the average of every rank's gradient, bucket by
bucket, with the same reduction as DDP (2 ranks: bitwise equal). Parameters
that got no gradient in a backward pass are averaged as they are (zero when
None), as DistributedOptimizer. Buffers (BatchNorm statistics) are not
touched (DDP's broadcast_buffers=False). Optimizers whose parameters belong
to a DistributedDataParallel model are left to DDP; a DistributedOptimizer
syncs itself.
"""

import gc
import hashlib
import warnings
import weakref

import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from . import InvalidArgumentError, MismatchError, _agree, _default, _state
from .overlap import OverlapEngine


class GradientSync:
    """Averages (average=False: sums) the gradients of `named` [(name, param)]
    across the ranks of `comm` (native; default: comm_init's) while backward
    runs. Collective: every rank passes the same parameters."""

    def __init__(self, named, comm=None, average=True, bucket_bytes=0, first_bucket_bytes=0, timeout=None,
                 bucket_view=False, backward_passes_per_step=1, finish="step", owner="DistributedOptimizer"):
        if finish not in ("step", "backward"):
            raise InvalidArgumentError(f"{owner}: finish must be 'step' or 'backward', got {finish!r}")
        if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise InvalidArgumentError(f"{owner}: backward_passes_per_step must be an int >= 1, got "
                                       f"{backward_passes_per_step!r}")
        self.owner = owner
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        for name, p in named:
            if p.layout != torch.strided or p.device.type != "cpu":
                raise InvalidArgumentError(f"{owner}: parameter '{name}' must be a dense CPU tensor "
                                           f"(layout {p.layout}, device {p.device})")
            if p.grad is None:
                p.grad = torch.zeros_like(p, memory_format=torch.contiguous_format)
            elif not p.grad.is_contiguous():
                p.grad = p.grad.contiguous()
        self.engine = OverlapEngine([(n, p.grad) for n, p in named], bucket_bytes=bucket_bytes,
                                    first_bucket_bytes=first_bucket_bytes, average=average, timeout=timeout,
                                    bucket_view=bucket_view, comm=comm)
        if bucket_view:  # the gradients now live in the engine's (shared-memory) buckets
            for i, p in enumerate(self.params):
                p.grad = self.engine.tensor_view(i)
        self.grads = [p.grad for p in self.params]
        self._finish = finish
        self._passes = backward_passes_per_step
        self._seen = [0] * len(self.params)   # backward passes since the last synchronize
        self._marked = [False] * len(self.params)
        self._active = False                  # engine step begun (begin_backward called)
        self._pending = False                 # synchronize() must run even with nothing seen
        self.enabled = True                   # False: gradients accumulate locally (no_sync)
        self._handles = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(self.params)]

    def _hook(self, i):
        # A weak reference: the hook must not keep the engine alive in a
        # reference cycle, or the garbage collector (not the program) would
        # decide when its buckets are freed, a collective call.
        ref = weakref.ref(self)

        def hook(_param):
            self = ref()
            if self is not None:
                self._ready(i)
        return hook

    def _ready(self, i):
        self.reclaim(i)
        if not self.enabled:
            return
        self._seen[i] += 1
        if self._seen[i] < self._passes:
            return
        if self._marked[i]:
            if self._finish == "backward":
                since = "the gradients were last averaged (a backward pass ended without its final callback: " \
                        "did it raise mid-way?)"
            else:
                since = (f"the last step() (backward_passes_per_step={self._passes}); call step() after each "
                         "backward, raise backward_passes_per_step, or accumulate inside no_sync()")
            raise InvalidArgumentError(f"{self.owner}: the gradient of '{self.names[i]}' was produced "
                                       f"{self._seen[i]} times since {since}")
        if not self._active:
            self.engine.begin_backward()
            self._active = True
            if self._finish == "backward":
                torch.autograd.Variable._execution_engine.queue_callback(self.synchronize)
        self._marked[i] = True
        self.engine.mark_ready(i)

    def reclaim(self, i):
        """Puts gradient i back into the engine's memory when something
        replaced `.grad` (set it to None, or assigned a new tensor)."""
        p, grad = self.params[i], self.grads[i]
        if p.grad is grad:
            return
        if p.grad is None:
            grad.zero_()
        else:
            grad.copy_(p.grad)
        p.grad = grad

    def synchronize(self, force=False):
        """Waits until every gradient is averaged across ranks. Gradients not
        produced since the last time are averaged as they are (zero if None).
        force: even when no backward ran since (the first step of the plain loop)."""
        if not (force or self._pending or self._active or any(self._seen)):
            return  # no backward since the last step: nothing to average
        self._pending = False
        if not self._active:
            self.engine.begin_backward()
            self._active = True
        for i, marked in enumerate(self._marked):
            if not marked:
                self.reclaim(i)
                self.engine.mark_ready(i)
        try:
            self.engine.finish_backward()
        finally:
            self._active = False
            self._marked = [False] * len(self.params)
            self._seen = [0] * len(self.params)

    def zero_grad(self):
        for grad in self.grads:
            grad.zero_()

    def stats(self):
        return self.engine.stats()

    def remove(self):
        """Removes the hooks (the engine goes with the last reference)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []


# ---------------------------------------------------------------- identical parameters

def _digest(tensor):
    """8 bytes identifying a tensor's bytes (equal tensors, equal digests)."""
    data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
    return np.frombuffer(hashlib.blake2b(data, digest_size=8).digest(), np.int64)[0]


def _name_of(param, fallback):
    """The parameter's name in the largest module holding it (the model, usually;
    a scan of the garbage collector's objects: only on the error path)."""
    best = None
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.nn.Module):
            for name, p in obj.named_parameters():
                if p is param:
                    size = sum(1 for _ in obj.parameters())
                    if best is None or size > best[0]:
                        best = (size, f"{type(obj).__name__}.{name}")
                    break
    return best[1] if best else fallback


def _check_identical(comm, named, what):
    """Raise on every rank unless every rank holds the same parameters
    (count, shapes, dtypes, values): one gather of two numbers, then one of a
    digest per parameter."""
    layout = hashlib.blake2b(repr([(tuple(p.shape), str(p.dtype)) for _, p in named]).encode(), digest_size=8)
    mine = np.array([len(named), np.frombuffer(layout.digest(), np.int64)[0]], np.int64)
    everyone = np.empty((comm.size, 2), np.int64)
    comm.all_gather(mine, everyone, None, False)
    differ = [r for r in range(comm.size) if not np.array_equal(everyone[r], everyone[0])]
    if differ:
        raise MismatchError(f"[boostcomm rank {comm.rank}] {what}: the optimizer's parameters differ in number, "
                            f"shape or dtype between rank 0 and rank(s) {differ} (rank {comm.rank} has "
                            f"{len(named)}); every rank must train the same model")
    mine = np.array([_digest(p) for _, p in named] or [0], np.int64)
    everyone = np.empty((comm.size, mine.size), np.int64)
    comm.all_gather(mine, everyone, None, False)
    for i, (name, p) in enumerate(named):
        differ = [r for r in range(comm.size) if everyone[r, i] != everyone[0, i]]
        if differ:
            raise MismatchError(
                f"[boostcomm rank {comm.rank}] {what}: parameter '{_name_of(p, name)}' (shape "
                f"{tuple(p.shape)}) differs between rank 0 and rank(s) {differ}: averaged gradients keep "
                "the ranks together only from identical parameters. Seed the initialisation identically "
                "(torch.manual_seed before building the model) or call boostcomm.broadcast_parameters(model) "
                "before the first step")


def broadcast_parameters(module_or_tensors, root=0):
    """Every rank's parameters (and buffers, for a module) = root's, in place
    (collective; as DDP does at construction). Takes an nn.Module or tensors."""
    from . import broadcast
    if isinstance(module_or_tensors, torch.nn.Module):
        tensors = list(module_or_tensors.parameters()) + list(module_or_tensors.buffers())
    else:
        tensors = list(module_or_tensors)
    with torch.no_grad():
        for t in tensors:
            if t.is_contiguous():
                broadcast(t.data, root)
            else:
                copy = t.detach().contiguous()
                broadcast(copy, root)
                t.copy_(copy)
    return module_or_tensors


# ---------------------------------------------------------------- the plain loop

def _ddp_models():
    ddp = torch.nn.parallel.DistributedDataParallel
    # type(), not isinstance(): the latter reads __class__, which some objects
    # (torch.distributed.reduce_op) answer with a deprecation warning.
    return [obj for obj in gc.get_objects() if issubclass(type(obj), ddp)]


class _PlainLoop:
    """configure_overlap's gradient sync for plain optimizers (see the top)."""

    def __init__(self):
        self._handle = None
        self._entries = []  # [weakref(optimizer), GradientSync or None (left to DDP)]

    def enable(self):
        if self._handle is None:
            self._handle = register_optimizer_step_pre_hook(self._before_step)

    def disable(self):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        for _, sync in self._entries:
            if sync is not None:
                sync.remove()
        self._entries = []

    def _before_step(self, optimizer, _args, _kwargs):
        from .optimizer import _Distributed
        if isinstance(optimizer, _Distributed):
            return  # a DistributedOptimizer averages its gradients itself
        for ref, sync in self._entries:
            if ref() is optimizer:
                if sync is not None:
                    self._check_unchanged(optimizer, sync)
                    sync.synchronize()
                return
        self._start(optimizer)

    @staticmethod
    def _params(optimizer):
        seen, out = set(), []
        for g, group in enumerate(optimizer.param_groups):
            for k, p in enumerate(group["params"]):
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    out.append((f"param_groups[{g}][{k}]", p))
        return out

    def _check_unchanged(self, optimizer, sync):
        now = [p for _, p in self._params(optimizer)]
        if len(now) != len(sync.params) or any(a is not b for a, b in zip(now, sync.params)):
            raise InvalidArgumentError(
                f"[boostcomm rank {_default().rank}] {type(optimizer).__name__}.step: the optimizer's parameters "
                "changed after its first step (add_param_group?); the gradient sync of configure_overlap "
                "covers the parameters it found then. Call configure_overlap(sync_gradients=False) and again "
                "with True, or add the groups before the first step")

    def _start(self, optimizer):
        comm = _default()
        what = f"{type(optimizer).__name__}.step (configure_overlap's gradient sync)"
        # Drop the syncs of optimizers that are gone: here, at the same step on every rank.
        for entry in [e for e in self._entries if e[0]() is None]:
            if entry[1] is not None:
                entry[1].remove()
            self._entries.remove(entry)
        named = self._params(optimizer)
        ids = set(id(p) for _, p in named)
        error = None
        for _, sync in self._entries:
            if sync is not None and any(id(p) in ids for p in sync.params):
                error = InvalidArgumentError(f"[boostcomm rank {comm.rank}] {what}: the optimizer shares "
                                             "parameters with another optimizer whose gradients are synchronised")
        for name, p in named:
            if error is None and (p.layout != torch.strided or p.device.type != "cpu"):
                error = InvalidArgumentError(f"[boostcomm rank {comm.rank}] {what}: parameter {name} must be a "
                                             f"dense CPU tensor (layout {p.layout}, device {p.device})")
        _agree(error)
        owned = set(id(p) for model in _ddp_models() for p in model.parameters())
        if named and all(id(p) in owned for _, p in named):
            warnings.warn(f"boostcomm: {what}: its parameters belong to a DistributedDataParallel model, which "
                          "averages their gradients; the plain loop's sync leaves them to it", stacklevel=3)
            self._entries.append([weakref.ref(optimizer), None])
            return
        native = _state.new_communicator("grad_sync")
        _check_identical(native, named, what)
        sync = GradientSync(named, native, average=True, finish="backward", owner=what)
        self._entries.append([weakref.ref(optimizer), sync])
        sync.synchronize(force=True)  # this step's backward ran before the hooks existed


_plain_loop = _PlainLoop()


def auto_sync(on):
    """configure_overlap's switch (collective only at the next steps)."""
    if on:
        _plain_loop.enable()
    else:
        _plain_loop.disable()
