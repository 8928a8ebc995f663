"""Bad arguments from Python (issue #15's fault suite): every bad call raises
a boostcomm error (or, for None, a TypeError-compatible one) on the rank that
made it, leaves the arrays it was given untouched, and the next valid
collective returns the right result. Plus buffer lifetime of async calls:
Python drops its references, collects garbage and allocates new arrays
before waiting, and the results are still right.

Runs under `mpirun -np 2` (tests/python/CMakeLists.txt). Every rank makes the
same bad calls: a call rejected before it reaches the wire must not leave a
peer waiting."""

import gc
import weakref

import numpy as np
import pytest
import torch

import boostcomm
from conftest import rank_data, reference

BAD = (boostcomm.InvalidArgumentError, TypeError)


def check_next_call_works(comm, salt=0):
    x = rank_data(comm.rank, 1001, np.float32, salt)
    boostcomm.all_reduce(x)
    np.testing.assert_array_equal(x, reference(comm.size, 1001, np.float32, salt=salt))


def expect_rejected_unchanged(comm, call, *arrays):
    before = [np.array(a, copy=True) for a in arrays]
    with pytest.raises(BAD) as info:
        call()
    assert "rank" in str(info.value) or isinstance(info.value, TypeError), str(info.value)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(np.asarray(a), b)
    check_next_call_works(comm)


def test_empty_list(comm):
    # An empty list is a valid no-op or a clear error; never a crash or a hang.
    for fn in (boostcomm.all_reduce_many, boostcomm.broadcast_many):
        try:
            out = fn([])
            assert list(out) == []
        except boostcomm.InvalidArgumentError as e:
            assert "rank" in str(e)
        check_next_call_works(comm)


def test_mixed_dtypes(comm):
    a = np.ones(10, np.float32)
    b = np.ones(10, np.float64)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce_many([a, b]), a, b)
    t = torch.ones(10, dtype=torch.float32)
    u = torch.ones(10, dtype=torch.float16)
    expect_rejected_unchanged(comm, lambda: boostcomm.broadcast_many([t, u]), t.numpy(), u.numpy())
    # Output of another dtype than the input.
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float64)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(x, output=y), x, y)


def test_non_contiguous(comm):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(a[:, 3]), a)
    expect_rejected_unchanged(comm, lambda: boostcomm.broadcast(a[::2]), a)
    t = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(t.t()), t.numpy())
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce_many([t[:, 1], t[:, 2]]), t.numpy())


def test_none(comm):
    for call in (lambda: boostcomm.all_reduce(None), lambda: boostcomm.broadcast(None),
                 lambda: boostcomm.all_gather(None), lambda: boostcomm.reduce_scatter(None),
                 lambda: boostcomm.all_reduce_many([None]), lambda: boostcomm.all_reduce_many(None)):
        with pytest.raises(BAD):
            call()
        check_next_call_works(comm)
    x = np.ones(4, np.float32)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(x, op=None), x)


def test_misaligned_views_are_right_or_rejected(comm):
    # A float32 view starting one byte into a buffer: a valid array numpy made;
    # boostcomm must compute it right (or reject it clearly), never fault.
    for count in (1, 7, 1001, 70001):
        raw = np.zeros(count * 4 + 1, np.uint8)
        x = raw[1:].view(np.float32)
        x[:] = rank_data(comm.rank, count, np.float32)
        assert x.ctypes.data % 4 == 1
        try:
            boostcomm.all_reduce(x)
        except boostcomm.InvalidArgumentError as e:
            assert "align" in str(e), str(e)
        else:
            np.testing.assert_array_equal(x, reference(comm.size, count, np.float32))
        assert raw[0] == 0  # nothing written before the view
        check_next_call_works(comm, salt=count)


def test_counts_beyond_32_bits_are_checked_in_64_bits(comm):
    # Outputs of 2^32 + n elements: a size check done in 32 bits would see n
    # and accept them. np.zeros maps untouched pages, so no memory is used.
    x = np.ones(8, np.uint8)
    big = np.zeros((1 << 32) + 8 * comm.size, np.uint8)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_gather(x, output=big), x)
    small = np.zeros(4, np.uint8)
    huge_in = np.zeros((1 << 32) + 4 * comm.size, np.uint8)
    with pytest.raises(BAD):
        boostcomm.reduce_scatter(huge_in, output=small)
    assert not small.any()
    check_next_call_works(comm)
    with pytest.raises(BAD):
        boostcomm.all_reduce(np.ones(8, np.float32), output=np.zeros((1 << 32) + 8, np.float32)[: (1 << 31) + 8])
    check_next_call_works(comm)


def test_bad_root_op_algorithm_and_output_shape(comm):
    x = np.ones(16, np.float32)
    expect_rejected_unchanged(comm, lambda: boostcomm.broadcast(x, root=-1), x)
    expect_rejected_unchanged(comm, lambda: boostcomm.broadcast(x, root=2 ** 31), x)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(x, op="sum "), x)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_reduce(x, algorithm="no-such-algorithm"), x)
    out = np.zeros(3, np.float32)
    expect_rejected_unchanged(comm, lambda: boostcomm.all_gather(x, output=out), x, out)


def test_async_buffers_outlive_the_callers_references(comm):
    # Inputs handed to async calls with a separate output: the caller drops
    # every reference to the input, collects garbage and allocates new arrays
    # (which may reuse the memory) before waiting; the outputs must be right,
    # so the library kept the inputs alive (or had copied them).
    counts = (1, 1000, 70001, 1 << 20)
    works, outputs, expected, inputs = [], [], [], []
    for i, count in enumerate(counts):
        x = rank_data(comm.rank, count, np.float32, salt=i)
        out = np.empty(count, np.float32)
        works.append(boostcomm.all_reduce(x, output=out, async_op=True))
        outputs.append(out)
        expected.append(reference(comm.size, count, np.float32, salt=i))
        inputs.append(weakref.ref(x))
        del x
    # In place: the only reference to the buffer is the operation's.
    # (The weak reference is to the numpy array under the tensor: the library
    # may keep the tensor's storage, not the Python tensor object, alive.)
    arr = rank_data(comm.rank, 5000, np.float64, salt=9)
    in_place = weakref.ref(arr)
    t = torch.from_numpy(arr)
    works.append(boostcomm.all_reduce(t, async_op=True))
    del t, arr
    gc.collect()
    litter = [np.full(c, -7.0, np.float32) for c in counts for _ in range(3)]
    # The Work holds its buffers until test() or wait() sees it complete
    # (neither was called): the in-place array must still be there.
    got = in_place()
    assert got is not None, "the in-place buffer was freed while its operation was in flight"
    for work in works:
        work.wait(timeout=60)
    for i, (out, want) in enumerate(zip(outputs, expected)):
        np.testing.assert_array_equal(out, want, err_msg=f"output {i}")
    np.testing.assert_array_equal(got, reference(comm.size, 5000, np.float64, salt=9))
    del got
    assert all((a == -7.0).all() for a in litter), "the library wrote into memory it no longer owned"
    del works
    gc.collect()
    assert all(ref() is None for ref in inputs), "a finished Work kept its input alive after it was dropped"
    check_next_call_works(comm)
