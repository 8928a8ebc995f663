"""`boostcomm bench --output` files: bus bandwidth against size per algorithm
(log2 x axis) and, below, each algorithm's speedup over a baseline measured
in the same run (raw MPI, else boostcomm's native). Several files overlay:
one colour per algorithm, one line style per file."""

import math

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .common import decorate, field, format_bytes, layout, number, records

_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D")


def read(source):
    """{"meta": meta, "series": {algorithm: [(bytes, busbw, time_us)]}} of one file."""
    doc = source.doc
    meta = field(source, doc, "meta", "", dict)
    for key in ("collective", "ranks"):
        field(source, meta, key, "meta")
    series = {}
    for where, record in records(source, doc, "results", "the bench measured nothing"):
        algorithm = field(source, record, "algorithm", where, str)
        size = number(source, record, "bytes", where)
        busbw = number(source, record, "busbw_GBps", where)
        time_us = number(source, record, "time_us", where)
        if size <= 0:
            source.fail(f"{where}.bytes", f"is {size:g}; the log2 axis needs sizes > 0")
        series.setdefault(algorithm, []).append((size, busbw, time_us))
    for points in series.values():
        points.sort()
    return {"meta": meta, "series": series}


def choose_baseline(series, wanted):
    """The baseline algorithm of one file: `wanted` if it ran, else mpi, else native; None if none ran."""
    for name in ([wanted] if wanted else []) + ["mpi", "native"]:
        if name in series:
            return name
    return None


def _size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    while len(ticks) > 12:
        ticks = ticks[::2]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_bytes(x)))


def _ratio_text(y, _pos=None):
    """2 -> "2x", 0.25 -> "1/4x": tick labels of a log2 ratio axis."""
    return f"{y:g}x" if y >= 0.1 else f"1/{1 / y:.0f}x"


def _ratio_ticks(limits):
    """Powers of two across `limits`, 1x always among them, at most ~8."""
    low, high = (math.floor(math.log2(v)) for v in (max(limits[0], 1e-12), max(limits[1], 1e-12)))
    high += 1
    stride = max(1, math.ceil((high - low + 1) / 8))
    return [2.0 ** e for e in range(low, high + 1) if e % stride == 0]


def _labels(sources):
    labels = [s.label for s in sources]
    if len(set(labels)) < len(labels):
        labels = [s.path for s in sources]
    return labels


def _title(data):
    def values(key):
        seen = []
        for d in data:
            value = str(d["meta"].get(key, "?"))
            if value not in seen:
                seen.append(value)
        return "/".join(seen)
    op = values("op")
    what = f"{values('collective')} {values('dtype')}" + (f" {op}" if op not in ("none", "?") else "")
    return f"boostcomm bench: {what}, {values('ranks')} ranks - bus bandwidth and speedup by message size"


def draw(sources, baseline=None):
    data = [read(s) for s in sources]
    labels = _labels(sources)
    fig = Figure(figsize=(11.5, 7.5))
    bw_ax, speed_ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    colours = {}
    sizes = set()
    speedup_baselines = []
    speedup_series = 0
    for index, (d, label) in enumerate(zip(data, labels)):
        style, marker = _STYLES[index % len(_STYLES)], _MARKERS[index % len(_MARKERS)]
        suffix = f" ({label})" if len(data) > 1 else ""
        base_name = choose_baseline(d["series"], baseline)
        base_time = {b: t for b, _, t in d["series"].get(base_name, [])}
        for algorithm, points in d["series"].items():
            colour = colours.setdefault(algorithm, f"C{len(colours) % 10}")
            xs = [p[0] for p in points]
            sizes.update(xs)
            bw_ax.plot(xs, [p[1] for p in points], style, marker=marker, markersize=4, color=colour,
                       label=algorithm + suffix)
            if algorithm == base_name:
                continue
            ratio = [(b, base_time[b] / t) for b, _, t in points if b in base_time and t > 0]
            if ratio:
                speed_ax.plot([r[0] for r in ratio], [r[1] for r in ratio], style, marker=marker, markersize=4,
                              color=colour, label=f"{algorithm} / {base_name}{suffix}")
                speedup_series += 1
        memcpy = d["meta"].get("memcpy_GBps")
        if isinstance(memcpy, (int, float)) and memcpy > 0:
            # The copy rate of one core, the reference the bench prints; not
            # drawn when it would squash the data (sweeps of small sizes only).
            peak = max(p[1] for points in d["series"].values() for p in points)
            text = f"memcpy, 1 core: {memcpy:.2f} GB/s{suffix}"
            if memcpy <= 3 * peak:
                bw_ax.axhline(memcpy, color="0.5", linestyle=style, linewidth=0.8, label=text)
            else:
                bw_ax.plot([], [], color="0.5", linestyle=style, linewidth=0.8, label=text + " (off the axis)")
        if base_name and base_name not in speedup_baselines:
            speedup_baselines.append(base_name)
    _size_axis(speed_ax, sizes)
    bandwidths = [p[1] for d in data for points in d["series"].values() for p in points if p[1] > 0]
    if bandwidths and max(bandwidths) > 100 * min(bandwidths):
        # Small messages move bytes 1000x slower than large ones: on a linear
        # axis they all sit on zero.
        bw_ax.set_yscale("log")
        bw_ax.set_ylabel("bus bandwidth (GB/s, log axis;\n1 GB = 1e9 B)")
    else:
        bw_ax.set_ylabel("bus bandwidth (GB/s, 1 GB = 1e9 B)")
    bw_ax.grid(True, which="both", alpha=0.3)
    # Legends right of the panels: the curves cross everywhere inside them.
    outside = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
    bw_ax.legend(**outside)
    base_text = "/".join(speedup_baselines) or "baseline"
    speed_ax.set_ylabel(f"speedup vs {base_text}\n({base_text} time / time)")
    speed_ax.set_xlabel("message size S (bytes, log2 axis; nccl-tests convention, docs/BENCH_JSON.md)")
    speed_ax.axhline(1.0, color="black", linewidth=0.8)
    speed_ax.grid(True, alpha=0.3)
    if speedup_series:
        speed_ax.set_yscale("log", base=2)
        speed_ax.yaxis.set_major_locator(FixedLocator(_ratio_ticks(speed_ax.get_ylim())))
        speed_ax.yaxis.set_minor_locator(NullLocator())
        speed_ax.yaxis.set_major_formatter(FuncFormatter(_ratio_text))
        speed_ax.legend(**outside)
    else:
        speed_ax.text(0.5, 0.5, "no baseline (mpi or native) in this run: no speedup to show",
                      transform=speed_ax.transAxes, ha="center", va="center", fontsize=8)
    title_lines, footer_lines = decorate(fig, _title(data), [(s, d["meta"]) for s, d in zip(sources, data)])
    layout(fig, title_lines, footer_lines, left_inches=1.15, right_inches=3.1)
    return fig
