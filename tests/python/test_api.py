"""The documented Python API on numpy arrays and CPU torch tensors: results
checked against a float64 reference, zero-copy, and errors for bad arguments."""

import gc
import weakref

import numpy as np
import pytest
import torch

import boostcomm
from conftest import rank_data, reference

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]


def test_comm_init_matches_launcher(comm):
    assert comm.rank == boostcomm._C.launcher_rank()
    assert comm.size == boostcomm._C.launcher_size()
    # Same arguments again: the same communicator, no new collective state.
    again = boostcomm.comm_init(comm.rank, comm.size, 0)
    assert again._native is comm._native


def test_comm_init_bad_device_lists_available(comm):
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"device 'npu' .*available: cpu"):
        boostcomm.comm_init(comm.rank, comm.size, 0, device="npu")
    with pytest.raises(ValueError, match=r"device 'cuda'"):  # InvalidArgumentError is a ValueError
        boostcomm.comm_init(comm.rank, comm.size, 0, device="cuda")


def test_comm_init_bad_rank_or_size(comm):
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"world_size=5, but the launcher started"):
        boostcomm.comm_init(comm.rank, 5, 0)
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"rank=.*launcher started this process as rank"):
        boostcomm.comm_init((comm.rank + 1) % comm.size if comm.size > 1 else 7, comm.size, 0)


def test_comm_init_one_bad_rank_fails_everywhere(comm):
    # Only rank 0 passes a bad device; the others must raise too, not hang.
    device = "npu" if comm.rank == 0 else "cpu"
    expected = boostcomm.InvalidArgumentError if comm.rank == 0 else boostcomm.MismatchError
    with pytest.raises(expected):
        boostcomm.comm_init(comm.rank, comm.size, 0, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_all_reduce_numpy(comm, dtype, op):
    for count in (0, 1, 1000, 70000):
        x = rank_data(comm.rank, count, dtype)
        out = boostcomm.all_reduce(x, op=op)
        assert out is x  # in place
        np.testing.assert_array_equal(x.astype(np.float64), reference(comm.size, count, np.float64, op))


def test_all_reduce_avg_and_output(comm):
    x = rank_data(comm.rank, 513, np.float64)
    out = np.empty_like(x)
    boostcomm.all_reduce(x, op="avg", output=out)
    np.testing.assert_allclose(out, reference(comm.size, 513, np.float64, "avg"), rtol=1e-12)
    np.testing.assert_array_equal(x, rank_data(comm.rank, 513, np.float64))  # input untouched


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                   torch.int64, torch.uint8])
def test_all_reduce_torch_zero_copy(comm, dtype):
    base = torch.from_numpy(rank_data(comm.rank, 4096, np.float64)).to(dtype)
    ptr = base.data_ptr()
    boostcomm.all_reduce(base)
    assert base.data_ptr() == ptr
    np.testing.assert_array_equal(base.double().numpy(), reference(comm.size, 4096, np.float64))


def test_numpy_zero_copy_view(comm):
    # A view into a bigger array: the collective writes exactly that window.
    big = np.zeros(100, np.float32)
    window = big[10:20]
    window[:] = comm.rank + 1
    boostcomm.all_reduce(window)
    assert np.all(big[10:20] == sum(range(1, comm.size + 1)))
    assert np.all(big[:10] == 0) and np.all(big[20:] == 0)


@pytest.mark.parametrize("algorithm", [None, "ring", "native"])
def test_all_reduce_algorithms(comm, algorithm):
    x = rank_data(comm.rank, 10000, np.float32, salt=3)
    boostcomm.all_reduce(x, algorithm=algorithm)
    np.testing.assert_array_equal(x, reference(comm.size, 10000, np.float32, salt=3))


def test_wire_format(comm):
    comm.set_wire_format("bf16")
    assert comm.wire_format == "bf16"
    # Small integers: exact in bfloat16, so the compressed ring matches exactly.
    x = rank_data(comm.rank, 10000, np.float32, salt=4)
    work = boostcomm.all_reduce(x, algorithm="ring", async_op=True)
    work.wait()
    assert work.wire_format == "bf16"
    np.testing.assert_array_equal(x, reference(comm.size, 10000, np.float32, salt=4))
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"wire: unknown 'fp8'"):
        comm.set_wire_format("fp8")
    comm.set_wire_format("off")
    assert comm.wire_format_of(1 << 20) == "off"


def test_all_gather(comm):
    x = rank_data(comm.rank, 77, np.int64)
    out = boostcomm.all_gather(x)
    assert out.shape == (comm.size, 77)
    for r in range(comm.size):
        np.testing.assert_array_equal(out[r], rank_data(r, 77, np.int64))
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3) + comm.rank
    gathered = boostcomm.all_gather(t)
    assert isinstance(gathered, torch.Tensor) and gathered.shape == (comm.size, 2, 3)
    for r in range(comm.size):
        assert torch.equal(gathered[r], torch.arange(6, dtype=torch.float32).reshape(2, 3) + r)


def test_broadcast(comm):
    for root in range(comm.size):
        x = np.full(300, comm.rank, np.float32)
        boostcomm.broadcast(x, root=root)
        assert np.all(x == root)


def test_reduce_scatter(comm):
    n = 64 * comm.size
    x = rank_data(comm.rank, n, np.float32)
    out = boostcomm.reduce_scatter(x)
    ref = reference(comm.size, n, np.float32)
    np.testing.assert_array_equal(out, ref[comm.rank * 64:(comm.rank + 1) * 64])


def test_barrier_and_async(comm):
    boostcomm.barrier()
    x = rank_data(comm.rank, 5000, np.float32)
    work = boostcomm.all_reduce(x, async_op=True)
    assert isinstance(work, boostcomm.Work)
    work.wait(timeout=30)
    np.testing.assert_array_equal(x, reference(comm.size, 5000, np.float32))
    boostcomm.barrier(async_op=True).wait()


def test_errors_for_bad_arguments(comm):
    with pytest.raises(boostcomm.InvalidArgumentError, match="unknown reduce op 'median'"):
        boostcomm.all_reduce(np.ones(4, np.float32), op="median")
    with pytest.raises(boostcomm.InvalidArgumentError, match="unsupported dtype 'torch.int8'.*supported: float32"):
        boostcomm.all_reduce(torch.ones(4, dtype=torch.int8))
    with pytest.raises(boostcomm.InvalidArgumentError, match="unsupported element type"):
        boostcomm.all_reduce(np.ones(4, np.complex64))
    with pytest.raises(boostcomm.InvalidArgumentError, match="not contiguous"):
        boostcomm.all_reduce(torch.ones(4, 4).t())
    with pytest.raises(boostcomm.InvalidArgumentError, match="not C-contiguous"):
        boostcomm.all_reduce(np.ones((4, 4), np.float32)[:, 1])
    with pytest.raises(boostcomm.InvalidArgumentError, match="device 'meta'; this build of boostcomm supports: cpu"):
        boostcomm.all_reduce(torch.empty(4, device="meta"))
    ro = np.ones(4, np.float32)
    ro.setflags(write=False)
    with pytest.raises(boostcomm.InvalidArgumentError, match="read-only"):
        boostcomm.all_reduce(ro)
    with pytest.raises(boostcomm.InvalidArgumentError, match="expected a numpy array"):
        boostcomm.all_reduce([1.0, 2.0])
    with pytest.raises(boostcomm.InvalidArgumentError):
        boostcomm.all_reduce(np.ones(4, np.int32), op="avg")  # integer average would truncate
    with pytest.raises(boostcomm.InvalidArgumentError, match="not a multiple of world_size"):
        boostcomm.reduce_scatter(np.ones(comm.size * 3 + 1, np.float32))
    with pytest.raises(boostcomm.InvalidArgumentError):
        boostcomm.broadcast(np.ones(4, np.float32), root=comm.size)
    # The communicator still works after all of these (none reached the wire).
    x = np.ones(8, np.float32)
    boostcomm.all_reduce(x)
    assert np.all(x == comm.size)


def test_gradient_group(comm):
    grads = [rank_data(comm.rank, n, np.float32, salt=i) for i, n in enumerate((10, 1000, 3, 20000, 1))]
    grads.append(torch.from_numpy(rank_data(comm.rank, 500, np.float64, salt=9)))
    group = boostcomm.GradientGroup(grads, bucket_bytes=16 * 1024)
    for step in range(2):
        for i, g in enumerate(grads):
            src = rank_data(comm.rank, g.shape[0], np.float64, salt=9 if i == 5 else i)
            if isinstance(g, torch.Tensor):
                g.copy_(torch.from_numpy(src))
            else:
                g[:] = src
        group.all_reduce()
        for i, g in enumerate(grads):
            got = g.numpy() if isinstance(g, torch.Tensor) else g
            np.testing.assert_array_equal(got, reference(comm.size, got.shape[0], np.float64,
                                                          salt=9 if i == 5 else i))
    stats = group.stats()
    assert stats["tensors"] == 6 and stats["steps"] == 2
    assert stats["collectives_per_step"] < stats["per_tensor_collectives"]
    assert "bucket" in group.describe().lower()


@pytest.mark.parametrize("algorithm", [None, "ring", "native"])
def test_all_reduce_many(comm, algorithm):
    # Odd lengths, an empty one, numpy and torch mixed (one dtype): one
    # collective, in place, equal to the per-tensor reference.
    counts = (7, 0, 1, 1021, 13, 65537, 2)
    tensors = [rank_data(comm.rank, n, np.float32, salt=i) for i, n in enumerate(counts)]
    tensors[3] = torch.from_numpy(tensors[3])
    out = boostcomm.all_reduce_many(tensors, algorithm=algorithm)
    assert out[3] is tensors[3]
    for i, t in enumerate(tensors):
        got = t.numpy() if isinstance(t, torch.Tensor) else t
        np.testing.assert_array_equal(got, reference(comm.size, counts[i], np.float64, salt=i))
    work = boostcomm.all_reduce_many(tensors[:2], op="max", async_op=True)
    work.wait()


def test_broadcast_many(comm):
    root = comm.size - 1
    tensors = [np.full(n, comm.rank, dtype=np.float64) for n in (5, 0, 1, 4099)]
    tensors[0] = torch.from_numpy(tensors[0])
    boostcomm.broadcast_many(tensors, root=root)
    for t in tensors:
        got = t.numpy() if isinstance(t, torch.Tensor) else t
        np.testing.assert_array_equal(got, np.full(got.shape, root, dtype=np.float64))


@pytest.mark.parametrize("algorithm", [None, "ring"])
def test_all_gather_and_reduce_scatter_many(comm, algorithm):
    # One allgather / one reduce_scatter over lists of odd lengths (an empty
    # one included), numpy and torch mixed: each output equals its
    # per-tensor reference, block by block.
    counts = (7, 0, 1, 1021, 13)
    mine = [rank_data(comm.rank, n, np.float32, salt=i) for i, n in enumerate(counts)]
    mine[3] = torch.from_numpy(mine[3])
    gathered = boostcomm.all_gather_many(mine, algorithm=algorithm)
    for i, n in enumerate(counts):
        got = gathered[i].numpy() if isinstance(gathered[i], torch.Tensor) else gathered[i]
        assert got.shape == (comm.size, n)
        for r in range(comm.size):
            np.testing.assert_array_equal(got[r], rank_data(r, n, np.float32, salt=i))
    inputs = [rank_data(comm.rank, comm.size * n, np.float32, salt=10 + i) for i, n in enumerate(counts)]
    outputs = [np.full(n, -1.0, dtype=np.float32) for n in counts]
    work = boostcomm.reduce_scatter_many(inputs, outputs, algorithm=algorithm, async_op=True)
    work.wait()
    for i, n in enumerate(counts):
        full = reference(comm.size, comm.size * n, np.float64, salt=10 + i)
        np.testing.assert_array_equal(outputs[i], full[comm.rank * n:(comm.rank + 1) * n])
    # A count that is not world_size x the input's on one rank: every rank raises.
    bad = [np.zeros(comm.size * 4 - (1 if comm.rank == 0 else 0), dtype=np.float32)]
    with pytest.raises(boostcomm.InvalidArgumentError, match=r"recv\[0\]\.count is|rank\(s\) 0"):
        boostcomm.all_gather_many([np.zeros(4, dtype=np.float32)], bad)


def test_all_reduce_many_errors_on_every_rank(comm):
    a = np.zeros(100, dtype=np.float32)
    if comm.rank == 0:
        # Overlapping views of one array on rank 0 only: every rank raises.
        with pytest.raises(boostcomm.InvalidArgumentError, match="overlap"):
            boostcomm.all_reduce_many([a[:60], a[50:]])
    else:
        with pytest.raises(boostcomm.InvalidArgumentError, match="rank"):
            boostcomm.all_reduce_many([a[:60], a[60:]])
    with pytest.raises(boostcomm.MismatchError):
        boostcomm.all_reduce_many([a[:10 + comm.rank]])
    with pytest.raises(boostcomm.InvalidArgumentError, match="one dtype"):
        boostcomm.all_reduce_many([a, np.zeros(3, dtype=np.float64)])


@pytest.mark.parametrize("mode", ["list", "bucket_view", "pack_buckets"])
def test_gradient_group_modes(comm, mode):
    grads = [torch.from_numpy(rank_data(comm.rank, n, np.float32, salt=i)).reshape(-1, 1)
             for i, n in enumerate((10, 1000, 3, 20000))]
    grads.append(torch.zeros(4, 3, dtype=torch.bfloat16) + comm.rank)
    group = boostcomm.GradientGroup(grads, bucket_bytes=16 * 1024, bucket_view=mode == "bucket_view",
                                    pack_buckets=mode == "pack_buckets")
    assert (mode.replace("_", "-") if mode != "pack_buckets" else "copy") in group.describe()
    tensors = group.tensors
    if mode == "bucket_view":
        # New tensors over the group's memory, same shapes/dtypes, initial contents copied.
        for t, g in zip(tensors, grads):
            assert t.data_ptr() != g.data_ptr() and t.shape == g.shape and t.dtype == g.dtype
            assert torch.equal(t, g)
    else:
        assert tensors is not grads and all(t is g for t, g in zip(tensors, grads))
    group.all_reduce()
    for i, t in enumerate(tensors[:4]):
        np.testing.assert_array_equal(t.numpy().ravel(), reference(comm.size, t.numel(), np.float64, salt=i))
    assert torch.equal(tensors[4].float(), torch.full((4, 3), float(sum(range(comm.size)))))


def test_collective_fusion(comm):
    size, rank = comm.size, comm.rank
    grad = rank_data(rank, 1000, np.float32, salt=1)
    grad2 = rank_data(rank, 10, np.float32, salt=2)
    shard = rank_data(rank, 16, np.float32, salt=3)
    full = np.zeros(16 * size, np.float32)
    src = np.full(5, 42.0 if rank == 0 else -1.0, np.float32)
    dst = np.zeros(5, np.float32)
    rs_in = rank_data(rank, 8 * size, np.float32, salt=4)
    rs_out = np.zeros(8, np.float32)
    with boostcomm.collective_fusion() as cf:
        cf.register_allreduce(grad, grad)
        cf.register_allreduce(grad2)
        cf.register_allgather(shard, full)
        cf.register_broadcast(src, dst, root=0)
        cf.register_reduce_scatter(rs_in, rs_out)
        plan = cf.describe_plan()
    assert plan
    np.testing.assert_array_equal(grad, reference(size, 1000, np.float32, salt=1))
    np.testing.assert_array_equal(grad2, reference(size, 10, np.float32, salt=2))
    for r in range(size):
        np.testing.assert_array_equal(full[16 * r:16 * (r + 1)], rank_data(r, 16, np.float32, salt=3))
    assert np.all(dst == 42.0)
    np.testing.assert_array_equal(rs_out, reference(size, 8 * size, np.float32, salt=4)[8 * rank:8 * (rank + 1)])
    stats = cf.stats()
    assert stats["requests"] == 5 and stats["launches_after"] <= stats["launches_before"]


def test_collective_fusion_dependency(comm):
    # allreduce, then allgather of what it produced.
    a = np.full(4, comm.rank + 1, np.float32)
    out = np.zeros(4 * comm.size, np.float32)
    with boostcomm.collective_fusion() as cf:
        first = cf.register_allreduce(a, a)
        second = cf.register_allgather(a, out)
        cf.depends_on(second, first)
    assert np.all(out == sum(range(1, comm.size + 1)))


def test_detect_topology(comm):
    topo = boostcomm.detect_topology()
    assert topo.world_size == comm.size
    assert topo.layout == comm.node_layout
    assert sum(topo.ranks_per_node) == comm.size and topo.nodes == len(topo.ranks_per_node)
    assert topo.hops >= 1
    if comm.size > 1 and topo.nodes == 1:
        assert topo.intra_node_bw is not None and topo.intra_node_bw > 0
    assert "world_size" in topo.to_json() or topo.to_json()


def test_configure_comm_strategy(comm):
    boostcomm.configure_comm_strategy("topology_aware", "shm", "ring", "auto")
    x = rank_data(comm.rank, 100000, np.float32)
    boostcomm.all_reduce(x)
    np.testing.assert_array_equal(x, reference(comm.size, 100000, np.float32))
    boostcomm.configure_comm_strategy("flat", "auto", "auto", "ring")
    x = rank_data(comm.rank, 1000, np.float32)
    boostcomm.all_reduce(x)
    np.testing.assert_array_equal(x, reference(comm.size, 1000, np.float32))
    with pytest.raises(boostcomm.InvalidArgumentError, match="unknown strategy 'fastest'"):
        boostcomm.configure_comm_strategy("fastest", "auto", "auto", "auto")
    # The phases' algorithms by name (C++ CommStrategy::intraAlgorithm / interAlgorithm).
    boostcomm.configure_comm_strategy("topology_aware", intra_algorithm="ring", inter_algorithm="rhd")
    x = rank_data(comm.rank, 100000, np.float32)
    boostcomm.all_reduce(x)
    np.testing.assert_array_equal(x, reference(comm.size, 100000, np.float32))
    with pytest.raises(boostcomm.InvalidArgumentError, match="inter algorithm 'pigeon' is unknown"):
        boostcomm.configure_comm_strategy("auto", inter_algorithm="pigeon")
    boostcomm.configure_comm_strategy()  # back to the defaults


def test_reduce_scatter_autotune(comm):
    n = 4096 * comm.size
    x = rank_data(comm.rank, n, np.float32, salt=7)
    result = boostcomm.reduce_scatter_autotune(x, reduce_op="sum", auto_strategy=True)
    assert result.selected_algorithm in comm.algorithms("reduce_scatter")
    assert result.speedup > 0
    ref = reference(comm.size, n, np.float32, salt=7)
    np.testing.assert_array_equal(result.output, ref[4096 * comm.rank:4096 * (comm.rank + 1)])
    again = boostcomm.reduce_scatter_autotune(x)
    assert again.selected_algorithm == result.selected_algorithm
    np.testing.assert_array_equal(again.output, result.output)


def test_configure_overlap_validation(comm):
    with pytest.raises(boostcomm.InvalidArgumentError, match="overlap_stages"):
        boostcomm.configure_overlap(True, 0, "ping_pong")
    with pytest.raises(boostcomm.InvalidArgumentError, match="buffer_strategy 'triple'"):
        boostcomm.configure_overlap(True, 2, "triple")
    boostcomm.configure_overlap(enable=True, overlap_stages=2, buffer_strategy="ping_pong")


def test_overlap_engine_and_stats(comm):
    tensors = [("w%d" % i, rank_data(comm.rank, n, np.float32, salt=20 + i)) for i, n in enumerate((300, 5000, 7))]
    engine = boostcomm.OverlapEngine(tensors, bucket_bytes=8 * 1024)
    for step in range(2):
        for i, (_, t) in enumerate(tensors):
            t[:] = rank_data(comm.rank, t.shape[0], np.float32, salt=20 + i)
        engine.begin_backward()
        for i in reversed(range(len(tensors))):
            engine.mark_ready(i)
        engine.finish_backward()
        for i, (_, t) in enumerate(tensors):
            np.testing.assert_array_equal(t, reference(comm.size, t.shape[0], np.float32, salt=20 + i))
    stats = boostcomm.get_overlap_stats()
    assert stats.source in ("overlap_engine", "process_group")
    assert 0.0 <= stats.efficiency <= 100.0 and stats.hidden_comm_time >= 0.0


def test_overlap_engine_bucket_view_numpy(comm):
    # Gradients written through tensor_view live in the engine's buckets: the
    # step reduces them there, the arrays passed in are never touched, and a
    # view keeps the engine alive after the caller drops it.
    shapes = [(30, 10), (5000,), (7,)]
    passed = [np.zeros(s, np.float32) for s in shapes]
    engine = boostcomm.OverlapEngine([("w%d" % i, t) for i, t in enumerate(passed)], bucket_bytes=8 * 1024,
                                     bucket_view=True)
    views = [engine.tensor_view(i) for i in range(len(shapes))]
    for view, shape in zip(views, shapes):
        assert view.shape == shape and view.dtype == np.float32 and view.flags.writeable
    for step in range(2):
        engine.begin_backward()
        for i in reversed(range(len(shapes))):
            views[i][...] = rank_data(comm.rank, views[i].size, np.float32, salt=40 + 10 * step + i).reshape(shapes[i])
            engine.mark_ready(i)
        engine.finish_backward()
        for i, view in enumerate(views):
            want = reference(comm.size, view.size, np.float64, salt=40 + 10 * step + i).reshape(shapes[i])
            np.testing.assert_array_equal(view.astype(np.float64), want)
            assert not passed[i].any()
    native = weakref.ref(engine._native)
    del engine
    gc.collect()
    assert native() is not None  # the views hold it
    np.testing.assert_array_equal(views[2].astype(np.float64), reference(comm.size, 7, np.float64, salt=52))
    del views, view
    gc.collect()
    assert native() is None  # freed (collectively) once the last view is gone


def test_overlap_engine_bucket_view_torch(comm):
    # Torch tensors in, torch views out: same memory as the numpy view, the
    # passed dtype (bfloat16 too) and shape; averaged in place.
    passed = [("a", torch.zeros(64, 3)), ("b", torch.zeros(100, dtype=torch.float64)),
              ("c", torch.zeros(2, 5, dtype=torch.bfloat16))]
    engine = boostcomm.OverlapEngine(passed, bucket_bytes=1024, average=True, bucket_view=True)
    views = [engine.tensor_view(i) for i in range(len(passed))]
    for i, ((_, t), view) in enumerate(zip(passed, views)):
        assert isinstance(view, torch.Tensor) and view.dtype == t.dtype and view.shape == t.shape
        assert view.data_ptr() == engine._native.tensor_view(i).ctypes.data != t.data_ptr()
    engine.begin_backward()
    for i, view in enumerate(views):
        view.copy_(torch.from_numpy(rank_data(comm.rank, view.numel(), np.float64, salt=60 + i)).view(view.shape))
        engine.mark_ready(i)
    engine.finish_backward()
    for i, view in enumerate(views):
        want = reference(comm.size, view.numel(), np.float64, op="avg", salt=60 + i)
        np.testing.assert_array_equal(view.double().flatten().numpy(), want)
    with pytest.raises(boostcomm.InvalidArgumentError, match="out of range"):
        engine.tensor_view(len(passed))


def test_link_stats(comm):
    # A ring allreduce of n floats: every rank sends 2 (size-1)/size of the
    # payload (its own sends, observed); all ranks of this job share one node
    # unless a layout is declared, so the bytes are split by the node layout.
    boostcomm.barrier()
    boostcomm.get_link_stats(reset=True)
    n = 100000
    x = np.ones(n, dtype=np.float32)
    boostcomm.all_reduce(x, algorithm="ring")
    mine = boostcomm.get_link_stats()
    assert mine["enabled"]
    sent = mine["intra_node"]["observed_bytes"] + mine["inter_node"]["observed_bytes"]
    assert sent == 2 * (comm.size - 1) * n * 4 // comm.size
    assert mine["intra_node"]["modelled_bytes"] + mine["inter_node"]["modelled_bytes"] == 0
    assert mine["intra_node"]["busy_seconds"] + mine["inter_node"]["busy_seconds"] > 0
    nodes = boostcomm.get_link_stats(per_node=True, reset=True)
    assert sum(node["ranks"] for node in nodes) == comm.size
    total = sum(node["intra_node"]["bytes"] + node["inter_node"]["bytes"] for node in nodes)
    assert total == comm.size * sent
    for node in nodes:
        assert 0 <= node["inter_node"]["congested_seconds"] <= node["inter_node"]["busy_seconds"]
