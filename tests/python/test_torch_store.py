"""The boostcomm c10d backend without mpirun: ranks started as plain processes
that rendezvous through torch's store (env:// with MASTER_ADDR / MASTER_PORT
set by hand, and file://), at 2 and 3 ranks. store_worker.py checks every
collective against a float64 reference on every rank and subgroups; this file
launches it, and checks the store transport's errors in-process.
Runs outside mpirun (ctest python.torch_store)."""

import datetime
import os
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist

import boostcomm
import boostcomm.torch as bct
import rank_launcher

HERE = os.path.dirname(os.path.abspath(__file__))


def launch(size, init, extra_env=None, timeout=240, fresh=False):
    return rank_launcher.launch(os.path.join(HERE, "store_worker.py"), size, init, extra_env, timeout, fresh=fresh)


@pytest.mark.parametrize("init", ["env", "file"])
@pytest.mark.parametrize("size", [2, 3])
# "": the built-in table (shm on one host); shm forced for every collective
# that has it (subgroups too); native: Gloo's own collectives. ring on this
# transport: tests/unit/test_gloo_transport.cc.
@pytest.mark.parametrize("algo", ["", "shm", "native"])
def test_collectives_without_mpirun(size, init, algo):
    if algo and (size, init) != (3, "env"):
        pytest.skip("forced algorithms: one launch shape is enough")
    # The by-hand recipes at 2 ranks start fresh interpreters, as a user's shell does,
    # and so cover a whole interpreter exit; the others fork (rank_launcher).
    outs = launch(size, init, {"BOOSTCOMM_ALGO": algo} if algo else None, fresh=(size == 2 and not algo))
    for rank, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {rank}: ok" in out, f"rank {rank} (rc {rc}):\n{out}"


def test_rank_that_never_joins_is_named(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 2)
    t0 = time.monotonic()
    with pytest.raises(Exception) as err:
        bct.new_store_process_group(store, 0, 2, datetime.timedelta(seconds=2))
    elapsed = time.monotonic() - t0
    text = str(err.value)
    assert "rank 1 of 2 did not join" in text and "FileStore" in text, text
    assert elapsed < 30, elapsed


def test_world_size_disagreement(tmp_path):
    path = str(tmp_path / "store")
    code = ("import datetime, sys, torch.distributed as dist, boostcomm.torch as bct\n"
            f"s = dist.FileStore({path!r}, 2)\n"
            "try:\n"
            "    bct.new_store_process_group(s, int(sys.argv[1]), int(sys.argv[2]), datetime.timedelta(seconds=20))\n"
            "except Exception as e:\n"
            "    print('ERROR', e); sys.exit(3)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}
    a = subprocess.Popen([sys.executable, "-c", code, "0", "2"], env=env, stdout=subprocess.PIPE, text=True)
    b = subprocess.Popen([sys.executable, "-c", code, "1", "3"], env=env, stdout=subprocess.PIPE, text=True)
    out_a, _ = a.communicate(timeout=60)
    out_b, _ = b.communicate(timeout=60)
    assert a.returncode == 3 and "world size 2 but rank 1 was given 3" in out_a, out_a
    assert b.returncode == 3 and "world size 3 but rank 0 was given 2" in out_b, out_b


@pytest.mark.parametrize("nproc", [2, 3])
def test_ddp_under_torchrun(nproc, tmp_path):
    # Debian's torchrun (torch 1.13 on Python 3.11) needs --redirects 1 --tee 1
    # (docs/PYTHON.md, "torchrun").
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path), os.path.join(HERE, "store_ddp.py")]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    for rank in range(nproc):
        assert f"rank {rank}: ok" in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout
