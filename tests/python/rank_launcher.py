"""Starts N plain processes (no mpirun) that rendezvous through torch's store:
env:// (MASTER_ADDR / MASTER_PORT) or file:// (BC_TEST_INIT). Shared by the
store-transport tests; each rank runs `script` with RANK / WORLD_SIZE set."""

import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, size, init="file", extra_env=None, timeout=240, args=()):
    """Returns [(returncode, output)] per rank; kills every rank at `timeout` s."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}
    if init == "env":
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    else:
        path = tempfile.mktemp(prefix="bc_store_")
        base["BC_TEST_INIT"] = "file://" + path
    base.update(extra_env or {})
    procs = []
    for rank in range(size):
        env = dict(base, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, script, *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += "\n(killed: timeout)"
        outs.append((p.returncode, out))
    return outs
