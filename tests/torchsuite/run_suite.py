"""Runs PyTorch's own distributed conformance suite (DistributedTest._DistTestBase,
torch/testing/_internal/distributed/distributed_test.py, shipped in torch's
wheel) against one backend, as torch's test_distributed_spawn.py
does (a fresh TEMP_DIR and file:// rendezvous per test, env BACKEND and
WORLD_SIZE, torch's MultiProcessTestCase harness), except that the ranks are
forked from this process, which has imported torch, instead of spawned
(BC_SUITE_START=spawn: spawned, as torch does). A spawned rank imports torch
afresh, ~2 s of CPU; a forked one starts in ~0.1 s: the whole suite at 2
ranks takes ~40 s on 2 cores instead of ~6 min.

    BACKEND=boostcomm WORLD_SIZE=2 python3 run_suite.py [--part I/N] [--json OUT] [-k SUBSTR]

--part I/N runs the I-th of N interleaved slices of the sorted test names
(to spread a run over processes). Prints one line per test
(PASS / SKIP reason / FAIL / ERROR) and a summary; exits non-zero when a test
failed or errored, unless --expect-file names the tests expected to fail
(docs/PYTHON.md explains each), and, with --names, when a named test skipped
or is not in the suite.

For a plugin backend torch's suite keeps everything gated on the backend
feature sets (DistTestCases.backend_feature) skipped; boostcomm implements
subgroups and CPU DDP, so the runner declares those features for it, as
torch's own runner does for gloo. Tests that name gloo explicitly
(`BACKEND == "gloo"`) stay skipped: docs/PYTHON.md lists them.
"""
import argparse
import atexit
import json
import os
import re
import sys
import time
import unittest


# Our own options, removed before torch's helpers parse sys.argv (they do at import).
parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--part", default="1/1", help="I/N: the I-th of N slices of the tests")
parser.add_argument("-k", dest="pattern", action="append", default=[], help="run tests whose name contains this")
parser.add_argument("--names", help="file of test names (one a line): run only these")
parser.add_argument("--reverse", action="store_true", help="run in reverse name order")
parser.add_argument("--json", help="write the per-test outcomes here")
parser.add_argument("--expect-file", help="file listing tests (one name a line, # comments) allowed to fail")
parser.add_argument("--list", action="store_true", help="print the selected test names and exit")
parser.add_argument("--plain", action="store_true",
                    help="boostcomm: let the suite's decorators see boostcomm (a plugin backend) instead of gloo")
if __name__ == "__main__":
    OPTIONS, rest = parser.parse_known_args()
    sys.argv = [sys.argv[0]] + rest
else:  # a spawned rank (BC_SUITE_START=spawn) re-imports this file as __mp_main__: no options of ours
    OPTIONS = None
    sys.argv = [sys.argv[0]]

BACKEND = os.environ.setdefault("BACKEND", "boostcomm")
os.environ.setdefault("WORLD_SIZE", "2")
# A hang costs this much per test (torch's default: 300 s).
os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")

import torch.distributed as dist  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# As gloo (the default for boostcomm): the suite's decorators, evaluated when
# distributed_test is imported, see BACKEND=gloo, so every test torch runs for
# gloo is selected; then the module's BACKEND becomes "boostcomm", so every
# process group the tests create (init_process_group(backend=BACKEND)) and
# every runtime check of BACKEND inside a test body sees boostcomm. Tests
# that assert gloo-specific behaviour then fail, and expected_failures.txt
# says why. --plain instead declares boostcomm a plugin backend with the
# features it has, and the suite skips everything it reserves for gloo.
# Spawned ranks re-import this file and take the same path; forked ones inherit it.
AS_GLOO = BACKEND == "boostcomm" and os.environ.get("BC_SUITE_PLAIN", "") != "1"
if OPTIONS is not None and OPTIONS.plain:
    AS_GLOO = False
    os.environ["BC_SUITE_PLAIN"] = "1"  # inherited by the ranks
if BACKEND == "boostcomm":
    import boostcomm.torch  # noqa: E402,F401 - registers the plugin backend (in every rank)
    # Must happen before distributed_test is imported: its skip decorators read these sets.
    for feature in ("plugin", "subgroup", "ddp"):
        DistTestCases.backend_feature[feature].add("boostcomm")
if AS_GLOO:
    os.environ["BACKEND"] = "gloo"

if "TEMP_DIR" not in os.environ:  # distributed_test reads it at import; setUp makes a fresh one per test
    from torch.testing._internal.common_distributed import initialize_temp_directories  # noqa: E402
    initialize_temp_directories()

import torch  # noqa: E402
from torch.testing._internal.common_distributed import TEST_SKIPS  # noqa: E402
import torch.testing._internal.distributed.distributed_test as suite  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

if AS_GLOO:
    suite.BACKEND = BACKEND
    os.environ["BACKEND"] = BACKEND


def static_skip(method):
    """The reason a test certainly skips on this host, decided without starting
    its ranks, or None. Torch's skip_if_no_gpu / skip_if_lt_x_gpu wrappers exit
    every rank with "skip" when CUDA is unavailable (a CPU build of torch); the
    wrapper chain (functools.wraps' __wrapped__, named by the code object, which
    wraps does not rename) says whether a test carries one. Other skips (world
    size: torch 2.13 wants 8 ranks for the *_group tests) are the ranks' own."""
    f = method
    while f is not None:
        name = getattr(getattr(f, "__code__", None), "co_qualname", "")
        if not torch.cuda.is_available():
            if name.startswith("skip_if_no_gpu"):
                return TEST_SKIPS["no_cuda"].message
            if name.startswith("skip_if_lt_x_gpu"):
                cells = dict(zip(f.__code__.co_freevars, (c.cell_contents for c in f.__closure__ or ())))
                return TEST_SKIPS.get(f"multi-gpu-{cells.get('x')}", TEST_SKIPS["no_cuda"]).message
        f = getattr(f, "__wrapped__", None)
    return None


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        reason = static_skip(getattr(DistributedTest._DistTestBase, self._testMethodName, None))
        if reason is not None:
            raise unittest.SkipTest(reason)
        super().setUp()
        self.addCleanup(self._remove_rendezvous_file)  # after tearDown, whether it raises or not
        if os.environ.get("BC_SUITE_START", "fork") == "spawn":
            self._spawn_processes()  # torch's way: every rank imports torch afresh (~2 s a rank)
            return
        # Forked ranks (~0.1 s a rank) inherit this process's module state instead
        # of re-importing it: the one global the suite reads from a per-test setting
        # at import (its rendezvous file, made afresh by every setUp) must be this
        # test's, or a test that re-initialises waits on a deleted folder.
        suite.INIT_METHOD = os.environ["INIT_METHOD"]
        self._start_processes(torch.multiprocessing.get_context("fork").Process)

    def _remove_rendezvous_file(self):
        # torch's MultiProcessTestCase makes a rendezvous file per test
        # (NamedTemporaryFile(delete=False)) and leaves it in /tmp.
        if os.path.exists(getattr(self, "file_name", "")):
            os.remove(self.file_name)

    @classmethod
    def _run(cls, *args, **kwargs):
        # A forked rank ends in os._exit, which skips the atexit handlers a
        # spawned rank's interpreter runs at its exit, boostcomm's shutdown
        # among them: run that one here, whether the test exits or raises.
        # Not the runner's own handlers, which the fork copied: they would,
        # for one, delete the test's temporary folder under the other ranks.
        forked = os.environ.get("BC_SUITE_START", "fork") != "spawn"
        if forked:
            atexit._clear()
            if BACKEND == "boostcomm":
                from boostcomm import _state
                atexit.register(_state._shutdown)
        try:
            super()._run(*args, **kwargs)
        finally:
            if forked:
                atexit._run_exitfuncs()


class Recorder(unittest.TextTestResult):
    """Keeps one outcome per test, with the skip reason or the error's last line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self.started = {}

    def startTest(self, test):
        self.started[test.id()] = time.time()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        name = test.id().rsplit(".", 1)[-1]
        seconds = time.time() - self.started.get(test.id(), time.time())
        self.outcomes[name] = {"outcome": outcome, "detail": detail, "seconds": round(seconds, 1)}
        detail = " ".join(detail.split())  # one line per test, whatever the error text
        self.outcomes[name]["detail"] = detail
        line = f"{outcome:5s} {name} ({seconds:.1f} s)" + (f": {detail}" if detail else "")
        print(line, file=sys.__stdout__, flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "PASS")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "SKIP", str(reason).strip().splitlines()[0] if reason else "")

    def _last_line(self, test, err):
        text = self._exc_info_to_string(err, test) if isinstance(err, tuple) else str(err)
        lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
        # The rank's exception, not the C++ frames torch appends after it.
        named = [l for l in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b", l)]
        return (named or lines or [""])[-1][:300]

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "FAIL", self._last_line(test, err))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "ERROR", self._last_line(test, err))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "PASS", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "FAIL", "unexpected success")


def selected_names(options):
    names = sorted(unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn))
    if options.pattern:
        names = [n for n in names if any(p in n for p in options.pattern)]
    if options.names:
        with open(options.names) as f:
            wanted = {l.split("#")[0].strip() for l in f} - {""}
        names = [n for n in names if n in wanted]
    index, count = (int(x) for x in options.part.split("/"))
    if not 1 <= index <= count:
        sys.exit(f"--part {options.part}: I must be in 1..N")
    names = names[index - 1::count]
    return names[::-1] if options.reverse else names


def main(options):
    names = selected_names(options)
    if options.list:
        print("\n".join(names))
        return 0
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    began = time.time()
    runner = unittest.TextTestRunner(stream=open(os.devnull, "w"), resultclass=Recorder, verbosity=0)
    result = runner.run(suite)
    counts = {}
    for o in result.outcomes.values():
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    expected = set()
    if options.expect_file:
        with open(options.expect_file) as f:
            expected = {l.split("#")[0].strip() for l in f} - {""}
    bad = sorted(n for n, o in result.outcomes.items() if o["outcome"] in ("FAIL", "ERROR") and n not in expected)
    if options.names:
        # A named test (one that passes on gloo) must run here: a skip, or a name
        # the suite no longer has, is a failure too.
        bad += sorted(n for n, o in result.outcomes.items() if o["outcome"] == "SKIP")
        with open(options.names) as f:
            wanted = {l.split("#")[0].strip() for l in f} - {""}
        every = set(unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn))
        bad += sorted(f"{n} (not in the suite)" for n in wanted - every)
    stale = sorted(n for n in expected if result.outcomes.get(n, {}).get("outcome") == "PASS")
    if stale:
        print("expected to fail but passed (update expected_failures.txt): " + " ".join(stale))
    ws = os.environ["WORLD_SIZE"]
    print(f"\nbackend {BACKEND}{' (as gloo)' if AS_GLOO else ''}, world size {ws}, part {options.part}: " +
          ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) + f" ({time.time() - began:.0f} s)")
    if bad:
        print("unexpected failures: " + " ".join(bad))
    if options.json:
        with open(options.json, "w") as f:
            json.dump({"backend": BACKEND, "world_size": int(ws), "part": options.part, "as_gloo": AS_GLOO,
                       "outcomes": result.outcomes}, f, indent=1, sort_keys=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(OPTIONS))
