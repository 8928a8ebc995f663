"""torch 2.x's CPU-backend surface on boostcomm (c10d_torch2_worker.py) at a
power of two and not, without mpirun (store transport), and under mpirun
(MPI transport). Runs outside mpirun (ctest python.torch2_backend)."""

import os
import shutil
import subprocess
import sys

import pytest

import rank_launcher

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "c10d_torch2_worker.py")


@pytest.mark.parametrize("size", [2, 3])
def test_store_transport(size):
    # 2 ranks: fresh interpreters (a whole interpreter exit after torch 2.x's surface); 3: forked.
    outs = rank_launcher.launch(WORKER, size, "file", timeout=300, fresh=(size == 2))
    for rank, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {rank}: ok" in out, f"rank {rank} (rc {rc}):\n{out}"
