"""examples/python/torchvision_train.py under every launch recipe of
docs/PYTHON.md: torchrun, env:// by hand, file://, and mpirun. A few steps of
torchvision's resnet18 on the digits each; every rank must end with rank 0's
weights and exit 0. Runs outside mpirun (ctest python.torchvision_example);
the mpirun case starts its own mpirun."""

import os
import shutil
import subprocess
import sys

import pytest

import rank_launcher

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "python", "torchvision_train.py")
ARGS = ["--steps", "3", "--batch", "8", "--size", "32"]


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))}


def check(text, rc, ranks, launcher):
    for rank in range(ranks):
        assert f"rank {rank}: weights identical to rank 0's" in text, text
    assert f"resnet18 on {ranks} ranks via {launcher}, backend boostcomm" in text, text
    assert rc == 0, text


@pytest.mark.parametrize("init", ["env", "file"])
def test_by_hand(init, tmp_path):
    args = ARGS + (["--init", "file://" + str(tmp_path / "store")] if init == "file" else [])
    outs = rank_launcher.launch(SCRIPT, 2, "env" if init == "env" else "none", None, 240, args, fresh=True)
    text = "\n".join(out for _, out in outs)
    check(text, max(rc for rc, _ in outs), 2, "env://" if init == "env" else "file://")


def test_torchrun(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path), SCRIPT, *ARGS]
    done = subprocess.run(cmd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=240)
    check(done.stdout, done.returncode, 2, "torchrun")


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_mpirun():
    env = dict(clean_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", sys.executable, SCRIPT, *ARGS]
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    check(done.stdout, done.returncode, 2, "mpirun")
