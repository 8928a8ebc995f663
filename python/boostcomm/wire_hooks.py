"""DDP comm hooks that send gradients as 16-bit floats but sum them in float32.

    import boostcomm, boostcomm.wire_hooks as wh
    state = wh.WireHookState(wire="bf16", error_feedback=True)   # collective
    ddp.register_comm_hook(state, wh.bf16_wire_hook)

Works with any DDP process group (gloo, boostcomm): the hook averages each
bucket with the boostcomm communicator of comm_init (the MPI world, so the
job is started by mpirun and DDP's group spans the same ranks).

How it differs from torch's `default_hooks.bf16_compress_hook`: torch casts
the whole bucket to bfloat16 and allreduces bfloat16 tensors, so every
partial sum of the reduction is rounded to 8 significand bits again (a
bf16 sum of bf16 sums). Here the bucket stays float32 in memory; only the
bytes on the link are 16-bit. Each hop decodes into float32 and adds in
float32, and only the partial sum sent on is rounded (docs/ALGORITHMS.md,
"Wire formats", for the error bound; docs/WIRE.md for the measured
comparison). All ranks end bitwise identical.

Error feedback (optional, per state): before the allreduce, this rank adds
the residual kept from its previous step to its bucket, rounds the sum
through the wire format (what the first hop would send), and keeps what the
rounding removed as the next residual: v = g + e; r = round(v); e = v - r.
Its own contribution is then only delayed, never lost. The rounding of
partial sums on later hops (other ranks' data mixed in) is not fed back. A
bucket whose call does not compress (see below) gets no feedback.

Where it compresses: the format applies where the allreduce runs ring, rhd
or hier (hier: its inter-node phase). `algorithm=None` keeps the selection,
which on one host usually picks an algorithm that moves float32 (shared
memory: compressing would not pay); `algorithm="ring"` forces the flat ring,
which compresses every hop. `state.wire_counts` counts how the buckets
actually travelled ('bf16', 'fp16' or 'off').
"""

import collections

import torch
import torch.distributed as dist

import boostcomm
from . import _boostcomm as _C

__all__ = ["WireHookState", "wire_hook", "bf16_wire_hook", "fp16_wire_hook"]

_FORMATS = ("bf16", "fp16", "off", "auto")


class WireHookState:
    """State of a wire hook (collective to create: the ranks check they agree).

    wire: "bf16", "fp16", "auto" (the cost model decides per bucket) or "off".
    error_feedback: carry each bucket's rounding residual into the next step.
    algorithm: None (the selection) or an allreduce algorithm name ("ring",
    "rhd", "hier"). comm: a boostcomm.Communicator (default: comm_init()).
    """

    def __init__(self, wire="bf16", error_feedback=True, algorithm=None, comm=None):
        comm = boostcomm.comm_init() if comm is None else comm
        native = getattr(comm, "_native", comm)
        error = None
        if wire not in _FORMATS:
            error = boostcomm.InvalidArgumentError(
                f"[boostcomm rank {native.rank}] WireHookState: wire must be one of {', '.join(_FORMATS)}, "
                f"got {wire!r}")
        elif not isinstance(error_feedback, bool):
            error = boostcomm.InvalidArgumentError(
                f"[boostcomm rank {native.rank}] WireHookState: error_feedback must be a bool, got {error_feedback!r}")
        elif dist.is_initialized() and dist.get_world_size() != native.size:
            error = boostcomm.InvalidArgumentError(
                f"[boostcomm rank {native.rank}] WireHookState: torch.distributed has {dist.get_world_size()} "
                f"ranks but the boostcomm communicator {native.size}: the hooks run on the MPI world "
                "(start the job with mpirun)")
        boostcomm._agree(error)
        # Every rank must run the same calls: compare the settings with rank 0's.
        mine = f"{wire}|{error_feedback}|{algorithm}"
        theirs = _C.broadcast_text(mine)
        differ = _C.ranks_that_failed(mine == theirs)
        if differ:
            raise boostcomm.MismatchError(
                f"[boostcomm rank {native.rank}] WireHookState: rank(s) {differ} differ from rank 0 in "
                f"(wire, error_feedback, algorithm): rank 0 has {theirs!r}, this rank {mine!r}")
        self.comm = native
        self.wire = wire
        self.error_feedback = error_feedback
        self.algorithm = algorithm
        self.residuals = {}  # bucket index -> float32 residual (error feedback)
        self.wire_counts = collections.Counter()  # how the buckets travelled
        # Torch futures must complete without anyone calling test()/wait().
        native.use_progress_thread()

    def _feedback(self, index, buffer, wire):
        """buffer = round(buffer + e); e = (buffer + e) - round(...), in place."""
        e = self.residuals.get(index)
        if e is None or e.numel() != buffer.numel():
            # First step, or DDP rebuilt its buckets (after the first iteration).
            e = torch.zeros_like(buffer)
            self.residuals[index] = e
        buffer.add_(e)
        e.copy_(buffer)
        _C.round_through_wire(buffer, wire)
        e.sub_(buffer)


def wire_hook(state, bucket):
    """DDP comm hook: average the bucket with state.wire on the link.

    Returns a torch.futures.Future completed (from boostcomm's progress
    thread) with the averaged bucket; backward goes on meanwhile."""
    if not isinstance(state, WireHookState):
        raise TypeError("boostcomm wire hooks need a WireHookState (ddp.register_comm_hook(WireHookState(), hook)); "
                        f"got {type(state).__name__}")
    buffer = bucket.buffer()
    comm = state.comm
    # Non-float32 buckets travel as they are (an explicit 16-bit wire on them is an error).
    wire = state.wire if buffer.dtype == torch.float32 else "off"
    if state.error_feedback and wire != "off":
        travels = comm.wire_format_of(buffer.numel() * 4, wire, state.algorithm)
        if travels != "off":
            state._feedback(bucket.index(), buffer, travels)
    work = comm.all_reduce(buffer, buffer, "avg", state.algorithm, True, wire)
    state.wire_counts[work.wire_format] += 1
    future = torch.futures.Future()

    def done(error):
        if error is None:
            future.set_result(buffer)
        else:
            future.set_exception(boostcomm.Error(error))

    work.on_complete(done)
    return future


def _fixed(wire):
    def hook(state, bucket):
        if state.wire != wire:
            raise ValueError(f"boostcomm {wire}_wire_hook: its WireHookState has wire={state.wire!r}; "
                             f"create it with WireHookState(wire={wire!r}) or use wire_hook")
        return wire_hook(state, bucket)

    hook.__name__ = hook.__qualname__ = f"{wire}_wire_hook"
    hook.__doc__ = f"wire_hook with a WireHookState(wire={wire!r}) (checked)."
    return hook


bf16_wire_hook = _fixed("bf16")
fp16_wire_hook = _fixed("fp16")
