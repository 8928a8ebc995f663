#!/usr/bin/env bash
# The fingerprint cost of ring/rhd, as medians over several runs of the
# bench's own A/B (docs/PERFORMANCE.md section 22).
#
#   scripts/fingerprint_ab.sh ROUNDS RANKS [bench options...]
#   e.g. scripts/fingerprint_ab.sh 5 2 -b 8 -e 512 -f 4 --algos ring,rhd --repeats 9 -n 2000 -w 200
#
# Each round runs `boostcomm bench --interleave --fingerprints-ab` (every
# algorithm beside its @nofp twin, on a communicator with fingerprints off);
# per size and algorithm it prints the medians over rounds and the median of
# the rounds' time/time@nofp ratios. With BOOSTCOMM_FINGERPRINTS=0 in the
# environment both communicators run without them: an A/A control.
set -euo pipefail
rounds=$1 ranks=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/mpirun_local.sh"
export_fp=()
[[ -n "${BOOSTCOMM_FINGERPRINTS:-}" ]] && export_fp=(-x BOOSTCOMM_FINGERPRINTS)
for _ in $(seq "$rounds"); do
  mpirun -np "$ranks" "${export_fp[@]}" "$root/build/tools/boostcomm" bench --interleave --fingerprints-ab "$@" |
    grep -E '^ +[0-9]+[KM]? +[0-9]+ +[a-z_]+(@nofp)? ' || true
done | python3 -c '
import collections, statistics as st, sys
t = collections.defaultdict(list)
for line in sys.stdin:
    f = line.split()
    t[(f[0], f[2])].append(float(f[3]))
for (size, algo), v in t.items():
    if algo.endswith("@nofp") or (size, algo + "@nofp") not in t:
        continue
    off = t[(size, algo + "@nofp")]
    r = [a / b - 1 for a, b in zip(v, off)]
    print(f"{size:>6} {algo:10} fp {st.median(v):8.2f} us  nofp {st.median(off):8.2f} us  "
          f"median ratio {100 * st.median(r):+5.1f}%  rounds " + " ".join(f"{100 * x:+.0f}" for x in r))
'
