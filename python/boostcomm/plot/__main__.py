"""`python3 -m boostcomm.plot FILE.json [FILE2.json ...] -o OUT.png`

Exit status: 0 written; 2 bad input or usage (one line on stderr naming the
file and the field, no traceback)."""

import argparse
import sys

_USAGE_EXAMPLES = """examples:
  python3 -m boostcomm.plot build/demo_bench.json -o bench.png
  python3 -m boostcomm.plot before.json after.json -o compare.png     # bench files overlay
  python3 -m boostcomm.plot build/demo_replay.json -o replay.png
  python3 -m boostcomm.plot trace.json --step 2 --mode boosted -o gantt.png
  python3 -m boostcomm.plot boostcomm_tuning.json -o tuning.png
docs/PLOTS.md shows one chart of each kind."""


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m boostcomm.plot", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Draw a chart of boostcomm's JSON: bench results, replay results, a tuning cache or a "
                    "Chrome-trace timeline (the kind is detected from the file).", epilog=_USAGE_EXAMPLES)
    parser.add_argument("files", nargs="+", metavar="FILE.json", help="input files, all of one kind")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.png", help="image to write (.png, .svg, .pdf)")
    parser.add_argument("--step", type=int, default=0, help="timeline: which step to draw (default 0)")
    parser.add_argument("--mode", help="timeline of `boostcomm replay`: draw only this mode (baseline, fused, boosted)")
    parser.add_argument("--baseline", help="bench: speedups are relative to this algorithm (default mpi, else native)")
    parser.add_argument("--dpi", type=int, default=100, help="resolution of a PNG (default 100)")
    args = parser.parse_args(argv)
    if args.step < 0:
        parser.error(f"--step: {args.step} is negative")
    if args.dpi <= 0:
        parser.error(f"--dpi: {args.dpi} is not positive")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The files first: bad input is reported without loading matplotlib (~0.4 s).
    from . import PlotError, load
    try:
        sources = [load(path) for path in args.files]
    except PlotError as e:
        print(f"boostcomm.plot: error: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
    except ImportError:
        print("boostcomm.plot: error: matplotlib is not installed (Debian: apt-get install python3-matplotlib, "
              "or run scripts/install_deps.sh)", file=sys.stderr)
        return 2
    matplotlib.use("Agg")  # files only: no display needed
    from . import figure, save
    try:
        fig = figure(sources, step=args.step, mode=args.mode, baseline=args.baseline)
        save(fig, args.output, dpi=args.dpi)
    except PlotError as e:
        print(f"boostcomm.plot: error: {e}", file=sys.stderr)
        return 2
    print(f"boostcomm.plot: wrote {args.output} ({fig.boostcomm_kind}, {len(args.files)} file"
          f"{'s' if len(args.files) > 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
