"""Chrome-trace timelines (`boostcomm replay --timeline`, BOOSTCOMM_TIMELINE):
a per-rank Gantt chart of one training step: backward compute, the bucket
collectives on their lanes, pack/unpack copies and the final wait.

Which step: `boostcomm replay` marks each timed step of each mode with a
"step" event named "<mode> step <n>"; the chart then has one panel per mode
showing step n. A trace of the overlap engine alone (BOOSTCOMM_TIMELINE) has
no step events; there step n runs from the end of the previous
"finishBackward wait" (or the rank's first event) to the end of the n-th.
Times on the x axis are milliseconds from the step's start on the earliest
rank (ranks share a clock: timeline.h)."""

import re

from matplotlib.figure import Figure

from .common import decorate, layout

# Category -> (legend text, colour); drawing order.
CATEGORIES = (("compute", "backward compute", "#6baed6"), ("collective", "collective", "#e6550d"),
              ("wait", "wait for communication", "#969696"), ("pack", "pack copy", "#9e9ac8"),
              ("unpack", "unpack copy", "#756bb1"), ("fill", "bucket filling", "#c7e9c0"))
_STEP = re.compile(r"^(?P<mode>.+) step (?P<step>\d+)$")
_TID_ORDER = {0: 0, 4: 1, 1: 3, 2: 4}  # caller, baseline lane, then engine lanes (10+), copies, fill


def read(source):
    events = source.doc if isinstance(source.doc, list) else source.doc["traceEvents"]
    spans, threads, labels = [], {}, {}
    for i, e in enumerate(events):
        where = f"[{i}]"
        ph = e.get("ph")
        if ph == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("name") == "thread_name":
                threads.setdefault((e.get("pid", 0), e.get("tid", 0)), str(args.get("name", "")))
            elif e.get("name") == "process_labels":
                labels.setdefault(e.get("pid", 0), args)
            continue
        if ph != "X":
            continue
        for key in ("ts", "dur"):
            if not isinstance(e.get(key), (int, float)) or isinstance(e.get(key), bool):
                source.fail(f"{where}.{key}", "missing or not a number (complete events need ts and dur)")
        spans.append({"name": str(e.get("name", "")), "cat": str(e.get("cat", "")), "pid": e.get("pid", 0),
                      "tid": e.get("tid", 0), "start": float(e["ts"]), "end": float(e["ts"]) + float(e["dur"]),
                      "args": e.get("args") if isinstance(e.get("args"), dict) else {}})
    if not spans:
        source.fail(None, "the trace holds no complete (\"ph\": \"X\") events")
    return {"spans": spans, "threads": threads, "labels": labels}


def replay_windows(spans, step):
    """{mode: {pid: (start, end)}} of step `step` from the replay's step events."""
    windows = {}
    for s in spans:
        match = _STEP.match(s["name"]) if s["cat"] == "step" else None
        if match and int(match.group("step")) == step:
            windows.setdefault(match.group("mode"), {})[s["pid"]] = (s["start"], s["end"])
    return windows


def engine_windows(spans, step):
    """{"step N": {pid: (start, end)}} from the engine's finishBackward waits."""
    per_pid = {}
    for s in spans:
        if s["cat"] == "wait":
            per_pid.setdefault(s["pid"], []).append(s)
    first = {}
    for s in spans:
        first[s["pid"]] = min(first.get(s["pid"], s["start"]), s["start"])
    out = {}
    for pid, waits in per_pid.items():
        waits.sort(key=lambda w: w["start"])
        if step < len(waits):
            start = waits[step - 1]["end"] if step > 0 else first[pid]
            out[pid] = (start, waits[step]["end"])
    return {f"step {step}": out} if out else {}


def step_count(spans):
    steps = {int(m.group("step")) for s in spans if s["cat"] == "step" for m in [_STEP.match(s["name"])] if m}
    if steps:
        return max(steps) + 1
    waits = {}
    for s in spans:
        if s["cat"] == "wait":
            waits[s["pid"]] = waits.get(s["pid"], 0) + 1
    return min(waits.values()) if waits else 0


def _lane_key(lane):
    pid, tid = lane
    return (pid, _TID_ORDER.get(tid, 2 if tid >= 10 else 5), tid)


def _draw_panel(ax, title, spans, window, threads):
    origin = min(start for start, _ in window.values())
    chosen = [s for s in spans if s["pid"] in window and s["cat"] != "step"
              and s["end"] > window[s["pid"]][0] and s["start"] < window[s["pid"]][1]]
    lanes = sorted({(s["pid"], s["tid"]) for s in chosen}, key=_lane_key)
    row = {lane: i for i, lane in enumerate(lanes)}
    end = max(e for _, e in window.values())
    for category, legend, colour in CATEGORIES:
        mine = [s for s in chosen if s["cat"] == category]
        if not mine:
            continue
        ax.barh([row[(s["pid"], s["tid"])] for s in mine], [(s["end"] - s["start"]) / 1e3 for s in mine],
                left=[(s["start"] - origin) / 1e3 for s in mine], height=0.7, color=colour, label=legend,
                edgecolor="white" if category == "compute" else colour, linewidth=0.3)
        if category == "collective":
            for s in mine:
                if (s["end"] - s["start"]) > 0.04 * (end - origin):
                    ax.text((s["start"] + s["end"] - 2 * origin) / 2e3, row[(s["pid"], s["tid"])],
                            s["name"].split(" ", 1)[-1], ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {pid}: {threads.get((pid, tid), f'thread {tid}')}" for pid, tid in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, (end - origin) / 1e3)
    ax.set_title(title, fontsize=9, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    return len(lanes)


def draw(sources, step=0, mode=None):
    if len(sources) > 1:
        sources[1].fail(None, "timelines are plotted one file at a time (got several)")
    source = sources[0]
    d = read(source)
    spans = d["spans"]
    windows = replay_windows(spans, step) or engine_windows(spans, step)
    if not windows:
        count = step_count(spans)
        have = f"steps 0..{count - 1}" if count else "no step or finishBackward wait events"
        source.fail("--step", f"step {step} is not in this trace ({have})")
    if mode is not None:
        if mode not in windows:
            source.fail("--mode", f"mode '{mode}' has no step {step} here (modes: {', '.join(windows)})")
        windows = {mode: windows[mode]}
    rows = [len({(s["pid"], s["tid"]) for s in spans if s["pid"] in w and s["cat"] != "step"}) for w in windows.values()]
    fig = Figure(figsize=(10, 2.0 + sum(0.28 * r + 0.6 for r in rows)))
    axes = fig.subplots(len(windows), 1, squeeze=False, gridspec_kw={"height_ratios": [max(r, 1) + 2 for r in rows]})
    for ax, (name, window) in zip(axes[:, 0], windows.items()):
        duration = (max(e for _, e in window.values()) - min(s for s, _ in window.values())) / 1e3
        label = name if name.startswith("step ") else f"{name} (step {step})"
        _draw_panel(ax, f"{label}: {duration:.1f} ms", spans, window, d["threads"])
    axes[-1, 0].set_xlabel("time from the step's start (ms)")
    handles, texts = [], []
    for ax in axes[:, 0]:
        for h, t in zip(*ax.get_legend_handles_labels()):
            if t not in texts:
                handles.append(h)
                texts.append(t)
    # Above the first panel, right of its title: inside, it would hide bars.
    axes[0, 0].legend(handles, texts, fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(texts),
                      borderaxespad=0.2, frameon=False)
    meta = next(iter(d["labels"].values()), {})
    title = f"timeline: per-rank Gantt of step {step} - backward compute and bucket collectives"
    title_lines, footer_lines = decorate(fig, title, [(source, meta)])
    layout(fig, title_lines, footer_lines, left_inches=2.3)
    return fig
