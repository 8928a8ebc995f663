"""examples/python/fsdp2_train.py under torchrun (store transport) and mpirun
(MPI transport), 3 steps of a small configuration each (the example's
defaults take 20 steps of a 0.9 M-parameter model: too slow for CI). Every
rank must print the same parameter checksum, both launchers the same losses
and checksums within float32 rounding (the same seeds and data, so the same
training), and the loss must fall. Runs outside mpirun; the mpirun case
starts its own mpirun. ctest python.fsdp2_example runs the torchrun case only
(about 10 s; the mpirun launch path, bct.init_process_group, is the one
test_torch_fsdp2.py runs under mpirun): `pytest test_fsdp2_example.py` runs
both and compares them."""

import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "python", "fsdp2_train.py")
ARGS = ["--steps", "3", "--layers", "2", "--dim", "32", "--seq", "16", "--vocab", "64", "--lr", "1e-2"]
RANKS = 2


def clean_env():
    return dict({k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX", "PMI_"))},
                OMP_NUM_THREADS="1")


def parse(text, rc, launcher):
    assert rc == 0, text
    assert f"boostcomm via {launcher}: {RANKS} ranks, mesh ({RANKS},)" in text, text
    losses = [float(x) for x in re.findall(r"step +\d+ +loss (\S+) +step time", text)]
    assert len(losses) == 3 and losses[-1] < losses[0], text
    assert "median step time" in text, text
    found = re.findall(r"rank (\d+): last loss \S+ \(own batch\), parameter checksum (\S+)", text)
    sums = {int(r): float(c) for r, c in found}
    assert sorted(sums) == list(range(RANKS)), text
    assert len(set(sums.values())) == 1, f"ranks disagree on the parameters: {sums}\n{text}"
    return losses, sums[0]


_runs = {}


def run(launcher, tmp_path):
    if launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={RANKS}",
               "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path), SCRIPT, *ARGS]
        env = clean_env()
    else:
        cmd = ["mpirun", "-np", str(RANKS), "--oversubscribe", "--bind-to", "none", sys.executable, SCRIPT, *ARGS]
        env = dict(clean_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    _runs[launcher] = parse(done.stdout, done.returncode, launcher)


def test_torchrun(tmp_path):
    run("torchrun", tmp_path)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_mpirun(tmp_path):
    run("mpirun", tmp_path)
    if "torchrun" in _runs:
        (losses_t, sum_t), (losses_m, sum_m) = _runs["torchrun"], _runs["mpirun"]
        assert all(abs(a - b) <= 1e-4 for a, b in zip(losses_t, losses_m)), (losses_t, losses_m)
        assert abs(sum_t - sum_m) <= 1e-5 * max(1.0, abs(sum_t)), (sum_t, sum_m)
