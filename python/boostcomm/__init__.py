"""boostcomm: communication acceleration for data-parallel training.

    import boostcomm as abc
    comm = abc.comm_init(rank, world_size, device_id=local_rank, device="cpu")
    abc.all_reduce(grad)                          # in place, numpy or CPU torch
    abc.GradientGroup(grads).all_reduce()         # many tensors, few collectives
    with abc.collective_fusion() as cf:           # mixed requests, one plan
        cf.register_allreduce(g, g)
        cf.register_allgather(shard, full)

Launch with mpirun (every rank runs the same script):
    mpirun -np 2 --oversubscribe --bind-to none /usr/bin/python3 train.py

Arrays are used in place (no copy): numpy arrays and contiguous CPU torch
tensors of float32, float64, float16, bfloat16, int32, int64 or uint8.
Every rank calls the same collectives in the same order (MPI semantics).
The PyTorch c10d backend and DDP comm hook live in `boostcomm.torch`.
Reference: docs/PYTHON.md.
"""

import contextlib
import importlib

try:
    _C = importlib.import_module(__name__ + "._boostcomm")
except ImportError as _error:  # not built here, or its libraries (libmpi ...) are missing
    # JSON-only tools (python3 -m boostcomm.plot) still import the package;
    # native calls then raise this error (boostcomm/_unbuilt.py says why).
    from . import _unbuilt
    _C = _unbuilt.install(__name__ + "._boostcomm", _error)
from . import _launch, _state

__version__ = _C.__version__
Error = _C.Error
InvalidArgumentError = _C.InvalidArgumentError
MismatchError = _C.MismatchError
TimeoutError = _C.TimeoutError  # noqa: A001 - also a builtin TimeoutError subclass
FinalizedError = _C.FinalizedError
Work = _C.Work

__all__ = [
    "comm_init", "comm_finalize", "get_communicator", "available_devices",
    "all_reduce", "all_reduce_many", "all_gather", "all_gather_many", "broadcast", "broadcast_many",
    "reduce_scatter", "reduce_scatter_many", "barrier",
    "GradientGroup", "collective_fusion", "CollectiveFusion", "OverlapEngine",
    "detect_topology", "configure_comm_strategy", "reduce_scatter_autotune",
    "configure_overlap", "get_overlap_stats", "OverlapStats", "DistributedOptimizer", "broadcast_parameters",
    "get_link_stats",
    "Error", "InvalidArgumentError", "MismatchError", "TimeoutError", "FinalizedError", "FallbackWarning",
]


def available_devices():
    """Devices this build can run collectives on."""
    return ["cpu"]


def _device_error(prefix, device):
    """Why `device` cannot be used here, naming what can (None when it can)."""
    if device in available_devices():
        return None
    where = {"npu": "Ascend NPUs (HCCL)", "cuda": "NVIDIA GPUs (NCCL)", "gpu": "GPUs", "xpu": "Intel GPUs"}
    what = f" ({where[device]})" if device in where else ""
    return InvalidArgumentError(
        prefix + f"device '{device}'{what} is not available in this build, which runs collectives on CPU "
        f"tensors only; available: {', '.join(available_devices())}. Keep the tensors on the CPU "
        "(no .npu()/.cuda()) and pass device='cpu'")


def _agree(local_error):
    """Collective: raise on every rank when any rank's arguments are bad.

    A rank with a bad argument must not leave the others waiting inside the
    collective that follows, so all ranks agree first: over MPI's control
    communicator, or over the default communicator when comm_init joined
    through the c10d store (no MPI there).
    """
    comm = _state.default_comm
    if _state.transport == "tcp" and comm is not None and not comm.finalized:
        import numpy
        flags = numpy.empty((comm.size, 1), numpy.int32)
        comm.all_gather(numpy.array([0 if local_error is None else 1], numpy.int32), flags, None, False)
        failed = [r for r in range(comm.size) if flags[r, 0] and r != comm.rank]
        rank = comm.rank
    else:
        failed = [r for r in _C.ranks_that_failed(local_error is None) if r != _C.launcher_rank()]
        rank = _C.launcher_rank()
    if local_error is not None:
        raise local_error
    if failed:
        raise MismatchError(f"[boostcomm rank {rank}] rank(s) {failed} passed invalid "
                            "arguments to this collective call (see their error)")


# ---------------------------------------------------------------- setup

def comm_init(rank=None, world_size=None, device_id=0, device="cpu"):
    """Join the job's communicator (collective over all ranks).

    rank / world_size must be what the launcher assigned (mpirun, srun,
    torchrun); None takes them from it. device: one of available_devices()
    (another, e.g. "npu" or "cuda", raises naming the available ones);
    device_id: the local device index (recorded; CPU collectives ignore it).
    Under mpirun/srun the communicator is the MPI world (MPI is initialised
    unless the application or mpi4py already did); under torchrun or env://
    (or after torch.distributed.init_process_group without mpirun) it
    rendezvouses through torch's c10d store and runs over Gloo's TCP pairs
    (boostcomm/_launch.py). Returns the Communicator; calling it again
    returns the same one. A bad argument on one rank raises on every rank.
    """
    transport = _state.transport or _launch.transport()
    if transport == "tcp":
        # Kept at once, also when this call fails: its store keys carry the job's
        # call generation, and a fresh job after a failed call would reuse the
        # failed call's keys and read a peer's stale verdict from them.
        job = _state.store_job = _state.store_job or _launch.StoreJob()
        true_rank, true_size = job.rank, job.size
        launcher = f"torchrun --nproc_per_node {true_size}"
    else:
        _C.ensure_mpi()
        true_rank, true_size = _C.launcher_rank(), _C.launcher_size()
        launcher = f"mpirun -np {true_size}"
    prefix = f"[boostcomm rank {true_rank}] comm_init: "
    error = _device_error(prefix, device)
    if error is None and (not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0):
        error = InvalidArgumentError(prefix + f"device_id must be a non-negative int, got {device_id!r}")
    elif error is None and world_size is not None and world_size != true_size:
        error = InvalidArgumentError(prefix + f"world_size={world_size}, but the launcher started "
                                     f"{true_size} processes (e.g. {launcher})")
    elif error is None and rank is not None and rank != true_rank:
        error = InvalidArgumentError(prefix + f"rank={rank}, but the launcher started this process as "
                                     f"rank {true_rank} of {true_size}")
    if transport == "tcp":
        store = job.agree(error, "comm_init")
    else:
        _agree(error)
    _state.transport = transport
    if _state.default_comm is None or _state.default_comm.finalized:
        if transport == "tcp":
            native = job.communicator("comm_init", store)
        else:
            native = _C.Communicator.world()
        _state.default_comm = _state.register_communicator(native)
        _state.default_comm_device = (device, device_id)
    return Communicator(_state.default_comm)


def comm_finalize():
    """Release the default communicator (collective). MPI stays up until exit."""
    comm, _state.default_comm = _state.default_comm, None
    if comm is not None and not comm.finalized:
        comm.finalize()


def get_communicator():
    return Communicator(_default())


def _default():
    comm = _state.default_comm
    if comm is None or comm.finalized:
        raise RuntimeError("boostcomm: call boostcomm.comm_init(rank, world_size, device_id) first")
    return comm


class Communicator:
    """The communicator of comm_init (thin wrapper; module functions use it)."""

    def __init__(self, native):
        self._native = native

    rank = property(lambda self: self._native.rank)
    size = property(lambda self: self._native.size)
    node_layout = property(lambda self: self._native.node_layout)

    def algorithms(self, collective):
        return self._native.algorithms(collective)

    def selected_algorithm(self, collective, nbytes):
        return self._native.selected_algorithm(collective, nbytes)

    def set_wire_format(self, wire):
        """Wire format of float32 allreduce, allgather and reduce_scatter: off,
        bf16, fp16 or auto (collective; docs/ALGORITHMS.md "Wire formats").
        Default: BOOSTCOMM_WIRE_DTYPE."""
        self._native.set_wire_format(wire)

    wire_format = property(lambda self: self._native.wire_format)

    def wire_format_of(self, nbytes):
        """How a float32 allreduce of nbytes travels: 'off', 'bf16' or 'fp16'."""
        return self._native.wire_format_of(nbytes)

    def flight_record(self):
        """This rank's flight recorder as JSON text (docs/RELIABILITY.md): its
        last 256 collectives, each with the Python stack that called it
        ("python_stack", innermost frame first; none for calls made from C++)."""
        return self._native.flight_record()

    def __repr__(self):
        return f"<boostcomm.Communicator rank {self.rank} of {self.size}, layout {self.node_layout}>"


# ---------------------------------------------------------------- arrays

def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _numel(x):
    return x.numel() if _is_torch(x) else x.size


def _empty_like(x, shape):
    """A new array of x's kind (numpy / torch) and dtype."""
    if _is_torch(x):
        import torch
        return torch.empty(shape, dtype=x.dtype, device=x.device)
    import numpy
    return numpy.empty(shape, dtype=x.dtype)


def _copy(dst, src):
    if _is_torch(dst):
        dst.copy_(src)
    else:
        import numpy
        numpy.copyto(dst, src)


# ---------------------------------------------------------------- collectives

def all_reduce(tensor, op="sum", output=None, algorithm=None, async_op=False, wire=None):
    """output = op over all ranks' tensor (in place when output is None).

    op: sum, avg, min, max, prod. algorithm: e.g. "ring" (None: the selection
    table). wire: this call's wire format for float32 (off, bf16, fp16, auto;
    None: the communicator's; docs/ALGORITHMS.md "Wire formats").
    Returns output, or a Work to wait() on when async_op."""
    out = tensor if output is None else output
    work = _default().all_reduce(tensor, out, op, algorithm, async_op, wire)
    return work if async_op else out


def all_reduce_many(tensors, op="sum", algorithm=None, async_op=False, wire=None):
    """Every tensor = op over all ranks' tensor, as ONE collective over the
    list (in place; no packing into a fused buffer). One dtype for the list;
    every rank passes the same shapes in the same order (checked: an error
    on every rank otherwise). Returns the tensors, or a Work when async_op."""
    tensors = list(tensors)
    work = _default().all_reduce_many(tensors, op, algorithm, async_op, wire)
    return work if async_op else tensors


def broadcast_many(tensors, root=0, algorithm=None, async_op=False):
    """Every tensor on every rank = that tensor on root, as ONE broadcast of
    the list (in place; one dtype; same shapes on every rank, checked)."""
    tensors = list(tensors)
    work = _default().broadcast_many(tensors, root, algorithm, async_op)
    return work if async_op else tensors


def all_gather_many(tensors, outputs=None, algorithm=None, async_op=False, wire=None):
    """outputs[i] (world_size x tensors[i]'s shape when None) = every rank's
    tensors[i] in rank order, for every i, as ONE allgather of the list (the
    tensors are read and written in place; one dtype; same shapes on every
    rank, checked). wire: as for all_gather. Returns the outputs, or a Work when async_op."""
    comm = _default()
    tensors = list(tensors)
    if outputs is None:
        outputs = [_empty_like(t, (comm.size,) + tuple(t.shape)) for t in tensors]
    outputs = list(outputs)
    work = comm.all_gather_many(tensors, outputs, algorithm, async_op, wire)
    return work if async_op else outputs


def reduce_scatter_many(tensors, outputs=None, op="sum", algorithm=None, async_op=False, wire=None):
    """outputs[i] = block `rank` (numel / world_size elements) of op over all
    ranks' tensors[i], for every i, as ONE reduce_scatter of the list.
    wire: as for all_reduce. Returns the outputs, or a Work when async_op."""
    comm = _default()
    tensors = list(tensors)
    if outputs is None:
        outputs = []
        for i, t in enumerate(tensors):
            n = _numel(t)
            if n % comm.size:
                raise InvalidArgumentError(f"[boostcomm rank {comm.rank}] reduce_scatter_many: tensors[{i}] has {n} "
                                           f"elements, not a multiple of world_size {comm.size}")
            outputs.append(_empty_like(t, (n // comm.size,)))
    outputs = list(outputs)
    work = comm.reduce_scatter_many(tensors, outputs, op, algorithm, async_op, wire)
    return work if async_op else outputs


def all_gather(tensor, output=None, algorithm=None, async_op=False, wire=None):
    """output (world_size x tensor's shape when None) = every rank's tensor, in rank order.

    wire: this call's wire format for float32 (off, bf16, fp16, auto; None: the
    communicator's): with bf16/fp16 every value arrives rounded once, the
    owner's copy too, so all ranks hold the same bits; "off" moves them exactly."""
    comm = _default()
    if tensor is None:
        raise InvalidArgumentError(f"[boostcomm rank {comm.rank}] all_gather: tensor is None")
    out = _empty_like(tensor, (comm.size,) + tuple(tensor.shape)) if output is None else output
    work = comm.all_gather(tensor, out, algorithm, async_op, wire)
    return work if async_op else out


def broadcast(tensor, root=0, algorithm=None, async_op=False):
    """tensor on every rank = tensor on root."""
    work = _default().broadcast(tensor, root, algorithm, async_op)
    return work if async_op else tensor


def reduce_scatter(tensor, output=None, op="sum", algorithm=None, async_op=False, wire=None):
    """Rank i receives block i of op over all ranks' tensor (numel / world_size elements).
    wire: as for all_reduce."""
    comm = _default()
    if tensor is None:
        raise InvalidArgumentError(f"[boostcomm rank {comm.rank}] reduce_scatter: tensor is None")
    if output is None:
        n = _numel(tensor)
        if n % comm.size:
            raise InvalidArgumentError(f"[boostcomm rank {comm.rank}] reduce_scatter: input has {n} elements, "
                                       f"not a multiple of world_size {comm.size}")
        output = _empty_like(tensor, (n // comm.size,))
    work = comm.reduce_scatter(tensor, output, op, algorithm, async_op, wire)
    return work if async_op else output


def barrier(async_op=False):
    return _default().barrier(async_op)


# ---------------------------------------------------------------- fusion

def _like(view, passed):
    """A numpy view over boostcomm memory, as the kind of object `passed` is
    (a torch tensor of its dtype for torch, else the array itself)."""
    if not _is_torch(passed):
        return view
    import torch
    # from_numpy shares the memory and keeps the array (and so its owner)
    # alive. bfloat16 arrives as uint16 bits, which torch cannot import:
    # reinterpret them as int16, then as bfloat16, in place.
    if passed.dtype == torch.bfloat16:
        view = view.view("int16")
    out = torch.from_numpy(view)
    return out.view(passed.dtype) if out.dtype != passed.dtype else out


class GradientGroup:
    """Many gradient tensors synchronised by few collectives (fusion buckets).

    Construction is collective (every rank, same tensor list). all_reduce()
    replaces every tensor with the sum (average=True: the mean) over ranks.

    Default: each bucket is one collective over its tensors where they are
    (a segment list): nothing is packed or copied, and construction only
    plans (no bucket memory). bucket_view=True: the tensors move into
    registered bucket memory (their contents are copied once); use
    group.tensors (new arrays/tensors over that memory, same shapes and
    dtypes) from then on, e.g. as the .grad of the parameters (DDP's
    gradient_as_bucket_view). pack_buckets=True: the former copy mode (pack
    and unpack every step), for comparison.
    """

    def __init__(self, tensors, bucket_bytes=0, first_bucket_bytes=0, average=False, algorithm=None,
                 bucket_view=False, pack_buckets=False):
        originals = list(tensors)
        self._native = _C.GradientGroup(_default(), originals, bucket_bytes, first_bucket_bytes, average,
                                        algorithm, bool(bucket_view), bool(pack_buckets))
        self.bucket_view = bool(bucket_view)
        self.tensors = [self._slot(i, t) for i, t in enumerate(originals)] if bucket_view else originals

    def _slot(self, i, original):
        return _like(self._native.tensor_view(i), original)

    def all_reduce(self):
        self._native.all_reduce()
        return self.tensors

    def stats(self):
        return self._native.stats()

    def describe(self):
        return self._native.describe()


class CollectiveFusion:
    """A batch of mixed collectives, planned and run together (see collective_fusion)."""

    def __init__(self, fuse=True, max_group_bytes=0, algorithm=None):
        self._native = _C.CollectiveFusion(_default(), fuse, max_group_bytes, algorithm)
        self._root_copies = []  # (dst, src) copied on the root before execute
        self._pending = False

    def register_allreduce(self, tensor, buffer=None, op="sum"):
        """buffer (tensor itself when None) = op over all ranks' tensor. Returns the request id."""
        self._pending = True
        return self._native.allreduce(tensor, tensor if buffer is None else buffer, op)

    def register_allgather(self, input, output):  # noqa: A002 - the reference design's names
        self._pending = True
        return self._native.allgather(input, output)

    def register_broadcast(self, tensor, buffer=None, root=0):
        """buffer on every rank = tensor on root (tensor itself when buffer is None).

        With a separate buffer, the root's tensor is copied into it when the
        batch executes, so tensor must not be another request's output."""
        self._pending = True
        if buffer is not None and buffer is not tensor:
            if _default().rank == root:
                self._root_copies.append((buffer, tensor))
            return self._native.broadcast(buffer, root)
        return self._native.broadcast(tensor, root)

    def register_reduce_scatter(self, input, output, op="sum"):  # noqa: A002
        self._pending = True
        return self._native.reduce_scatter(input, output, op)

    def depends_on(self, later, earlier):
        """Request `later` starts only after request `earlier` completed."""
        self._native.depends_on(later, earlier)

    def execute(self):
        """Run every registered request (collective). The batch may run again."""
        for dst, src in self._root_copies:
            _copy(dst, src)
        self._native.execute()
        self._pending = False

    def describe_plan(self):
        return self._native.describe_plan()

    def stats(self):
        return self._native.stats()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self._pending:
            self.execute()
        return False


def collective_fusion(fuse=True, max_group_bytes=0, algorithm=None):
    """Context manager: requests registered inside run fused when the block ends.

        with boostcomm.collective_fusion() as cf:
            cf.register_allgather(shard, full)
            cf.register_allreduce(grad, grad)
    """
    return CollectiveFusion(fuse, max_group_bytes, algorithm)


# ---------------------------------------------------------------- topology, strategy, tuning

class TopologyInfo:
    """detect_topology() result. Bandwidths in GB/s (1e9 bytes/s), latencies in us."""

    def __init__(self, native, layout):
        self.raw = native
        self.layout = layout
        self.nodes = native.nodes
        self.world_size = native.world_size
        self.ranks_per_node = list(native.ranks_per_node)
        self.hostnames = list(native.hostnames)
        intra, inter = native.intra_node, native.inter_node
        self.intra_node_bw = intra.bandwidth_gbps if intra.measured else None
        self.inter_node_bw = inter.bandwidth_gbps if inter.measured else None
        self.intra_node_latency_us = intra.latency_us if intra.measured else None
        self.inter_node_latency_us = inter.latency_us if inter.measured else None
        # Switch hops on the longest path between two ranks (1 inside a node).
        self.hops = inter.hops if native.nodes > 1 else max(intra.hops, 1)

    def to_json(self):
        return self.raw.to_json()

    def __repr__(self):
        return (f"<TopologyInfo layout {self.layout}, {self.nodes} node(s), intra {self.intra_node_bw} GB/s, "
                f"inter {self.inter_node_bw} GB/s, hops {self.hops}>")


def detect_topology(probe=True):
    """Nodes, ranks per node and measured link speeds (collective; probes take ~1 s)."""
    comm = _default()
    return TopologyInfo(_C.detect_topology(comm, probe), comm.node_layout)


class FallbackWarning(UserWarning):
    """A setting named something this build does not have; a stated substitute is used."""


# Links of other machines (accelerator fabrics, RDMA NICs and their collective
# libraries): a program written for them runs here on the substitute named in
# the warning, which configure_comm_strategy prints.
_LINKS_ELSEWHERE = {
    "nvlink": "NVIDIA's GPU-to-GPU link", "hccs": "Ascend's NPU-to-NPU link", "xgmi": "AMD's GPU-to-GPU link",
    "roce": "RDMA over Converged Ethernet", "rocev2": "RDMA over Converged Ethernet",
    "rccl": "AMD's collective library (RoCE)", "rdma": "RDMA", "infiniband": "InfiniBand", "ib": "InfiniBand",
    "nccl": "NVIDIA's collective library", "hccl": "Ascend's collective library",
}


def _links(transport):
    """The links this build's collectives can use, per phase of a hierarchical
    collective: {protocol name: the intra-node algorithm it means (None: no change)}."""
    p2p = "tcp" if transport == "tcp" else "mpi"
    intra = {"auto": None, "shm": "shm", p2p: "ring"}
    inter = {"auto": None, p2p: None}
    return intra, inter


def _protocol(prefix, argument, value, available):
    """(protocol, warning) for one *_node_protocol argument, or raises."""
    name = str(value).lower()
    if name in available:
        return name, None
    if name in _LINKS_ELSEWHERE:
        return "auto", (f"boostcomm: {argument}={value!r} ({_LINKS_ELSEWHERE[name]}) is not in this CPU build; "
                        f"using 'auto' (available: {', '.join(available)})")
    raise InvalidArgumentError(prefix + f"{argument} {value!r} is unknown; available in this build: "
                               f"{', '.join(available)} (links of other machines, such as "
                               f"{', '.join(sorted(_LINKS_ELSEWHERE)[:4])}, fall back to 'auto' with a warning)")


def configure_comm_strategy(strategy="auto", intra_algorithm="auto", inter_algorithm="auto",
                            collective_algorithm="auto", intra_node_protocol="auto", inter_node_protocol="auto"):
    """How collectives use the machine layout (collective).

    strategy: flat | topology_aware | auto. The two phases of a hierarchical
    collective (topology_aware on several nodes), named by link or by algorithm:
      intra_node_protocol: auto | shm (the node's shared-memory segment) |
        mpi or tcp (the transport's point-to-point link: MPI under mpirun,
        Gloo's TCP pairs under torchrun), i.e. intra_algorithm shm or ring;
      inter_node_protocol: auto | mpi or tcp (the one link between nodes here);
      intra_algorithm: auto (shm when the node's ranks share a segment, else
        ring) | shm | ring; inter_algorithm: auto (ring) | ring | rhd | native
        (C++ CommStrategy::intraAlgorithm / interAlgorithm,
        BOOSTCOMM_HIER_INTRA_ALGO / BOOSTCOMM_HIER_INTER_ALGO).
    Links of other machines (nvlink, hccs, roce, rccl, ...) fall back to
    'auto' with a one-line FallbackWarning; unknown names raise listing the
    available ones. collective_algorithm: auto or an algorithm name. Applies
    to the default communicator and to boostcomm process groups created
    afterwards. Returns the settings applied (a dict)."""
    comm = _default()
    prefix = f"[boostcomm rank {comm.rank}] configure_comm_strategy: "
    intra_links, inter_links = _links(_state.transport)
    error, warnings_ = None, []
    try:
        intra, warning = _protocol(prefix, "intra_node_protocol", intra_node_protocol, list(intra_links))
        warnings_.append(warning)
        inter, warning = _protocol(prefix, "inter_node_protocol", inter_node_protocol, list(inter_links))
        warnings_.append(warning)
        wanted = intra_links[intra]
        if wanted is not None:
            if intra_algorithm not in ("auto", wanted):
                raise InvalidArgumentError(prefix + f"intra_node_protocol={intra_node_protocol!r} means "
                                           f"intra_algorithm {wanted!r}, but intra_algorithm={intra_algorithm!r}")
            intra_algorithm = wanted
    except InvalidArgumentError as e:
        error = e
    _agree(error)
    args = (strategy, intra_algorithm, inter_algorithm, collective_algorithm)
    comm.configure_comm_strategy(*args)
    _state.strategy = args
    for warning in filter(None, warnings_):  # after the collective call: every rank has configured
        import warnings
        warnings.warn(warning, FallbackWarning, stacklevel=2)
    return {"strategy": strategy, "intra_node_protocol": intra, "inter_node_protocol": inter,
            "intra_algorithm": intra_algorithm, "inter_algorithm": inter_algorithm,
            "collective_algorithm": collective_algorithm}


class AutotuneResult:
    def __init__(self, output, info):
        self.output = output
        self.selected_algorithm = info["selected_algorithm"]
        self.default_algorithm = info["default_algorithm"]
        self.speedup = info["speedup"]
        self.from_cache = info["from_cache"]
        self.candidates_us = dict(info["candidates_us"])

    def __repr__(self):
        return f"<AutotuneResult {self.selected_algorithm}, {self.speedup:.2f}x over {self.default_algorithm}>"


def reduce_scatter_autotune(input_tensor, reduce_op="sum", auto_strategy=True, output=None):
    """Reduce-scatter with the fastest algorithm for this size, measured on first use (collective)."""
    comm = _default()
    if output is None:
        n = _numel(input_tensor)
        if n % comm.size:
            raise InvalidArgumentError(f"[boostcomm rank {comm.rank}] reduce_scatter_autotune: input has {n} "
                                       f"elements, not a multiple of world_size {comm.size}")
        output = _empty_like(input_tensor, (n // comm.size,))
    info = _C.reduce_scatter_autotune(comm, input_tensor, output, reduce_op, auto_strategy)
    return AutotuneResult(output, info)


def get_link_stats(reset=False, per_node=False):
    """Bytes and busy time per link level (intra_node, inter_node) of the
    default communicator (docs/OVERLAP.md, "Link accounting").

    per_node=False: this rank's counters (local). per_node=True: collective,
    every rank gets a list with one dict per node: its ranks' bytes summed,
    inter_node busy_seconds = time any of them had an inter-node transfer in
    flight, congested_seconds = time two or more did. "modelled_bytes" are
    backend (MPI) and shared-memory calls, counted as the simulator models
    them; "observed_bytes" are boostcomm's own sends. reset: restart counting."""
    comm = _default()
    return comm.node_link_stats(reset) if per_node else comm.link_stats(reset)



# ---------------------------------------------------------------- overlap (overlap.py, grad_sync.py)

# They need the error types and helpers above.
from .overlap import (OverlapEngine, OverlapStats, configure_overlap,  # noqa: E402
                      get_overlap_stats)

# torch-dependent names load on first use (PEP 562): `import boostcomm` and
# the tools that need JSON only (python3 -m boostcomm.plot, the `boostcomm`
# command) do not pay torch's import (~1.5 s).
_LAZY = {"DistributedOptimizer": "optimizer", "broadcast_parameters": "grad_sync"}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
