#!/usr/bin/env python3
"""Compare `boostcomm simulate --output` predictions with `boostcomm bench --output`
measurements (docs/SIMULATOR.md, Validation).

    sim_compare.py BENCH.json SIM.json [--limit 15] [--markdown]

Joins the two files' records on (algorithm, bytes) and prints, per record, the
measured median with its min-max, the prediction and the error
(predicted - measured) / measured; then, per algorithm, the largest error and
how many sizes lie within --limit percent. Exit status 0 whatever the errors
(it reports; it does not judge), 2 on unusable input.
"""
import argparse
import json
import sys


def records(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"sim_compare: cannot read {path}: {e}")
    if "results" not in doc:
        sys.exit(f"sim_compare: {path} has no 'results' (not a bench/simulate JSON file)")
    return {(r["algorithm"], r["bytes"]): r for r in doc["results"]}


def size(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale}{unit}"
    return str(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("sim")
    ap.add_argument("--limit", type=float, default=15.0, help="percent; counted as within")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    measured, predicted = records(args.bench), records(args.sim)
    keys = sorted(set(measured) & set(predicted), key=lambda k: (k[1], k[0]))
    if not keys:
        sys.exit("sim_compare: no (algorithm, bytes) appears in both files")
    if args.markdown:
        print("| size | algorithm | measured ms (min-max) | predicted ms | error |")
        print("|---|---|---:|---:|---:|")
    errors = {}
    for k in keys:
        m, p = measured[k], predicted[k]
        err = (p["time_us"] - m["time_us"]) / m["time_us"] * 100.0
        errors.setdefault(k[0], []).append(err)
        ms = lambda us: f"{us / 1000:.3f}"
        if args.markdown:
            print(f"| {size(k[1])} | {k[0]} | {ms(m['time_us'])} ({ms(m['time_us_min'])}-{ms(m['time_us_max'])}) "
                  f"| {ms(p['time_us'])} | {err:+.1f} % |")
        else:
            print(f"{size(k[1]):>6} {k[0]:>8}  measured {ms(m['time_us']):>10} ms ({ms(m['time_us_min'])}-"
                  f"{ms(m['time_us_max'])})  predicted {ms(p['time_us']):>10} ms  error {err:+6.1f} %")
    print()
    for algo, errs in errors.items():
        within = sum(abs(e) <= args.limit for e in errs)
        print(f"{algo}: error {min(errs):+.1f} .. {max(errs):+.1f} %, within {args.limit:g} %: {within}/{len(errs)}")


if __name__ == "__main__":
    main()
