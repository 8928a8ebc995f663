"""The c10d ops beyond the collectives on the boostcomm backend, without
mpirun (store transport): c10d_ops_worker.py runs them on every rank and
checks them against references; this file launches it at 2, 3 and 4 ranks
and the failure cases (group timeout, a rank missing from monitored_barrier,
abort, a tensor one rank's checks reject) at 2 or 3; c10d_lists_worker.py checks the list collectives
(allreduce_coalesced, all_gather, all_gather_coalesced, reduce_scatter) at 2
and 3 ranks on the default selection (shm) and on ring. Runs outside mpirun
(ctest python.torch_c10d_ops)."""

import os

import pytest

import rank_launcher

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "c10d_ops_worker.py")
LISTS = os.path.join(HERE, "c10d_lists_worker.py")


def run(size, part, timeout=240, worker=WORKER, env=None, fresh=False):
    outs = rank_launcher.launch(worker, size, "file", timeout=timeout, args=(part,), extra_env=env, fresh=fresh)
    for rank, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {rank}: ok" in out, f"{part}, rank {rank} (rc {rc}):\n{out}"


@pytest.mark.parametrize("size", [2, 3, 4])
def test_ops(size):
    run(size, "ops", fresh=(size == 2))  # 2 ranks: fresh interpreters, a whole exit after the ops


@pytest.mark.parametrize("part", ["timeout", "monitored", "abort", "rejected"])
def test_failure_cases(part):
    run(3 if part != "abort" else 2, part, timeout=120)


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("algo", ["default", "ring"])
def test_list_collectives(size, algo):
    env = {} if algo == "default" else {"BOOSTCOMM_ALGO": "allreduce:ring,allgather:ring,reduce_scatter:ring"}
    run(size, algo, worker=LISTS, env=env)
