"""python3 -m boostcomm.plot on JSON written by the real tools.

The fixtures are made here with the built CLI (BOOSTCOMM_CLI) in small
`mpirun -np 2` runs: two bench sweeps, a replay with its timeline, and a
tuning cache. Each chart's data is checked through matplotlib's objects
against numbers recomputed from the JSON; the PNGs must not be blank; bad
input must give one line naming the file and the field, exit status 2.
Runs single-process (pytest itself starts mpirun); see CMakeLists.txt."""

import json
import os
import subprocess
import sys

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402

from boostcomm import plot  # noqa: E402
from boostcomm.plot import bench as bench_chart  # noqa: E402
from boostcomm.plot import replay as replay_chart  # noqa: E402

CLI = os.environ.get("BOOSTCOMM_CLI", "")
MPIEXEC = os.environ.get("BOOSTCOMM_MPIEXEC") or "mpirun"
PYTHON = os.environ.get("BOOSTCOMM_PYTHON") or sys.executable
SOURCE_PYTHON = os.path.join(os.path.dirname(__file__), "..", "..", "python")

pytestmark = pytest.mark.skipif(not os.path.exists(CLI), reason="BOOSTCOMM_CLI (the built boostcomm tool) not set")


def run_tool(*args):
    cmd = [MPIEXEC, "-np", "2", "--oversubscribe", "--bind-to", "none", CLI, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("plot")
    out = {k: str(d / f"{k}.json") for k in ("bench_a", "bench_b", "replay", "trace", "tuning")}
    run_tool("bench", "-b", "8", "-e", "4K", "-f", "4", "-n", "2", "-w", "1", "--repeats", "1",
             "--output", out["bench_a"])
    run_tool("bench", "-b", "64", "-e", "1K", "-f", "2", "-n", "2", "-w", "1", "--repeats", "1",
             "--algos", "native,ring,mpi", "--output", out["bench_b"])
    run_tool("replay", "--model", "resnet50", "--comm-share", "0", "--compute-seconds", "0.04", "--steps", "2",
             "--warmup", "0", "--output", out["replay"], "--timeline", out["trace"])
    run_tool("tune", "-c", "allreduce,allgather", "-b", "1K", "-e", "16K", "-f", "4", "--samples", "2",
             "--warmup", "2", "--no-knobs", "--no-probe", "--cache", out["tuning"])
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}


def suptitle(fig):
    return fig._suptitle.get_text()


def footer(fig):
    return "\n".join(t.get_text() for t in fig.texts if t is not fig._suptitle)


def png_is_drawn(path):
    image = matplotlib.image.imread(path)
    rgb = image[..., :3]
    dark = (rgb.mean(axis=2) < 0.5).mean()
    return float(rgb.var()) > 0.005 and dark > 0.005


# ---------------------------------------------------------------- bench

def test_bench_series_per_algorithm(files):
    doc = load(files["bench_a"])
    fig = plot.figure([files["bench_a"]])
    bw_ax, speed_ax = fig.axes
    expected = {}
    for r in doc["results"]:
        expected.setdefault(r["algorithm"], []).append((r["bytes"], r["busbw_GBps"]))
    lines = lines_by_label(bw_ax)
    assert set(expected) == set(doc["meta"]["algorithms"])
    for algorithm, points in expected.items():
        line = lines[algorithm]
        assert list(line.get_xdata()) == [b for b, _ in sorted(points)]
        assert np.allclose(line.get_ydata(), [bw for _, bw in sorted(points)])
    assert bw_ax.get_xscale() == "log" and speed_ax.get_xscale() == "log"
    assert "GB/s" in bw_ax.get_ylabel()
    assert "bytes" in speed_ax.get_xlabel()
    # Speedup over raw MPI, recomputed from the times.
    mpi = {r["bytes"]: r["time_us"] for r in doc["results"] if r["algorithm"] == "mpi"}
    speed = lines_by_label(speed_ax)
    assert set(speed) == {f"{a} / mpi" for a in expected if a != "mpi"}
    ring = [r for r in doc["results"] if r["algorithm"] == "ring"]
    assert np.allclose(speed["ring / mpi"].get_ydata(), [mpi[r["bytes"]] / r["time_us"] for r in ring])
    assert "speedup vs mpi" in speed_ax.get_ylabel()
    # Provenance: the command recorded by the bench, the host and date in the footer.
    assert doc["meta"]["command"].endswith(f"--output {files['bench_a']}")
    assert "bench -b 8 -e 4K" in suptitle(fig)
    assert doc["meta"]["hostname"] in footer(fig) and doc["meta"]["date"] in footer(fig)


def test_bench_files_overlay(files):
    fig = plot.figure([files["bench_a"], files["bench_b"]])
    lines = lines_by_label(fig.axes[0])
    assert "ring (bench_a)" in lines and "ring (bench_b)" in lines
    sizes_b = sorted({r["bytes"] for r in load(files["bench_b"])["results"]})
    assert list(lines["ring (bench_b)"].get_xdata()) == sizes_b
    assert not any(label.startswith("shm (bench_b)") for label in lines)  # bench_b ran native,ring,mpi only
    # The same algorithm has the same colour in both files, another line style.
    assert lines["ring (bench_a)"].get_color() == lines["ring (bench_b)"].get_color()
    assert lines["ring (bench_a)"].get_linestyle() != lines["ring (bench_b)"].get_linestyle()
    assert footer(fig).count("\n") == 1  # one footer line per file


def test_bench_baseline_option(files):
    fig = plot.figure([files["bench_b"]], baseline="native")
    assert set(lines_by_label(fig.axes[1])) == {"ring / native", "mpi / native"}
    # Without the requested baseline in the file, mpi is used.
    assert bench_chart.choose_baseline({"mpi": [], "ring": []}, "shm") == "mpi"


# ---------------------------------------------------------------- replay

def test_replay_stacked_bars(files):
    doc = load(files["replay"])
    fig = plot.figure([files["replay"]])
    ax = fig.axes[0]
    assert sorted(doc["modes"]) == ["baseline", "boosted", "fused"]
    modes = ["baseline", "fused", "boosted"]  # drawn in this order (the JSON object's order is alphabetical)
    assert [t.get_text() for t in ax.get_xticklabels()] == modes
    containers = {c.get_label(): c for c in ax.containers}
    assert set(containers) == {name for name, _ in replay_chart.SEGMENTS}
    for name, c in containers.items():
        assert len(c.patches) == len(modes), name
    for i, mode in enumerate(modes):
        m = doc["modes"][mode]
        hidden = min(max(0.0, m["sync_time_s"] - m["exposed_comm_s"]), m["compute_time_s"])
        assert containers["exposed comm"].patches[i].get_height() == pytest.approx(m["exposed_comm_s"] * 1e3)
        assert containers["compute + hidden comm"].patches[i].get_height() == pytest.approx(hidden * 1e3)
        total = sum(containers[n].patches[i].get_height() for n in containers)
        assert total == pytest.approx((m["compute_time_s"] + m["exposed_comm_s"]) * 1e3)
        labels = [t.get_text() for t in ax.texts]
        assert f"{m['speedup']:.2f}x\noverlap {100 * m['overlap_efficiency']:.0f}%" in "\n".join(labels)
    assert "ms" in ax.get_ylabel()
    assert doc["meta"]["tool"] == "boostcomm replay"
    assert "replay --model resnet50" in suptitle(fig)
    assert doc["meta"]["hostname"] in footer(fig)


def test_replay_tail_floor(files):
    # The last gradient of ResNet-50's backward is conv1's weight (64 x 3 x 7 x 7 floats): its allreduce,
    # timed alone, bounds what overlap can reach.
    doc = load(files["replay"])
    tail = doc["tail"]
    assert tail["tensor"] == "conv1.weight" and tail["bytes"] == 64 * 3 * 7 * 7 * 4
    assert 0 < tail["allreduce_time_s"] < doc["modes"]["baseline"]["sync_time_s"]
    bound = doc["modes"]["baseline"]["step_time_s"] / (doc["compute_time_s"] + tail["allreduce_time_s"])
    assert tail["speedup_bound"] == pytest.approx(bound)
    assert tail["boosted_fraction_of_bound"] == pytest.approx(doc["modes"]["boosted"]["speedup"] / bound)


def test_replay_files_side_by_side(files):
    fig = plot.figure([files["replay"], files["replay"]])
    ax = fig.axes[0]
    assert len(ax.get_xticklabels()) == 6
    assert ax.get_xticklabels()[3].get_text() == "replay\nbaseline"


# ---------------------------------------------------------------- timeline

def test_timeline_gantt_of_one_step(files):
    events = load(files["trace"])
    step = 1
    fig = plot.figure([files["trace"]], step=step)
    assert [ax.get_title(loc="left").split(" ")[0] for ax in fig.axes] == ["baseline", "fused", "boosted"]
    for ax, mode in zip(fig.axes, ["baseline", "fused", "boosted"]):
        windows = {e["pid"]: (e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "step" and e["name"] == f"{mode} step {step}"}
        assert sorted(windows) == [0, 1]
        expected = [e for e in events if e.get("cat") == "collective" and e["pid"] in windows
                    and e["ts"] + e["dur"] > windows[e["pid"]][0] and e["ts"] < windows[e["pid"]][1]]
        bars = {c.get_label(): c for c in ax.containers}
        assert len(bars["collective"].patches) == len(expected), mode
        assert "backward compute" in bars
        origin = min(w[0] for w in windows.values())
        first = min(expected, key=lambda e: e["ts"])
        assert min(p.get_x() for p in bars["collective"].patches) == pytest.approx((first["ts"] - origin) / 1e3)
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert ticks[0] == "rank 0: caller (emulated backward)"
        assert any(t.startswith("rank 1:") for t in ticks)
    assert fig.axes[-1].get_xlabel() == "time from the step's start (ms)"
    assert "replay --model resnet50" in suptitle(fig)  # from the trace's process_labels event


def test_timeline_one_mode(files):
    fig = plot.figure([files["trace"]], step=0, mode="boosted")
    assert len(fig.axes) == 1
    assert fig.axes[0].get_title(loc="left").startswith("boosted (step 0)")


def test_timeline_of_the_engine_alone(files, tmp_path):
    """A BOOSTCOMM_TIMELINE trace has no step events: steps end at each finishBackward wait."""
    events = [e for e in load(files["trace"]) if e.get("cat") != "step"]
    path = tmp_path / "engine.json"
    path.write_text("[\n" + "\n,".join(json.dumps(e) for e in events) + "\n")  # no "]": an interrupted run
    fig = plot.figure([str(path)], step=0)
    assert len(fig.axes) == 1 and fig.axes[0].get_title(loc="left").startswith("step 0: ")
    assert len({c.get_label() for c in fig.axes[0].containers} & {"collective", "wait for communication"}) == 2


ENGINE_SCRIPT = """
import time
import numpy as np
import boostcomm as abc
abc.comm_init()
grads = [(f"g{i}", np.ones(1 << 15, np.float32)) for i in range(12)]
engine = abc.OverlapEngine(grads, bucket_bytes=1 << 18, first_bucket_bytes=1 << 16)
for step in range(3):
    for i in reversed(range(len(grads))):
        time.sleep(0.001)
        engine.mark_ready(i)
    engine.finish_backward()
"""


@pytest.mark.skipif(not os.path.isdir(os.environ.get("BOOSTCOMM_BUILT_PYTHON", "/nonexistent")),
                    reason="no built package")
def test_timeline_of_a_python_training_loop(tmp_path):
    """BOOSTCOMM_TIMELINE in a Python program: the engine's own trace, titled with that program."""
    script = tmp_path / "loop.py"
    script.write_text(ENGINE_SCRIPT)
    trace = tmp_path / "engine.json"
    env = dict(os.environ, PYTHONPATH=os.environ["BOOSTCOMM_BUILT_PYTHON"], BOOSTCOMM_TIMELINE=str(trace))
    done = subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", "--bind-to", "none", "-x", "PYTHONPATH", "-x",
                           "BOOSTCOMM_TIMELINE", PYTHON, str(script)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    rank1 = str(tmp_path / "engine.rank1.json")
    events = load(rank1)
    waits = sorted((e for e in events if e.get("cat") == "wait"), key=lambda e: e["ts"])
    assert len(waits) == 3
    fig = plot.figure([rank1], step=2)
    ax = fig.axes[0]
    start, end = waits[1]["ts"] + waits[1]["dur"], waits[2]["ts"] + waits[2]["dur"]
    assert ax.get_title(loc="left") == f"step 2: {(end - start) / 1e3:.1f} ms"
    expected = [e for e in events if e.get("cat") == "collective" and e["ts"] + e["dur"] > start and e["ts"] < end]
    bars = {c.get_label(): c for c in ax.containers}
    assert len(bars["collective"].patches) == len(expected) > 0
    assert all(t.get_text().startswith("rank 1: ") for t in ax.get_yticklabels())
    assert f"{PYTHON} {script}" in suptitle(fig)


# ---------------------------------------------------------------- tuning

def test_tuning_winner_and_margin(files):
    doc = load(files["tuning"])
    fig = plot.figure([files["tuning"]])
    collectives = list(dict.fromkeys(e["collective"] for e in doc["entries"]))
    assert [ax.get_title(loc="left") for ax in fig.axes] == collectives
    for ax, collective in zip(fig.axes, collectives):
        entries = sorted((e for e in doc["entries"] if e["collective"] == collective), key=lambda e: e["bytes"])
        bars = [p for c in ax.containers for p in c.patches]
        assert len(bars) == len(entries)
        for bar, e in zip(sorted(bars, key=lambda p: p.get_x()), entries):
            times = {c["algorithm"]: c["time_us"] for c in e["candidates"]}
            assert bar.get_height() == pytest.approx(times["native"] / times[e["winner"]])
        texts = [t.get_text().split("\n")[0] for t in ax.texts]
        assert texts == [e["winner"] for e in entries]
        assert "native" in ax.get_ylabel()
    assert doc["meta"]["tool"] == "boostcomm tune"
    assert "tune -c allreduce,allgather" in suptitle(fig)


def test_tuning_axis_cuts_one_outlier_only():
    from boostcomm.plot import tuning as tuning_chart
    assert tuning_chart.axis_top([1.0, 1.2, 2.0, 42.0]) == pytest.approx(1.35 * 2.0)
    assert tuning_chart.axis_top([1.0, 3.0, 5.0]) == pytest.approx(1.35 * 5.0)  # no outlier: nothing cut
    assert tuning_chart.axis_top([None, 0.5]) == pytest.approx(1.35)  # the 1x line stays in view
    # Slow candidates (dots far below 1x) do not make a 1.4x winner an outlier.
    assert tuning_chart.axis_top([1.43, 1.0, 1.0], [0.05, 0.1, 0.1, 0.2]) == pytest.approx(1.35 * 1.43)
    # A candidate above its winner stays in view; one 30x off the bars does not.
    assert tuning_chart.axis_top([2.0, 1.0], [3.2, 30.0]) == pytest.approx(1.35 * 3.2)


# ---------------------------------------------------------------- command line and PNGs

def run_plot(args, pythonpath=SOURCE_PYTHON):
    env = dict(os.environ, PYTHONPATH=pythonpath)
    return subprocess.run([PYTHON, "-m", "boostcomm.plot", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("kind,extra", [("bench_a", []), ("replay", []), ("trace", ["--step", "1"]),
                                        ("tuning", [])])
def test_cli_writes_a_drawn_png(files, tmp_path, kind, extra):
    out = tmp_path / f"{kind}.png"
    done = run_plot([files[kind], "-o", str(out), *extra])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"boostcomm.plot: wrote {out} ({plot.load(files[kind]).kind}, 1 file)"
    assert out.stat().st_size > 5_000
    assert png_is_drawn(out)


def test_source_tree_has_no_compiled_module():
    """The tests above ran without the compiled module: plotting needs JSON only."""
    done = subprocess.run([PYTHON, "-c", "import boostcomm, sys; print(type(boostcomm._C).__name__)"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=SOURCE_PYTHON))
    assert done.stdout.strip() == "_Unbuilt", done.stderr


@pytest.mark.skipif(not os.path.isdir(os.environ.get("BOOSTCOMM_BUILT_PYTHON", "/nonexistent")),
                    reason="no built package")
def test_cli_with_the_built_package(files, tmp_path):
    """The same command where the package has its compiled module."""
    built = os.environ["BOOSTCOMM_BUILT_PYTHON"]
    done = subprocess.run([PYTHON, "-c", "import sys, boostcomm, boostcomm.plot; "
                           "print(type(boostcomm._C).__name__, 'torch' in sys.modules)"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=built))
    # ... and neither the package nor plotting imports torch (its names load on first use).
    assert done.stdout.strip() == "module False", done.stderr
    out = tmp_path / "built.png"
    done = run_plot([files["bench_a"], "-o", str(out)], pythonpath=built)
    assert done.returncode == 0, done.stderr
    assert png_is_drawn(out)


def test_blank_image_is_detected(tmp_path):
    """png_is_drawn can fail: a white image is not drawn."""
    path = tmp_path / "white.png"
    matplotlib.image.imsave(path, np.ones((50, 50, 3)))
    assert not png_is_drawn(path)


# ---------------------------------------------------------------- bad input

def bad_cases(files, tmp_path):
    def write(name, text):
        p = tmp_path / name
        p.write_text(text)
        return str(p)

    def without(path, drop):
        doc = load(path)
        drop(doc)
        without.count += 1
        return write(f"{os.path.basename(path)}.bad{without.count}.json", json.dumps(doc))
    without.count = 0

    return [
        (write("oops.json", "{\"meta\": "), "not JSON"),
        (write("other.json", json.dumps({"foo": 1})), "unknown kind"),
        (write("tool.json", json.dumps({"meta": {"tool": "nccl-tests"}})), "unknown kind (meta.tool is 'nccl-tests')"),
        (without(files["bench_a"], lambda d: d.update(results=[])), "field 'results': empty"),
        (without(files["bench_a"], lambda d: d["results"][2].pop("busbw_GBps")), "field 'results[2].busbw_GBps': missing"),
        (without(files["bench_a"], lambda d: d["results"][0].update(time_us="fast")),
         "field 'results[0].time_us': is a string, expected a number"),
        (without(files["bench_a"], lambda d: d["meta"].pop("collective")), "field 'meta.collective': missing"),
        (without(files["replay"], lambda d: d["modes"]["boosted"].pop("exposed_comm_s")),
         "field 'modes.boosted.exposed_comm_s': missing"),
        (without(files["replay"], lambda d: d.update(modes={})), "field 'modes': empty"),
        (without(files["tuning"], lambda d: d.update(entries=[])), "field 'entries': empty"),
        (without(files["tuning"], lambda d: d["entries"][1]["candidates"][0].pop("time_us")),
         "field 'entries[1].candidates[0].time_us': missing"),
        (write("empty_trace.json", "[]"), "empty trace"),
        (write("blank.json", ""), "not JSON (the file is empty)"),
        (str(tmp_path / "missing.json"), "cannot read"),
    ]


def test_bad_input_is_one_line_naming_file_and_field(files, tmp_path):
    out = tmp_path / "never.png"
    for path, message in bad_cases(files, tmp_path):
        done = run_plot([path, "-o", str(out)])
        assert done.returncode == 2, (path, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"boostcomm.plot: error: {path}: "), lines[0]
        assert message in lines[0], (message, lines[0])
    assert not out.exists()


def test_bad_step_and_mixed_kinds(files, tmp_path):
    out = str(tmp_path / "x.png")
    done = run_plot([files["trace"], "--step", "7", "-o", out])
    assert done.returncode == 2
    assert f"{files['trace']}: field '--step': step 7 is not in this trace (steps 0..1)" in done.stderr
    done = run_plot([files["trace"], "--mode", "turbo", "-o", out])
    assert "field '--mode': mode 'turbo' has no step 0 here (modes: baseline, fused, boosted)" in done.stderr
    done = run_plot([files["bench_a"], files["replay"], "-o", out])
    assert done.returncode == 2
    assert f"{files['replay']}: is a replay file; {files['bench_a']} is a bench file" in done.stderr
    done = run_plot([files["tuning"], files["tuning"], "-o", out])
    assert "one file at a time" in done.stderr
    done = run_plot([files["bench_a"], "-o", str(tmp_path / "no" / "dir.png")])
    assert done.returncode == 2 and "cannot write" in done.stderr and "Traceback" not in done.stderr
