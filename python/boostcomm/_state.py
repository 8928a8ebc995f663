"""Process-wide state of the boostcomm package: the default communicator,
the live boostcomm process groups, the settings they inherit, and the
shutdown order at interpreter exit.

Shutdown order matters: every communicator frees its MPI communicator and
shared-memory windows (collective calls), and MPI_Finalize must come after
all of them; c10d keeps process groups alive until interpreter teardown,
after Python's atexit handlers, so their threads are stopped here first, and
communicators are finalised here (or by an explicit comm_finalize), never by
a garbage-collected destructor. MPI is finalised only if this package initialised it
(an application that ran MPI_Init itself, or imported mpi4py first, keeps
ownership of MPI).
"""

import atexit
import threading
import weakref

from . import _boostcomm as _C

_lock = threading.Lock()
default_comm = None          # the comm_init communicator
transport = None             # how comm_init joined the job: "mpi", or "tcp" (c10d store + Gloo)
store_job = None             # _launch.StoreJob when transport is "tcp"
strategy = None              # last configure_comm_strategy arguments (tuple)
overlap = {"enable": True, "stages": 2, "buffer_strategy": "segment_list", "sync_gradients": False}
_process_groups = []         # ProcessGroupBoostcomm objects (strong references, see register_process_group)
_communicators = []          # every communicator we made, in creation order (strong references)
_engines = []                # weak references to the OverlapEngines (get_overlap_stats reads them)


def _ref(obj):
    try:
        return weakref.ref(obj)
    except TypeError:  # a type without weak references: keep it alive
        return lambda: obj


def register_process_group(pg):
    """Kept until exit: torch 2.x holds a group's backend in C++ only, so the
    Python object the creator returned (and a weak reference to it) would go
    while the backend lives on; settings (configure_overlap) and statistics
    must still reach it, and its thread must be stopped at exit. A destroyed
    group (torch calls its shutdown) refuses new ops and costs no thread."""
    with _lock:
        _process_groups.append(pg)


def register_communicator(comm):
    """Keep `comm` alive until exit: finalising a communicator is collective
    (shared-memory windows are freed with MPI_Win_free), so it must not happen
    in a destructor the garbage collector times differently on each rank."""
    with _lock:
        _communicators.append(comm)
    return comm


def new_communicator(what):
    """Another communicator over the comm_init job, for a client that must not
    share the default one (collective; kept until exit)."""
    from . import _boostcomm as C
    comm = store_job.communicator(what) if transport == "tcp" else C.Communicator.world()
    register_communicator(comm)
    if strategy is not None:  # configure_comm_strategy's settings, as for process groups
        comm.configure_comm_strategy(*strategy)
    return comm


def register_engine(engine):
    with _lock:
        _engines[:] = [r for r in _engines if r() is not None]
        _engines.append(_ref(engine))


def engines():
    """The live OverlapEngines, oldest first."""
    with _lock:
        return [e for e in (r() for r in _engines) if e is not None]


def process_groups():
    with _lock:
        return list(_process_groups)


@atexit.register
def _shutdown():
    global default_comm
    for pg in process_groups():
        try:
            pg._shutdown()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    for comm in list(_communicators):  # creation order: the same on every rank
        try:
            if not comm.finalized:
                comm.finalize()
        except Exception:  # noqa: BLE001
            pass
    default_comm = None
    try:
        _C.finalize_mpi_if_ours()
    except Exception:  # noqa: BLE001
        pass
