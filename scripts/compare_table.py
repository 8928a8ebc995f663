#!/usr/bin/python3
"""Markdown before/after table of a scripts/compare_builds.sh run.

    /usr/bin/python3 scripts/compare_table.py OUT_DIR

Reads OUT_DIR/<round>/<before|after>/{bench,resnet50,bert,ddp}.json and
OUT_DIR/runs.jsonl. Every metric: the median over rounds of BEFORE and of
AFTER, AFTER/BEFORE of those medians, and the range of the per-round ratios
(each round ran both trees back to back, so its ratio is the paired one; the
range is the noise to judge a difference against). Times: lower is better,
so a ratio > 1 means AFTER is slower.
"""

import json
import math
import os
import statistics
import sys

TREES = ("before", "after")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def size_label(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def bench_metrics(doc):
    """{metric: value} and {metric: ran algorithm} from one bench JSON."""
    out, algo, mpi = {}, {}, []
    for r in doc.get("results", []):
        if r.get("algorithm") == "selected":
            key = f"bench allreduce {size_label(r['bytes'])}, selected (µs)"
            out[key] = r["time_us"]
            algo[key] = r.get("ran_algorithm", "?")
        elif r.get("algorithm") == "mpi":
            mpi.append(r["time_us"])
    sel = [v for v in out.values()]
    if sel:
        out["bench selected, geomean over sizes (µs)"] = geomean(sel)
    if mpi:
        out["bench MPI_Allreduce (control, untouched by the refactor), geomean (µs)"] = geomean(mpi)
    return out, algo


def replay_metrics(doc, name):
    out = {}
    for mode in ("baseline", "fused", "boosted"):
        m = doc.get("modes", {}).get(mode)
        if m:
            out[f"replay {name} {mode}: step (ms)"] = m["step_time_s"] * 1e3
    for mode in ("baseline", "fused", "boosted"):
        m = doc.get("modes", {}).get(mode)
        if m:
            out[f"replay {name} {mode}: exposed comm (ms)"] = m["exposed_comm_s"] * 1e3
    if "compute_time_s" in doc:
        out[f"replay {name}: emulated compute (ms)"] = doc["compute_time_s"] * 1e3
    return out


def ddp_metrics(doc):
    med = doc["median_seconds"]
    name = doc.get("model", "ddp")
    out = {
        f"DDP {name}: gloo step (ms)": med["gloo_step"] * 1e3,
        f"DDP {name}: boostcomm step (ms)": med["boostcomm_step"] * 1e3,
        f"DDP {name}: boostcomm / gloo step": med["boostcomm_step"] / med["gloo_step"],
        f"DDP {name}: gloo overhead, step - no_sync floor (ms)": doc["gloo_overhead_ms"],
        f"DDP {name}: boostcomm overhead, step - no_sync floor (ms)": doc["boostcomm_overhead_ms"],
    }
    return out


def fmt(v):
    if v is None:
        return "—"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    rounds = sorted((int(d) for d in os.listdir(out_dir) if d.isdigit()))
    runs = []
    if os.path.exists(os.path.join(out_dir, "runs.jsonl")):
        with open(os.path.join(out_dir, "runs.jsonl")) as f:
            runs = [json.loads(line) for line in f if line.strip()]
    failed = {(r["round"], r["tree"], r["case"]) for r in runs if r["rc"] != 0}

    # values[metric][tree][round] = value; order = first-seen metric order
    values, order, algos = {}, [], {t: {} for t in TREES}
    for rnd in rounds:
        for tree in TREES:
            base = os.path.join(out_dir, str(rnd), tree)
            per_case = {}
            for case in ("bench", "resnet50", "bert", "ddp"):
                if (rnd, tree, case) in failed:
                    continue
                doc = load(os.path.join(base, f"{case}.json"))
                if doc is None:
                    continue
                if case == "bench":
                    m, a = bench_metrics(doc)
                    for k, v in a.items():
                        algos[tree].setdefault(k, set()).add(v)
                elif case == "resnet50":
                    m = replay_metrics(doc, "ResNet-50")
                elif case == "bert":
                    m = replay_metrics(doc, "BERT-Large")
                else:
                    m = ddp_metrics(doc)
                per_case.update(m)
            for k, v in per_case.items():
                if k not in values:
                    values[k] = {t: {} for t in TREES}
                    order.append(k)
                values[k][tree][rnd] = v

    meta = {}
    if os.path.exists(os.path.join(out_dir, "meta.txt")):
        with open(os.path.join(out_dir, "meta.txt")) as f:
            for line in f:
                key, _, val = line.partition(":")
                meta[key.strip()] = val.strip()

    print(f"### Before/after ({len(rounds)} round(s), interleaved; medians over rounds)\n")
    for key in ("before", "after", "replay compute", "ddp", "uptime at start", "uptime at end", "elapsed"):
        if key in meta:
            print(f"- {key}: `{meta[key]}`")
    if runs:
        loads = [r[k] for r in runs for k in ("load1_start", "load1_end")]
        print(f"- 1-minute load during the runs: {min(loads):.2f}–{max(loads):.2f}")
        secs = {}
        for r in runs:
            secs.setdefault(r["case"], []).append(r["seconds"])
        print("- seconds per run (median): " + ", ".join(f"{c} {statistics.median(s):.0f}" for c, s in secs.items()))
    if failed:
        print(f"- **failed runs** (left out): {', '.join(f'round {r} {t} {c}' for r, t, c in sorted(failed))}")
    print()
    print("| metric | before | after | after/before | per-round ratios | n |")
    print("|---|---:|---:|---:|---|---:|")
    for k in order:
        b, a = values[k]["before"], values[k]["after"]
        mb = statistics.median(b.values()) if b else None
        ma = statistics.median(a.values()) if a else None
        # A ratio of a negative or zero value (an overhead below its noise) means nothing.
        ratio = ma / mb if mb and ma is not None and mb > 0 and ma >= 0 else None
        paired = [a[r] / b[r] for r in rounds if r in a and r in b and b[r] > 0 and a[r] >= 0]
        spread = "—"
        if paired:
            lo, hi = min(paired), max(paired)
            spread = f"{lo:.2f}" if len(paired) == 1 else f"{lo:.2f}–{hi:.2f}"
        label = k
        if k in algos["before"] or k in algos["after"]:
            ab = "/".join(sorted(algos["before"].get(k, {"?"})))
            aa = "/".join(sorted(algos["after"].get(k, {"?"})))
            label += f" [{ab}" + ("" if ab == aa else f" → {aa}") + "]"
        print(f"| {label} | {fmt(mb)} | {fmt(ma)} | {'—' if ratio is None else f'{ratio:.2f}'} | {spread} | {len(paired)} |")
    print()
    print("Times: lower is better; after/before > 1 means AFTER is slower. [algorithm] = what the selection "
          "ran (bench `ran_algorithm`). Per-round ratios pair the two trees' back-to-back runs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
