"""Charts of the tools' JSON: `python3 -m boostcomm.plot FILE.json [...] -o OUT.png`.

The kind of each file is detected from its metadata (detect.py):
  bench     bus bandwidth against size per algorithm, and speedup over mpi / native
  replay    per mode a stacked bar of compute / hidden / exposed communication
  timeline  per-rank Gantt of one step's backward compute and bucket collectives
  tuning    the winner per (collective, size) and its speedup over native
Reads JSON only: works without MPI and without the compiled module.
Reference: docs/PLOTS.md.

    from boostcomm import plot
    fig = plot.figure(["bench.json"])      # a matplotlib Figure (no pyplot)
    plot.save(fig, "bench.png")
"""

from .common import PlotError, Source
from .detect import KINDS, load

__all__ = ["PlotError", "KINDS", "load", "figure", "save"]


def figure(paths, step=0, mode=None, baseline=None):
    """The Figure of the files `paths` (all of one kind; bench files overlay),
    each a path or what load() returned for one. step / mode: which step (and
    mode) of a timeline; baseline: the algorithm bench speedups are relative to
    (default mpi, else native)."""
    if not paths:
        raise PlotError("(no file)", "give at least one JSON file")
    sources = [p if isinstance(p, Source) else load(p) for p in paths]
    kind = sources[0].kind
    for s in sources[1:]:
        if s.kind != kind:
            raise PlotError(s.path, f"is a {s.kind} file; {sources[0].path} is a {kind} file: plot one kind at a time")
    if kind == "bench":
        from . import bench
        fig = bench.draw(sources, baseline=baseline)
    elif kind == "replay":
        from . import replay
        fig = replay.draw(sources)
    elif kind == "tuning":
        from . import tuning
        fig = tuning.draw(sources)
    else:
        from . import timeline
        fig = timeline.draw(sources, step=step, mode=mode)
    fig.boostcomm_kind = kind
    return fig


def save(fig, path, dpi=100):
    """Writes the figure (format from the suffix: .png, .svg, .pdf)."""
    try:
        if str(path).lower().endswith(".png"):
            _save_png(fig, path, dpi)
        else:
            fig.savefig(path, dpi=dpi)
    except OSError as e:
        raise PlotError(str(path), f"cannot write ({e.strerror or e})") from None


def _save_png(fig, path, dpi):
    """A 256-colour palette PNG: a chart has few colours, and the file is a
    third of the RGB one (the committed docs/img stays small)."""
    import io

    from PIL import Image  # matplotlib's own dependency

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    buffer.seek(0)
    Image.open(buffer).convert("RGB").quantize(colors=256).save(path, optimize=True)
