"""Starts N plain processes (no mpirun) that rendezvous through torch's store:
env:// (MASTER_ADDR / MASTER_PORT) or file:// (BC_TEST_INIT). Shared by the
store-transport tests; each rank runs `script` with RANK / WORLD_SIZE set.

Test workers (fresh=False, the default) are forked from a multiprocessing
fork server that has imported torch once: a fresh interpreter spends ~2 s
of CPU importing torch, a forked rank starts in ~0.1 s, and these tests start
~50 ranks. Each rank still is its own process with its own environment (set
before the script runs; only what a library read when torch was imported,
such as OpenMP's OMP_NUM_THREADS, is the server's), runs the script as
__main__, and exits with its status after its atexit handlers. boostcomm is
never imported by the server: each rank loads it afresh. fresh=True starts
plain interpreters (examples: what a user's launch does)."""

import atexit
import multiprocessing
import os
import runpy
import socket
import subprocess
import sys
import tempfile
import time
import traceback

_SERVER = multiprocessing.get_context("forkserver")
_SERVER.set_forkserver_preload(["torch", "torch.distributed"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_rank(script, args, env, output):
    """A forked rank: the script as __main__, its output into `output`."""
    code = 1
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [script, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python3 script` sets it
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class _Forked:
    """A forked rank with Popen's communicate / kill / returncode."""

    def __init__(self, script, args, env):
        fd, self._output = tempfile.mkstemp(prefix="bc_rank_", suffix=".log")
        os.close(fd)
        self._process = _SERVER.Process(target=_run_rank, args=(script, list(args), env, self._output))
        self._process.start()
        self.returncode = None

    def communicate(self, timeout=None):
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("rank", timeout)
        return self._collect(), None

    def kill(self):
        self._process.kill()

    def _collect(self):
        self._process.join()
        self.returncode = self._process.exitcode
        with open(self._output, errors="replace") as f:
            out = f.read()
        os.unlink(self._output)
        return out


def launch(script, size, init="file", extra_env=None, timeout=240, args=(), fresh=False):
    """Returns [(returncode, output)] per rank; kills every rank at `timeout` s."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}
    store_file = None
    if init == "env":
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    elif init == "file":
        store_file = tempfile.mktemp(prefix="bc_store_")
        base["BC_TEST_INIT"] = "file://" + store_file
    extra_env = extra_env or {}
    # What torch, OpenMP or Python read at start-up is the fork server's: such a
    # setting needs a fresh interpreter.
    early = [k for k in extra_env if k.startswith(("TORCH_", "OMP_", "PYTHON", "KMP_"))]
    assert fresh or not early, f"rank_launcher: {early} are read at start-up: launch(..., fresh=True)"
    base.update(extra_env)
    procs = []
    try:
        for rank in range(size):
            env = dict(base, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank))
            if fresh:
                procs.append(subprocess.Popen([sys.executable, script, *args], env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            else:
                procs.append(_Forked(script, args, env))
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
    finally:  # an exception half-way (a failed start): no rank or output file left behind
        for p in procs:
            if p.returncode is None:
                p.kill()
                p.communicate()
        if store_file and os.path.exists(store_file):  # torch's FileStore leaves it behind
            os.unlink(store_file)
