"""Merges run_suite.py --json outputs into the markdown tables of
docs/PYTHON.md ("PyTorch's conformance suite"): counts per backend and world
size, then one row per test that is not skipped on both backends alike.

    python3 summarize.py OUT.md RESULT.json|BACKEND.WS.log ...   (any mix of backends, world sizes, parts)
"""
import collections
import json
import os
import re
import sys


LINE = re.compile(r"^(PASS|SKIP|FAIL|ERROR) +(test\w+) \(([\d.]+) s\)(?:: (.*))?$")


def load(paths):
    """JSON files (--json), or run_suite.py's printed log named BACKEND.WS.log
    (its PASS / SKIP / FAIL / ERROR lines: what a run cut short leaves)."""
    runs = collections.defaultdict(dict)  # (backend, ws) -> test -> outcome dict
    for p in paths:
        if p.endswith(".json"):
            with open(p) as f:
                d = json.load(f)
            runs[(d["backend"], d["world_size"])].update(d["outcomes"])
            continue
        backend, ws = os.path.basename(p).split(".")[:2]
        with open(p) as f:
            for line in f:
                m = LINE.match(line.rstrip("\n"))
                if m:
                    runs[(backend, int(ws))][m[2]] = {"outcome": m[1], "detail": m[4] or "", "seconds": float(m[3])}
    return runs


def cell(o):
    if o is None:
        return "-"
    detail = o["detail"].replace("|", "/")
    return o["outcome"].lower() + (f" ({detail[:110]})" if detail and o["outcome"] != "PASS" else "")


def main(out, paths):
    runs = load(paths)
    lines = ["| backend | world size | pass | fail | error | skip | total |", "|---|---|---|---|---|---|---|"]
    for (backend, ws), outcomes in sorted(runs.items()):
        c = collections.Counter(o["outcome"] for o in outcomes.values())
        lines.append(f"| {backend} | {ws} | {c['PASS']} | {c['FAIL']} | {c['ERROR']} | {c['SKIP']} | {len(outcomes)} |")
    lines.append("")
    for ws in sorted({ws for _, ws in runs}):
        b, g = runs.get(("boostcomm", ws), {}), runs.get(("gloo", ws), {})
        names = sorted(set(b) | set(g))
        lines += [f"World size {ws}: every test that ran (passed, failed or errored) on either backend "
                  "(\"-\": not run in the recorded session).", "",
                  "| test | boostcomm | gloo |", "|---|---|---|"]
        for n in names:
            ob, og = b.get(n), g.get(n)
            ran = [o for o in (ob, og) if o and o["outcome"] != "SKIP"]
            if not ran:
                continue  # skipped on both (or not run on one): counted by reason below
            lines.append(f"| `{n}` | {cell(ob)} | {cell(og)} |")
        skipped = collections.Counter(o["detail"] for n, o in (g or b).items()
                                      if o["outcome"] == "SKIP" and (b.get(n) or {}).get("outcome", "SKIP") == "SKIP")
        lines += ["", f"Skipped at world size {ws} ({'gloo' if g else 'boostcomm'}'s reasons), by reason:", ""]
        lines += [f"- {count} x {reason}" for reason, count in skipped.most_common()]
        lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
