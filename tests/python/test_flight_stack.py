"""The flight recorder's Python stacks (issue 15): a collective called from
Python carries the innermost frames that called it ("python_stack" of its
entry, innermost first), in Communicator.flight_record() and in the dumps
written to BOOSTCOMM_TRACE_DIR, and `boostcomm trace analyze` prints the
stack of the collective some ranks never reached.

Runs under `mpirun -np 2` with BOOSTCOMM_TRACE_DIR and BOOSTCOMM_CLI set
(tests/python/CMakeLists.txt)."""

import inspect
import json
import os
import signal
import subprocess
import time

import numpy as np

import boostcomm

THIS_FILE = os.path.basename(__file__)


def entry_of(record, seq):
    found = [e for e in record["entries"] if e["seq"] == seq]
    assert len(found) == 1, record
    return found[0]


def call_line(function, text):
    """The line number of the first line of `function` containing `text`."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def other_step(x):
    boostcomm.all_reduce(x)


def flight_marker_step(x):
    boostcomm.all_reduce(x)  # the marked call


def test_entry_carries_the_calling_function_and_line(comm):
    x = np.ones(2, np.float32)
    other_step(x)
    flight_marker_step(x)
    record = json.loads(comm.flight_record())  # also checks the text is valid JSON
    marked = entry_of(record, record["started"] - 1)
    before = entry_of(record, record["started"] - 2)
    stack = marked["python_stack"]
    # Innermost first: the package's wrapper, then the function that called it.
    assert stack[0].endswith(" in all_reduce") and "boostcomm" in stack[0], stack
    want = f"{THIS_FILE}:{call_line(flight_marker_step, 'the marked call')} in flight_marker_step"
    assert stack[1].endswith(want), (stack, want)
    assert any(f.endswith(" in test_entry_carries_the_calling_function_and_line") for f in stack), stack
    assert len(stack) <= 8
    assert not any("flight_marker_step" in f for f in before["python_stack"]), before
    assert any(f.endswith(" in other_step") for f in before["python_stack"]), before


def pending_marker_call(x):
    return boostcomm.all_reduce(x, async_op=True)  # only rank 1 makes this call before the dump


def wait_for(path, seconds=30):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"no flight record at {path}"
        time.sleep(0.05)


def test_on_demand_dump_and_analyze_show_the_stack(comm):
    trace_dir = os.environ["BOOSTCOMM_TRACE_DIR"]
    os.makedirs(trace_dir, exist_ok=True)
    paths = [os.path.join(trace_dir, f"rank-{r}.json") for r in range(comm.size)]
    if os.path.exists(paths[comm.rank]):
        os.remove(paths[comm.rank])
    boostcomm.barrier()  # no rank reads a stale record of another
    x = np.ones(3, np.float32)
    work = pending_marker_call(x) if comm.rank == 1 else None
    os.kill(os.getpid(), signal.SIGUSR1)  # on demand: the watchdog thread writes the dump
    for p in paths:
        wait_for(p)
    time.sleep(0.2)  # the writer renames a complete file; this only guards a slow reader
    out = ""
    if comm.rank == 0:
        out = subprocess.run([os.environ["BOOSTCOMM_CLI"], "trace", "analyze", trace_dir], check=True,
                             capture_output=True, text=True).stdout
    # Complete the call on both ranks before any assertion can fail.
    if comm.rank == 0:
        boostcomm.all_reduce(x, async_op=True).wait()  # a blocking call would not match rank 1's async one
    else:
        work.wait()
    np.testing.assert_array_equal(x, np.full(3, comm.size, np.float32))
    with open(paths[1]) as f:
        record = json.load(f)
    assert record["reason"] == "signal", record
    pending = entry_of(record, record["started"] - 1)
    line = call_line(pending_marker_call, "only rank 1")
    assert pending["python_stack"][1].endswith(f"{THIS_FILE}:{line} in pending_marker_call"), pending
    if comm.rank == 0:
        assert "missing ranks: {0}" in out, out
        assert "python stack (innermost first):" in out, out
        assert f"{THIS_FILE}:{line} in pending_marker_call" in out, out
