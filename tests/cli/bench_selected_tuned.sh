#!/usr/bin/env bash
# CLI check that what boostcomm reports is what runs: `tune` writes a cache,
# its winners are rewritten to non-native algorithms (so the tuned layer
# differs from the table), and `bench --algos selected` under
# BOOSTCOMM_TUNING_CACHE shows selected_algorithm == ran_algorithm at every
# size of the sweep, and the rewritten winner at the tuned sizes.
#   bench_selected_tuned.sh BOOSTCOMM MPIEXEC
set -euo pipefail
bin="$1" mpiexec="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run() { "$mpiexec" -np 2 --oversubscribe --bind-to none "$@"; }

run "$bin" tune -c allreduce,reduce_scatter -b 1K -e 256K -f 16 --samples 2 -w 1 --no-probe --no-knobs \
  --cache "$tmp/tuning.json" > "$tmp/tune.txt"
python3 - "$tmp/tuning.json" <<'PY'
import json, sys
path = sys.argv[1]
cache = json.load(open(path))
for i, e in enumerate(cache["entries"]):
    others = sorted(c["algorithm"] for c in e["candidates"] if c["algorithm"] != "native")
    e["winner"] = others[i % len(others)]
json.dump(cache, open(path, "w"), indent=1)
PY

for coll in allreduce reduce_scatter; do
  BOOSTCOMM_TUNING_CACHE="$tmp/tuning.json" run -x BOOSTCOMM_TUNING_CACHE "$bin" bench -c "$coll" -b 8 -e 4M -f 2 \
    -n 2 -w 1 --repeats 1 --algos selected --output "$tmp/$coll.json" > "$tmp/$coll.txt"
  python3 - "$tmp/$coll.json" "$tmp/tuning.json" "$coll" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
coll = sys.argv[3]
winners = {e["bytes"]: e["winner"] for e in json.load(open(sys.argv[2]))["entries"] if e["collective"] == coll}
assert len(results) >= 15, len(results)
for r in results:
    assert r["check"] == "ok", r
    assert r["selected_algorithm"] == r["ran_algorithm"], r
seen = {r["bytes"]: r["ran_algorithm"] for r in results}
for size, winner in winners.items():
    assert seen.get(size) == winner, (coll, size, winner, seen.get(size))
print(coll, "selected == ran at", len(results), "sizes; tuned sizes", sorted(winners))
PY
done
echo "cli: bench selected_algorithm == ran_algorithm under a tuning cache ok"
