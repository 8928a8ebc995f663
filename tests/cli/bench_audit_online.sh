#!/usr/bin/env bash
# CLI check of the multi-node default selection and `bench --audit`, on one
# host with a declared 2 x 2 layout (BOOSTCOMM_NODE_LAYOUT, so the model and
# online selection decide): the link facts and one decision per size class
# are logged, 'selected' reports what it runs at every size (its warm-up
# covers the trials), results check ok, and the audit prints one verdict per
# size and exits 0 (within the margin) or 3 (slower than it), never anything
# else. Timing is not asserted: a unit test must not depend on this machine's
# load; docs/TUNING.md has the measured audits.
#   bench_audit_online.sh BOOSTCOMM MPIEXEC
set -euo pipefail
bin="$1" mpiexec="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

rc=0
BOOSTCOMM_NODE_LAYOUT=2,2 BOOSTCOMM_LOG_SELECTION=1 \
  "$mpiexec" -np 4 --oversubscribe --bind-to none -x BOOSTCOMM_NODE_LAYOUT -x BOOSTCOMM_LOG_SELECTION \
  "$bin" bench -c allreduce -b 4K -e 1M -f 16 -n 2 -w 1 --repeats 1 --algos native,ring,rhd,selected \
  --audit --audit-margin 25 --output "$tmp/bench.json" > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
cat "$tmp/out.txt" "$tmp/err.txt"
[[ $rc -eq 0 || $rc -eq 3 ]] || { echo "bench --audit exited $rc (want 0 or 3)"; exit 1; }
grep -q "^\[boostcomm\] link facts (2x2 nodes): inter-node measured" "$tmp/err.txt"
# 4 KiB, 64 KiB and 1 MiB are three size classes: one decision each.
[[ $(grep -c "^\[boostcomm\] selection: allreduce" "$tmp/err.txt") -eq 3 ]]
[[ $(grep -cE "^ +[0-9]+[KM]? +[a-z]+ +[0-9.]+ +[a-z]+ +[0-9.]+ +[0-9.]+x +(ok|SLOW)$" "$tmp/out.txt") -eq 3 ]]
if [[ $rc -eq 3 ]]; then grep -q " SLOW$" "$tmp/out.txt"; else ! grep -q " SLOW$" "$tmp/out.txt"; fi
python3 - "$tmp/bench.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
selected = [r for r in results if r["algorithm"] == "selected"]
assert len(selected) == 3, selected
for r in results:
    assert r["check"] == "ok", r
for r in selected:
    assert r["selected_algorithm"] == r["ran_algorithm"], r
print("selected == ran at", [(r["bytes"], r["ran_algorithm"]) for r in selected])
PY
echo "cli: multi-node default selection and bench --audit ok"
