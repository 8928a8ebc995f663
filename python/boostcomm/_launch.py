"""Which launcher started this process, and how comm_init joins the others.

- An MPI launcher (mpirun, srun with PMI: its environment variables say so):
  the MPI world, as every boostcomm tool.
- torchrun, or env:// by hand (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
  no MPI launcher), or a program that already called
  torch.distributed.init_process_group without mpirun: torch's c10d store for
  the rendezvous and Gloo's TCP pairs for the data (the transport of
  boostcomm.torch.new_store_process_group). Open MPI 4.1 cannot connect
  separately started singletons, so such a process never initialises MPI.
- Neither: one process (an MPI singleton), as before.

The store path needs torch (torchrun implies it). It reuses the default
group's store when torch.distributed is initialised, else it runs torch's own
env:// rendezvous: under torchrun that is a client of the agent's store, so a
later init_process_group works too; by hand (no torchrun) rank 0 would host
the store at MASTER_PORT, which a later init_process_group would then find
taken: call init_process_group first there.
"""

import datetime
import os

# Deadline of a store rendezvous and of the argument check that precedes it
# (torch's default process-group timeout).
STORE_TIMEOUT = datetime.timedelta(minutes=30)

_MPI_LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
_ENV_RENDEZVOUS_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def launched_by_mpi():
    return any(name in os.environ for name in _MPI_LAUNCHER_VARS)


def _torch_initialised():
    import sys
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def transport():
    """'mpi' or 'tcp' (c10d store + Gloo's TCP pairs): how comm_init joins the job."""
    if launched_by_mpi():
        return "mpi"
    if _torch_initialised() or all(name in os.environ for name in _ENV_RENDEZVOUS_VARS):
        return "tcp"
    return "mpi"


class StoreJob:
    """The c10d store this process's communicators rendezvous through, with
    its rank and size (torchrun / env:// / an initialised torch.distributed)."""

    def __init__(self):
        import torch.distributed as dist
        import boostcomm.torch as bct  # the store transport lives in the torch module
        self._bct = bct
        self._generation = 0
        if dist.is_initialized():
            self.store = dist.distributed_c10d._get_default_store()
            self.rank, self.size = dist.get_rank(), dist.get_world_size()
            self.source = "torch.distributed's default group"
        else:
            self.store, self.rank, self.size = next(dist.rendezvous("env://", timeout=STORE_TIMEOUT))
            self.source = "env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"
        self.where = bct._store_where(self.store)

    def _prefixed(self, what):
        import torch.distributed as dist
        self._generation += 1  # the same sequence on every rank: one per collective creation
        return dist.PrefixStore(f"boostcomm/{what}/{self._generation}/", self.store)

    def agree(self, error, what):
        """Collective over the store: raise on every rank when any rank's arguments
        are bad (the others get a MismatchError naming those ranks). Returns the
        prefix store the next communicator of this call uses."""
        from . import MismatchError
        store = self._prefixed(what)
        store.set(f"check/{self.rank}", "" if error is None else str(error))
        store.wait([f"check/{r}" for r in range(self.size)], STORE_TIMEOUT)
        failed = [r for r in range(self.size) if r != self.rank and store.get(f"check/{r}")]
        if error is not None:
            raise error
        if failed:
            raise MismatchError(f"[boostcomm rank {self.rank}] {what}: rank(s) {failed} passed invalid "
                                "arguments (see their error)")
        return store

    def communicator(self, what, store=None):
        """A new communicator over every rank of the job (collective)."""
        store = self._prefixed(what) if store is None else store
        return self._bct._T.store_communicator(store, self.where, self.rank, self.size, STORE_TIMEOUT)
