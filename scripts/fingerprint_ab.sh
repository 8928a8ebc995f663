#!/usr/bin/env bash
# The fingerprint cost of ring/rhd, as medians over several runs of the
# bench's own A/B (docs/PERFORMANCE_HISTORY.md section 22).
#
#   scripts/fingerprint_ab.sh ROUNDS RANKS [bench options...]
#   e.g. scripts/fingerprint_ab.sh 5 2 -b 8 -e 512 -f 4 --algos ring,rhd --repeats 9 -n 2000 -w 200
#
# Each round runs `boostcomm bench --interleave --fingerprints-ab` (every
# algorithm beside its @nofp twin, on a communicator with fingerprints off);
# per size and algorithm it prints the medians over rounds and the median of
# the rounds' time/time@nofp ratios. With BOOSTCOMM_FINGERPRINTS=0 in the
# environment both communicators run without them: an A/A control.
# When build/bench/core_latency exists, a 0.5 s probe before and after each
# round tags it with the host's mode (docs/PERFORMANCE.md, "Method"): fast
# (both probes under 60 ns one way), slow (both over 100 ns) or mixed; the
# medians are then also printed per mode.
set -euo pipefail
rounds=$1 ranks=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/mpirun_local.sh"
export_fp=()
[[ -n "${BOOSTCOMM_FINGERPRINTS:-}" ]] && export_fp=(-x BOOSTCOMM_FINGERPRINTS)
probe="$root/build/bench/core_latency"
latency() {  # ns, or 0 when there is no probe or it printed nothing
  local v=""
  [[ -x "$probe" ]] && { v=$("$probe" 0.5 2>/dev/null | awk '/^core_latency:/ {print $7}') || v=""; }
  [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 0
}
# Times come from the bench's JSON (--output; full precision: the table's
# two decimals are a 3% step at 0.3 us), as "BYTES - ALGORITHM TIME_US".
json=$(mktemp)
trap 'rm -f "$json"' EXIT
for _ in $(seq "$rounds"); do
  before=$(latency)
  rm -f "$json"
  mpirun -np "$ranks" "${export_fp[@]}" "$root/build/tools/boostcomm" bench --interleave --fingerprints-ab \
    --output "$json" "$@" >/dev/null || true
  after=$(latency)
  echo "round $before $after"
  if [[ -s "$json" ]]; then  # a failed round adds no rows (its mode line stays)
    python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(r["bytes"], "-", r["algorithm"], r["time_us"])' "$json"
  fi
done | python3 -c '
import collections, statistics as st, sys
rounds = []  # per round: (mode, {(size, algo): time})
for line in sys.stdin:
    f = line.split()
    if not f:
        continue
    if f[0] == "round":
        a, b = float(f[1]), float(f[2])
        mode = "fast" if 0 < a < 60 and 0 < b < 60 else "slow" if a > 100 and b > 100 else "mixed" if a > 0 else "?"
        rounds.append((mode, {}))
    else:
        rounds[-1][1][(f[0], f[2])] = float(f[3])
def summary(selected, label):
    seen = {k for _, t in selected for k in t}
    keys = sorted((k for k in seen if not k[1].endswith("@nofp") and (k[0], k[1] + "@nofp") in seen),
                  key=lambda k: (float(k[0].rstrip("KM")) * {"K": 1024, "M": 1 << 20}.get(k[0][-1], 1), k[1]))
    for size, algo in keys:
        both = [t for _, t in selected if (size, algo) in t and (size, algo + "@nofp") in t]
        v = [t[(size, algo)] for t in both]
        off = [t[(size, algo + "@nofp")] for t in both]
        r = [a / b - 1 for a, b in zip(v, off)]
        print(f"{label:>5} {size:>6} {algo:10} fp {st.median(v):8.3f} us  nofp {st.median(off):8.3f} us  "
              f"median ratio {100 * st.median(r):+5.1f}%  rounds " + " ".join(f"{100 * x:+.1f}" for x in r))
print("# modes of the rounds: " + " ".join(m for m, _ in rounds))
summary(rounds, "all")
for mode in ("fast", "slow", "mixed"):
    chosen = [r for r in rounds if r[0] == mode]
    if chosen and len(chosen) < len(rounds):
        summary(chosen, mode)
'
