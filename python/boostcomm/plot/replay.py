"""`boostcomm replay --output` files: per mode one bar of the step, stacked
from the bottom as
  compute alone         compute_time_s - hidden
  compute + hidden comm communication that ran while backward computed
                        (hidden = sync_time_s - exposed_comm_s, at least 0)
  exposed comm          exposed_comm_s: waited for after backward
so the bar's height is compute + exposed; a tick marks the measured step
time (step_time_s, the median of the slowest rank's steps). Above each bar:
the speedup over baseline and the overlap efficiency (hidden / sync).
Several files put their bars side by side, grouped by file."""

from matplotlib.figure import Figure

from .common import decorate, field, layout, number

SEGMENTS = (("compute alone", "#9ecae1"), ("compute + hidden comm", "#31a354"), ("exposed comm", "#e6550d"))
_ORDER = ("baseline", "fused", "boosted")


def read(source):
    """{"meta", "model", "ranks", "modes": [(name, numbers dict)]} of one file."""
    doc = source.doc
    modes = field(source, doc, "modes", "", dict)
    if not modes:
        source.fail("modes", "empty: the replay ran no mode")
    names = [m for m in _ORDER if m in modes] + [m for m in modes if m not in _ORDER]
    rows = []
    for name in names:
        where = f"modes.{name}"
        m = modes[name]
        values = {key: number(source, m, key, where)
                  for key in ("step_time_s", "compute_time_s", "sync_time_s", "exposed_comm_s", "speedup",
                              "overlap_efficiency")}
        values["hidden_s"] = max(0.0, values["sync_time_s"] - values["exposed_comm_s"])
        values["algorithm"] = m.get("algorithm", "") if isinstance(m.get("algorithm"), str) else ""
        # Link rows (files from before link accounting have none).
        seed = m.get("seed_table") if isinstance(m.get("seed_table"), dict) else {}
        values["links"] = {key: number(source, seed, key, where + ".seed_table")
                           for key in ("inter_node_utilisation", "intra_node_utilisation", "inter_node_congestion")
                           if key in seed}
        rows.append((name, values))
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return {"meta": meta, "model": str(doc.get("model", "?")), "ranks": doc.get("ranks", "?"), "modes": rows}


def segments(values):
    """The three stacked heights in seconds, bottom first."""
    hidden = min(values["hidden_s"], values["compute_time_s"])
    return (values["compute_time_s"] - hidden, hidden, values["exposed_comm_s"])


def draw(sources):
    data = [read(s) for s in sources]
    bars = []  # (x label, values)
    for source, d in zip(sources, data):
        for name, values in d["modes"]:
            label = name if len(data) == 1 else f"{source.label}\n{name}"
            bars.append((label, values))
    fig = Figure(figsize=(max(8.5, 1.4 * len(bars) + 4.5), 6))
    ax = fig.subplots()
    xs = list(range(len(bars)))
    bottoms = [0.0] * len(bars)
    for index, (name, colour) in enumerate(SEGMENTS):
        heights = [segments(v)[index] * 1e3 for _, v in bars]
        ax.bar(xs, heights, bottom=bottoms, color=colour, width=0.6, label=name, edgecolor="white", linewidth=0.5)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    steps = [v["step_time_s"] * 1e3 for _, v in bars]
    ax.hlines(steps, [x - 0.36 for x in xs], [x + 0.36 for x in xs], color="black", linewidth=1.5, zorder=3,
              label="measured step time")
    top = max(bottoms + steps) if bars else 1.0
    for x, (_, v), height in zip(xs, bars, bottoms):
        text = f"{v['speedup']:.2f}x\noverlap {100 * v['overlap_efficiency']:.0f}%"
        if v["algorithm"]:
            text += f"\n{v['algorithm']}"
        links = v.get("links", {})
        if "inter_node_utilisation" in links and "inter_node_congestion" in links:
            text += (f"\ninter link {100 * links['inter_node_utilisation']:.0f}%, "
                     f"congested {100 * links['inter_node_congestion']:.0f}%")
        ax.text(x, max(height, v["step_time_s"] * 1e3) + 0.02 * top, text, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs)
    ax.set_xticklabels([label for label, _ in bars])
    ax.set_ylim(0, top * 1.3)
    ax.set_ylabel("time per training step (ms)")
    ax.set_xlabel("mode (speedup = baseline step / step; overlap = hidden / sync time)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    models = "/".join(sorted({d["model"] for d in data}))
    ranks = "/".join(sorted({str(d["ranks"]) for d in data}))
    title = f"boostcomm replay: {models} on {ranks} ranks - step time split into compute and communication"
    title_lines, footer_lines = decorate(fig, title, [(s, d["meta"]) for s, d in zip(sources, data)])
    layout(fig, title_lines, footer_lines, right_inches=2.0)
    return fig
