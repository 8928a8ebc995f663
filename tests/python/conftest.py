"""Shared fixtures of the Python tests. Every test file runs under
`mpirun -np 2` (see tests/python/CMakeLists.txt): every rank runs the same
tests in the same order, so collectives match. A test must not return early
on one rank only (the other would wait in its next collective)."""

import numpy as np
import pytest

import boostcomm


@pytest.fixture(scope="session")
def comm():
    return boostcomm.comm_init(boostcomm._C.launcher_rank(), boostcomm._C.launcher_size(), device_id=0)


def rank_data(rank, count, dtype, salt=0):
    """Deterministic per-rank input: small integers, exact in every dtype."""
    rng = np.random.default_rng(1000 * rank + salt)
    return rng.integers(0, 7, size=count).astype(dtype)


def reference(size, count, dtype, op="sum", salt=0):
    """The reduction of every rank's rank_data, computed in float64."""
    stacked = np.stack([rank_data(r, count, np.float64, salt) for r in range(size)])
    return {"sum": stacked.sum(0), "max": stacked.max(0), "min": stacked.min(0),
            "avg": stacked.mean(0), "prod": stacked.prod(0)}[op]
