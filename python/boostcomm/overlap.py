"""Overlap of gradient communication with backward: its settings
(configure_overlap), the engine (OverlapEngine) and what it hid
(get_overlap_stats). The plain training loop's gradient averaging, which
configure_overlap can switch on, lives in grad_sync.py."""

import math
import warnings

from . import _C, InvalidArgumentError, _agree, _default, _like, _state

# Names of buffer_strategy (OverlapEngine's BufferStrategy), aliases first-class:
# the founding document writes "pingpong".
_BUFFER_STRATEGIES = {"segment_list": "segment_list", "list": "segment_list", "ping_pong": "ping_pong",
                      "pingpong": "ping_pong", "double": "ping_pong", "single": "single"}
# The stages overlap_stages may name: the gradient allreduce runs during backward.
_STAGES = ("backward", "allreduce")


def _stages_error(overlap_stages):
    """None, or why overlap_stages is neither a count of collectives in flight
    nor a list of the stages that overlap."""
    if isinstance(overlap_stages, (list, tuple)):
        names = [str(s).lower() for s in overlap_stages]
        unknown = [s for s in overlap_stages if str(s).lower() not in _STAGES]
        if unknown:
            return (f"overlap_stages names unknown stage(s) {unknown}; the stages that overlap here are "
                    f"{list(_STAGES)} (the gradient allreduce runs during backward)")
        if sorted(set(names)) != sorted(_STAGES):
            return (f"overlap_stages={list(overlap_stages)} names one stage; overlap needs two: "
                    f"pass {list(_STAGES)}")
        return None
    if isinstance(overlap_stages, bool) or not isinstance(overlap_stages, int) or overlap_stages < 1:
        return (f"overlap_stages must be an int >= 1 (collectives in flight) or the list {list(_STAGES)}, "
                f"got {overlap_stages!r}")
    return None


def configure_overlap(enable=True, overlap_stages=2, buffer_strategy="segment_list", sync_gradients=None):
    """Overlap of gradient communication with backward.

    enable: False makes the boostcomm c10d backend synchronous (each
    collective completes before the call returns) and OverlapEngine launch
    every bucket at finish_backward.
    overlap_stages: an int, the collectives in flight at once (>= 1); or the
    stages that overlap, ["backward", "allreduce"] (the founding document's
    form; the count in flight stays as it was, 2 by default).
    buffer_strategy (OverlapEngine): segment_list (= list, the default: each
    bucket is reduced in place on its gradients, no staging copy), ping_pong
    (= pingpong, double) or single staging buffers.
    sync_gradients: average the gradients of a plain training loop (a model
    and a torch optimizer, no wrapper) across ranks, overlapped with backward
    (grad_sync.py; docs/PYTHON.md "The plain loop"). None (default): on when
    enable is true and overlap_stages names ["backward", "allreduce"], off
    otherwise; True / False: on / off. Off removes every hook it installed.
    Applies to live and future process groups and to OverlapEngines created
    afterwards. With a communicator (comm_init), a bad argument on one rank
    raises on every rank."""
    rank = _default().rank if _state.default_comm is not None and not _state.default_comm.finalized else None
    prefix = f"[boostcomm rank {rank}] configure_overlap: " if rank is not None else "configure_overlap: "
    problem = _stages_error(overlap_stages)
    if problem is None and buffer_strategy not in _BUFFER_STRATEGIES:
        problem = (f"buffer_strategy '{buffer_strategy}' unknown; valid: "
                   f"{', '.join(_BUFFER_STRATEGIES)}")
    if problem is None and sync_gradients not in (None, True, False):
        problem = f"sync_gradients must be None, True or False, got {sync_gradients!r}"
    error = InvalidArgumentError(prefix + problem) if problem else None
    if rank is not None:
        _agree(error)
    elif error is not None:
        raise error
    named_stages = isinstance(overlap_stages, (list, tuple))
    stages = _state.overlap["stages"] if named_stages else overlap_stages
    if sync_gradients is None:
        sync_gradients = bool(enable) and named_stages
    _state.overlap = {"enable": bool(enable), "stages": stages,
                      "buffer_strategy": _BUFFER_STRATEGIES[buffer_strategy], "sync_gradients": sync_gradients}
    for pg in _state.process_groups():
        pg._configure_overlap(bool(enable), stages)
    from . import grad_sync
    grad_sync.auto_sync(sync_gradients)


class OverlapStats:
    """What get_overlap_stats() measured; times in seconds.

    comm_time: time with gradient communication in flight; hidden_comm_time:
    the part of it that ran while the training thread computed;
    exposed_comm_time: the rest (the trainer waited). efficiency: % hidden,
    or NaN when nothing was measured (measured is then False and note says
    why; never a 100% for a loop that communicated nothing). count: steps
    (source "overlap_engine") or collectives (source "process_group") since
    the last reset; hidden_comm_time is their sum, so per epoch when
    get_overlap_stats(reset=True) ends each epoch."""

    def __init__(self, comm_time, hidden_comm_time, source, steps_or_ops, note=""):
        self.comm_time = comm_time
        self.hidden_comm_time = hidden_comm_time
        self.exposed_comm_time = max(0.0, comm_time - hidden_comm_time)
        self.measured = comm_time > 0
        self.efficiency = 100.0 * hidden_comm_time / comm_time if self.measured else math.nan
        self.source = source
        self.count = steps_or_ops
        self.note = note if not self.measured else ""

    def __repr__(self):
        if not self.measured:
            return f"<OverlapStats: nothing measured ({self.note})>"
        return (f"<OverlapStats {self.efficiency:.1f}% hidden: {self.hidden_comm_time * 1e3:.2f} ms of "
                f"{self.comm_time * 1e3:.2f} ms over {self.count} "
                f"{'steps' if self.source == 'overlap_engine' else 'collectives'} ({self.source})>")


def _engine_totals(reset):
    """(steps, comm, hidden) of every live OverlapEngine since the last reset.
    Each engine keeps its own totals at the last reset (_stats_baseline): a
    table keyed by id() would hand a dead engine's baseline to a new one that
    reuses its address, and hide the new one's steps."""
    steps = comm = hidden = 0
    for engine in _state.engines():
        s = engine.stats()
        n, mean = s["steps"], s["mean"]
        now = (n, mean["comm_seconds"] * n, mean["hidden_seconds"] * n)
        base = getattr(engine, "_stats_baseline", (0, 0.0, 0.0))
        steps += now[0] - base[0]
        comm += now[1] - base[1]
        hidden += now[2] - base[2]
        if reset:
            engine._stats_baseline = now
    return steps, max(0.0, comm), max(0.0, hidden)


def get_overlap_stats(reset=False):
    """How much gradient communication ran while compute went on.

    From the OverlapEngines (the plain loop's gradient sync,
    DistributedOptimizer, OverlapEngine itself) when they ran steps since
    the last reset: their step statistics (docs/OVERLAP.md: comm = time a
    bucket was in flight, exposed = time the trainer waited for them, hidden
    = comm - exposed). Else from the boostcomm process groups (DDP): comm =
    time with a collective in flight, hidden = CPU time the training thread
    spent computing meanwhile. Nothing measured: efficiency NaN, a one-line
    warning and `note` saying so. reset: start counting afresh after this
    reading."""
    steps, engine_comm, engine_hidden = _engine_totals(reset)
    comm = hidden = 0.0
    ops = 0
    for pg in _state.process_groups():
        c = pg._overlap_counters(reset)
        comm += c["comm_seconds"]
        hidden += c["hidden_seconds"]
        ops += c["ops"]
    if steps:
        stats = OverlapStats(engine_comm, engine_hidden, "overlap_engine", steps,
                             "the overlap engines ran steps without communication time")
    elif ops:
        stats = OverlapStats(comm, hidden, "process_group", ops, "the process groups' collectives took no time")
    else:
        stats = OverlapStats(0.0, 0.0, "none", 0, "no gradient communication ran: no OverlapEngine step and no "
                                                  "boostcomm process-group collective since the last reset "
                                                  "(a plain loop synchronises after configure_overlap(enable=True, "
                                                  "overlap_stages=['backward', 'allreduce']))")
    if not stats.measured:
        warnings.warn(f"boostcomm.get_overlap_stats: nothing measured: {stats.note}", RuntimeWarning, stacklevel=2)
    return stats


class OverlapEngine:
    """Gradient allreduce overlapped with backward, without DDP.

        engine = boostcomm.OverlapEngine(named_params)    # [(name, tensor)], forward order
        engine.mark_ready(i)   # as backward produces gradient i
        engine.finish_backward()
    Settings from configure_overlap().

    bucket_view=True (as DDP's gradient_as_bucket_view): the engine owns the
    gradients' memory, in its buckets. The tensors passed in give name, shape,
    dtype and initial contents only (copied once); write gradient i into
    tensor_view(i) before mark_ready(i), and read the result there after
    finish_backward(). No pack or unpack copies. comm: the native
    communicator to run on (default: comm_init's)."""

    def __init__(self, named_tensors, bucket_bytes=0, first_bucket_bytes=0, average=False, timeout=None,
                 bucket_view=False, comm=None):
        names = [n for n, _ in named_tensors]
        self.tensors = [t for _, t in named_tensors]
        o = _state.overlap
        self._native = _C.OverlapEngine(_default() if comm is None else comm, names, self.tensors, o["enable"],
                                        o["stages"], o["buffer_strategy"], bucket_bytes, first_bucket_bytes,
                                        average, timeout, bool(bucket_view))
        _state.register_engine(self)

    def tensor_view(self, index):
        """Where gradient `index` lives, without a copy: its slot in the engine's
        bucket memory with bucket_view=True, else the tensor passed in. A torch
        tensor when a torch tensor was passed, else a numpy array, of the passed
        tensor's shape. The view keeps the engine alive: its buckets are freed
        (a collective call) only when the engine and every view are gone, so
        drop them at the same point on every rank."""
        return _like(self._native.tensor_view(index), self.tensors[index])

    def begin_backward(self):
        self._native.begin_backward()

    def mark_ready(self, index):
        self._native.mark_ready(index)

    def finish_backward(self):
        self._native.finish_backward()

    def stats(self):
        return self._native.stats()

    def describe_buckets(self):
        return self._native.describe_buckets()
