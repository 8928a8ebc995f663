"""boostcomm beside mpi4py: mpi4py initialises MPI first; boostcomm uses that
MPI, both libraries' collectives work interleaved, and boostcomm does not
take over MPI's finalisation (mpi4py finalises at exit; a second
MPI_Finalize, or none, would make mpirun report a failure)."""

from mpi4py import MPI  # noqa: I001 - must come first: it initialises MPI

import numpy as np

import boostcomm


def test_boostcomm_beside_mpi4py():
    assert MPI.Is_initialized()
    comm = boostcomm.comm_init(MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size(), 0)
    assert not boostcomm._C.mpi_initialized_here()
    x = np.full(1000, comm.rank + 1.0)
    boostcomm.all_reduce(x)
    y = MPI.COMM_WORLD.allreduce(comm.rank + 1, op=MPI.SUM)
    assert np.all(x == y)
    boostcomm.comm_finalize()
    assert not MPI.Is_finalized()
    assert MPI.COMM_WORLD.allreduce(1) == comm.size
