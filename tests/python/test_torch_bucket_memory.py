"""DDP's gradient buckets in the node's shared memory (ddp_bucket_memory_worker.py):
by default at 2 and 3 ranks, not with the user's DDP_DISABLE_COMM_MEM=1, and not (with a
warning) where no segment can be made.
Store transport, one host; runs outside mpirun (ctest python.torch_bucket_memory)."""

import os

import pytest

import rank_launcher

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "ddp_bucket_memory_worker.py")


@pytest.mark.parametrize("size,args", [(2, ()), (3, ()), (2, ("opt-out",)), (2, ("no-room",))])
def test_buckets(size, args):
    outs = rank_launcher.launch(WORKER, size, "file", timeout=240, args=args)
    for rank, (rc, out) in enumerate(outs):
        assert rc == 0 and f"rank {rank}: ok" in out, f"rank {rank} (rc {rc}):\n{out}"
        # The fallback warns once per rank (TORCH_WARN_ONCE, on stderr), and only then.
        warned = out.count("DDP's buckets stay in ordinary memory")
        assert warned == (1 if "no-room" in args else 0), f"rank {rank}: {warned} fallback warnings:\n{out}"
