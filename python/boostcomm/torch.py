"""PyTorch integration: the "boostcomm" c10d backend and a DDP comm hook.

    import boostcomm.torch                     # registers the backend
    boostcomm.torch.init_process_group("boostcomm")   # env:// filled in from mpirun
    model = torch.nn.parallel.DistributedDataParallel(model)   # unchanged

or, keeping another process group for DDP's own traffic:

    ddp.register_comm_hook(None, boostcomm.torch.hook)

The backend's collectives run on a background thread per process group
(one boostcomm Communicator per group), so DDP's bucket allreduces proceed
while backward computes; every Work has a future (DDP needs it).
Supported: allreduce (SUM, AVG, PRODUCT, MIN, MAX), allreduce_coalesced,
broadcast, allgather, _allgather_base, allgather_coalesced, reduce_scatter,
_reduce_scatter_base, reduce, gather, scatter, alltoall_base
(all_to_all_single), alltoall, send, recv, recvAnysource (isend / irecv /
batch_isend_irecv), barrier, monitored_barrier (monitored_barrier() below:
torch's dist.monitored_barrier accepts gloo only), sequence numbers,
allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced,
_coalescing_manager, PREMUL_SUM, and ProcessGroup.split_group (torch's
dist.split_group asks for an accelerator), on contiguous dense CPU tensors.
torch 2.x: the backend is registered for the CPU device
(init_process_group("boostcomm") or "cpu:boostcomm"). The group timeout
(init_process_group(timeout=...), new_group(timeout=...)) bounds every wait.

Transport (BOOSTCOMM_TORCH_TRANSPORT, docs/PYTHON.md): a group that is the
whole world of an MPI job (mpirun) runs on MPI; any other group -- torchrun,
env:// or file:// without mpirun, and every dist.new_group subgroup --
rendezvouses through the c10d store torch hands the backend and runs over
Gloo's TCP transport, with boostcomm's algorithms on top.
"""

import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist

from . import _boostcomm as _C
from . import _state
from . import _boostcomm_torch as _T
from ._boostcomm_torch import ProcessGroupBoostcomm

__all__ = ["ProcessGroupBoostcomm", "backend_of", "init_process_group", "new_process_group", "new_store_process_group", "hook",
           "HookState", "monitored_barrier", "abort_process_group", "set_wire", "get_wire", "wire_counts"]

BACKEND = "boostcomm"


def new_process_group(rank=None, world_size=None, timeout=datetime.timedelta(minutes=30)):
    """A boostcomm ProcessGroup over the MPI world, outside torch.distributed's registry
    (collective over all MPI ranks)."""
    _C.ensure_mpi()
    size = _C.launcher_size()
    rank = _C.launcher_rank() if rank is None else rank
    world_size = size if world_size is None else world_size
    if world_size != size:
        raise ValueError(f"boostcomm backend: the process group has {world_size} ranks but the MPI world has "
                         f"{size}; boostcomm process groups span the whole world (use gloo for subgroups)")
    return _wrap(_C.Communicator.world(), rank, world_size, timeout)


def _wrap(comm, rank, world_size, timeout):
    comm = _state.register_communicator(comm)
    if _state.strategy is not None:
        comm.configure_comm_strategy(*_state.strategy)
    pg = ProcessGroupBoostcomm(comm, rank, world_size, timeout)
    pg._configure_overlap(_state.overlap["enable"], _state.overlap["stages"])
    if comm.has_shared_memory and not _nvidia_driver_present():
        # DDP asks the group's backend for its bucket memory only when
        # DDP_DISABLE_COMM_MEM is 0 (torch's default is 1). Here the buckets
        # then live in the node's shared segment and the allreduce reads and
        # writes them in place (docs/PYTHON.md). Set it to 1 to keep torch's
        # allocation. Of the other backends only NCCL offers such memory (on
        # multicast GPUs): where NVIDIA's driver is present the setting is left alone.
        os.environ.setdefault("DDP_DISABLE_COMM_MEM", "0")
    _state.register_process_group(pg)
    return pg


def _nvidia_driver_present():
    """Whether this machine has NVIDIA's driver: read from the file system, since
    torch.cuda.is_available() would initialise the driver in this process (a later
    fork could then not use CUDA)."""
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _launched_by_mpi():
    """Whether an MPI launcher (mpirun, srun with PMI) started this process: read from
    its environment, so a torchrun job never initialises MPI."""
    return any(name in os.environ for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def _store_where(store):
    """Where the c10d store lives, for error messages."""
    for s in (store, getattr(store, "underlying_store", None)):
        host, port = getattr(s, "host", None), getattr(s, "port", None)
        if host is not None and port is not None:
            return f"the c10d TCPStore at {host}:{port}"
    if "MASTER_ADDR" in os.environ:
        return (f"the c10d store at MASTER_ADDR={os.environ['MASTER_ADDR']} "
                f"MASTER_PORT={os.environ.get('MASTER_PORT', '?')}")
    return f"the c10d store ({type(store).__name__})"


def new_store_process_group(store, rank, world_size, timeout=datetime.timedelta(minutes=30)):
    """A boostcomm ProcessGroup over `world_size` processes that rendezvous through a
    c10d Store (collective over them; no MPI involved)."""
    comm = _T.store_communicator(store, _store_where(store), rank, world_size, timeout)
    return _wrap(comm, rank, world_size, timeout)


def _create(dist_backend_opts, backend_options):
    """c10d's creator (extended API, torch 2.x): torch hands the group's prefix
    store, its rank and size, timeout and the global ranks of its members. MPI
    when this group is an MPI job's whole world, else the store rendezvous
    (docs/PYTHON.md, "Transports")."""
    rank, world_size = dist_backend_opts.group_rank, dist_backend_opts.group_size
    timeout = dist_backend_opts.timeout
    ranks = list(dist_backend_opts.global_ranks_in_group)
    if len(set(ranks)) != len(ranks):
        twice = sorted({r for r in ranks if ranks.count(r) > 1})
        raise ValueError(f"boostcomm: new_group ranks {ranks} contain duplicates (rank(s) {twice} more than once); "
                         f"each rank may appear once (rank {rank})")
    mode = _T.torch_transport()
    whole_world = _launched_by_mpi() and _C.launcher_size() == world_size and (not ranks or ranks == list(range(world_size)))
    if mode == "mpi" or (mode == "auto" and whole_world):
        return new_process_group(rank, world_size, timeout)
    return new_store_process_group(dist_backend_opts.store, rank, world_size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


_master_set_here = False  # MASTER_ADDR/PORT came from us, not from the user


def init_process_group(backend=BACKEND, **kwargs):
    """dist.init_process_group with env:// settings taken from the MPI launcher.

    Sets RANK, WORLD_SIZE, LOCAL_RANK (when missing) and MASTER_ADDR /
    MASTER_PORT (rank 0's host and a free port there) so a script started by
    mpirun needs no torchrun. Works for any backend (gloo too)."""
    _C.ensure_mpi()
    rank, size = _C.launcher_rank(), _C.launcher_size()
    os.environ.setdefault("RANK", str(rank))
    os.environ.setdefault("WORLD_SIZE", str(size))
    os.environ.setdefault("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    global _master_set_here
    if _master_set_here or "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
        # A fresh port per call: a second init after destroy_process_group
        # must not reach the first one's (closed) store.
        mine = f"{socket.gethostname()}:{_free_port()}" if rank == 0 else ""
        addr, port = _C.broadcast_text(mine).rsplit(":", 1)
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, port
        _master_set_here = True
    dist.init_process_group(backend, **kwargs)


class HookState:
    """State of the DDP comm hook: the boostcomm process group it allreduces on."""

    def __init__(self, process_group=None):
        self.process_group = process_group


_hook_default_state = HookState()


def hook(state, bucket):
    """DDP comm hook: average the bucket's gradients with boostcomm.

    Usable with any DDP process group (gloo, boostcomm):
        ddp.register_comm_hook(None, boostcomm.torch.hook)
    state: None or a HookState (its process group is created on first use,
    collectively, if missing). Returns a torch.futures.Future completed with
    the averaged tensor, asynchronously (backward goes on meanwhile)."""
    if state is None:
        state = _hook_default_state
    if state.process_group is None:
        state.process_group = new_process_group()
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    tensor = bucket.buffer()
    work_future = state.process_group.allreduce([tensor], opts).get_future()
    # Completed on the process group's thread when the allreduce finishes.
    result = torch.futures.Future()

    def done(f):
        try:
            result.set_result(f.value()[0])
        except Exception as error:  # noqa: BLE001 - delivered to whoever waits
            result.set_exception(error)

    work_future.add_done_callback(done)
    return result


def backend_of(group=None):
    """The boostcomm backend (ProcessGroupBoostcomm) behind `group` (default:
    the default group) for CPU tensors, or None where that is another backend."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupBoostcomm):
        return pg
    try:
        backend = pg._get_backend(torch.device("cpu"))
    except (RuntimeError, AttributeError):
        return None
    return backend if isinstance(backend, ProcessGroupBoostcomm) else None


def _boostcomm_group(group, what):
    backend = backend_of(group)
    if backend is None:
        raise ValueError(f"boostcomm.torch.{what}: {group!r} is not a boostcomm process group")
    return backend


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """dist.monitored_barrier for boostcomm groups (torch's accepts gloo only).

    Rank 0 waits up to `timeout` (default: the group's) for every rank and
    raises naming the first rank that did not arrive (all of them with
    wait_all_ranks=True); the others raise if rank 0 does not release them."""
    pg = _boostcomm_group(group, "monitored_barrier")
    if timeout is None:
        return pg.monitored_barrier(wait_all_ranks=wait_all_ranks)
    return pg.monitored_barrier(timeout, wait_all_ranks)


def abort_process_group(group=None):
    """Abandons this rank's operations in flight on `group` (their waits and
    futures raise at once) and refuses new ones: the way out of a group whose
    peers died. Local (not collective); the group cannot be used again."""
    _boostcomm_group(group, "abort_process_group")._abort()


_WIRES = ("off", "bf16", "fp16", "auto")


def set_wire(group=None, wire="bf16", error_feedback=False):
    """Wire format of `group`'s float32 all_reduce, reduce_scatter (every
    form) and all_gather_into_tensor (with its coalesced form): the gradient
    and parameter traffic of DDP, FSDP2 and DTensor (collective over the
    group).

    wire: "bf16" or "fp16" (16-bit on the link, every sum in float32),
    "auto" (the cost model decides per call: 16-bit only where the link
    makes it pay, never on one host) or "off" (float32). It compresses
    inside the algorithm -- ring, rhd, or hier's inter-node phase -- where
    the selection runs one; a call the selection gives to native or shm
    moves float32 (wire_counts() says how calls travelled). An all-gather
    with a wire rounds every value once, its owner's copy too, so all ranks
    hold the same bits (FSDP2: the unsharded parameters are the rounded
    shards; the sharded float32 parameters the optimizer updates are not
    touched, but DTensor.full_tensor() and full state-dict gathers, which
    run all_gather_into_tensor, return them rounded: gather checkpoints on
    another group or after set_wire(group, "off")). Non-float32 tensors (float64, integers, float16, bfloat16) pass
    through with no wire rounding (the result they get without set_wire) and
    count as "off". The list all_gather, gather and all_to_all always move
    values exactly. Overrides BOOSTCOMM_WIRE_DTYPE for this group.

    error_feedback: before each compressed SUM/AVG all_reduce of a float32
    tensor, add the rounding residual this rank kept for that tensor (its
    storage) and keep the new one: v = g + e; send round(v); e = v - round(v).
    Meant for gradients (DDP's bucket buffers, which persist across steps):
    every float32 SUM/AVG allreduce of the group gets it, so run other
    reductions (metrics, losses) on another group. all_reduce only: FSDP2's
    reduce_scatter inputs are new buffers every step, with no residual to
    follow them.

    Every rank must pass the same values: a bad value on any rank raises on
    every rank (ValueError naming the argument and the rank; the others a
    RuntimeError saying another rank passed invalid arguments), and ranks that
    pass different valid values all raise RuntimeError."""
    pg = _boostcomm_group(group, "set_wire")
    rank = pg.rank()
    problem = None
    if wire not in _WIRES:
        problem = f"boostcomm.torch.set_wire: wire must be one of {', '.join(_WIRES)}, got {wire!r} (rank {rank})"
    elif not isinstance(error_feedback, bool):
        problem = (f"boostcomm.torch.set_wire: error_feedback must be a bool, got {error_feedback!r} "
                   f"(rank {rank})")
    # Agreement on the group itself (a subgroup has no MPI world to ask):
    # min and max of each rank's code in one MIN allreduce of [code, -code];
    # -1 marks bad arguments.
    code = -1 if problem else _WIRES.index(wire) * 2 + int(error_feedback)
    t = torch.tensor([code, -code], dtype=torch.int64)
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.MIN
    pg.allreduce([t], opts).wait()
    lowest, highest = int(t[0]), -int(t[1])
    if problem:
        raise ValueError(problem)
    if lowest < 0:
        raise RuntimeError(f"boostcomm.torch.set_wire: another rank of the group passed invalid arguments "
                           f"(see its error); rank {rank} passed wire={wire!r}, error_feedback={error_feedback!r}")
    if lowest != highest:
        raise RuntimeError(f"boostcomm.torch.set_wire: the ranks of the group disagree: rank {rank} has "
                           f"wire={wire!r}, error_feedback={error_feedback!r}; others have "
                           f"{sorted({_describe(lowest), _describe(highest)})}")
    pg._set_wire(wire, error_feedback)


def _describe(code):
    return f"wire={_WIRES[code // 2]!r}, error_feedback={bool(code % 2)}"


def get_wire(group=None):
    """(wire, error_feedback) of `group` (set_wire, else BOOSTCOMM_WIRE_DTYPE and False)."""
    return _boostcomm_group(group, "get_wire")._wire()


def wire_counts(group=None, reset=False):
    """How `group`'s calls that may carry a wire (all_reduce, reduce_scatter,
    all_gather_into_tensor; see set_wire) travelled since its creation (or
    the last reset): {"off": n, "bf16": n, "fp16": n}."""
    return _boostcomm_group(group, "wire_counts")._wire_counts(reset)


def is_boostcomm_group(group=None):
    """Whether `group` (default: the default group) runs on the boostcomm backend."""
    return dist.get_backend(group) == BACKEND
