"""`boostcomm tune` caches: per collective, one bar per measured size whose
height is the winner's speedup over native (native time / winner time, the
`x_native` column of the tune table) and whose colour and label name the
winner; grey dots are the other candidates' speedups over native, so the
margin to the runner-up shows too. One panel per collective."""

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .common import decorate, field, format_bytes, layout, number, records


def read(source):
    doc = source.doc
    by_collective = {}
    for where, entry in records(source, doc, "entries", "the cache holds no tuned size"):
        collective = field(source, entry, "collective", where, str)
        size = number(source, entry, "bytes", where)
        winner = field(source, entry, "winner", where, str)
        candidates = field(source, entry, "candidates", where, list)
        times = {}
        for j, c in enumerate(candidates):
            times[field(source, c, "algorithm", f"{where}.candidates[{j}]", str)] = number(
                source, c, "time_us", f"{where}.candidates[{j}]")
        if winner not in times:
            source.fail(f"{where}.winner", f"'{winner}' is not among its candidates")
        dtype = entry.get("dtype", "")
        by_collective.setdefault(collective, []).append((size, str(dtype), winner, times))
    for rows in by_collective.values():
        rows.sort()
    signature = doc.get("signature") if isinstance(doc.get("signature"), dict) else {}
    meta = dict(doc.get("meta")) if isinstance(doc.get("meta"), dict) else {}
    meta.setdefault("version", signature.get("version"))
    return {"meta": meta, "ranks": signature.get("world_size", "?"), "collectives": by_collective}


def speedup_over_native(times, algorithm):
    """native time / algorithm's time; None when native was not measured."""
    native = times.get("native")
    return native / times[algorithm] if native and times[algorithm] > 0 else None


def axis_top(bars, dots=()):
    """Top of a panel's y axis: room over the bars and dots, but a value far
    above the bars' median (42x where the rest are 1-3x: a noisy sample) is
    cut at the axis, not allowed to flatten every other bar."""
    bars = sorted(b for b in bars if b is not None)
    limit = max(4 * bars[len(bars) // 2], 4.0) if bars else 4.0
    typical = [v for v in list(bars) + [d for d in dots if d is not None] if v <= limit]
    return 1.35 * max(typical + [1.0])


def _panel(ax, collective, rows, colours, dtypes):
    xs = list(range(len(rows)))
    ratios = [speedup_over_native(times, winner) for _, _, winner, times in rows]
    others = [[speedup_over_native(times, a) for a in times if a not in (winner, "native")]
              for _, _, winner, times in rows]
    top = axis_top(ratios, [o for row in others for o in row])
    for x, (_, _, winner, _), ratio, other in zip(xs, rows, ratios, others):
        height = ratio if ratio is not None else 0.0
        ax.bar(x, height, color=colours.setdefault(winner, f"C{len(colours) % 10}"), width=0.6)
        other = [o for o in other if o is not None and o <= top]
        ax.scatter([x] * len(other), other, s=10, color="0.4", zorder=3)
        if ratio is None:
            text = f"{winner}\n(no native)"
        else:
            text = f"{winner}\n{ratio:.2f}x" + (" (off the axis)" if ratio > top else "")
        ax.text(x, min(height, top / 1.2), text, ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels([format_bytes(size) + (f"\n{dtype}" if len(dtypes) > 1 else "") for size, dtype, _, _ in rows])
    ax.set_ylim(0, top)
    ax.set_title(collective, fontsize=9, loc="left")
    ax.set_ylabel("speedup over native\n(native time / time)")
    ax.grid(True, axis="y", alpha=0.3)


def draw(sources):
    if len(sources) > 1:
        sources[1].fail(None, "tuning caches are plotted one file at a time (got several)")
    source = sources[0]
    d = read(source)
    collectives = d["collectives"]
    fig = Figure(figsize=(11, 2.2 + 2.6 * len(collectives)))
    axes = fig.subplots(len(collectives), 1, squeeze=False)[:, 0]
    colours = {}
    dtypes = {dtype for rows in collectives.values() for _, dtype, _, _ in rows}
    for ax, (collective, rows) in zip(axes, collectives.items()):
        _panel(ax, collective, rows, colours, dtypes)
    axes[-1].set_xlabel("message size S (bytes)" + (f", {dtypes.pop()}" if len(dtypes) == 1 else ""))
    handles = [Patch(color=c, label=f"winner: {a}") for a, c in colours.items()]
    handles.append(axes[0].scatter([], [], s=10, color="0.4", label="other candidates"))
    axes[0].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    title = f"boostcomm tune: the winner per (collective, size) and its margin over native, {d['ranks']} ranks"
    title_lines, footer_lines = decorate(fig, title, [(source, d["meta"])])
    layout(fig, title_lines, footer_lines, right_inches=1.8)
    return fig
