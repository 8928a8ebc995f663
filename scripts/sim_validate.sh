#!/usr/bin/env bash
# sim_validate.sh: the simulator's prediction error on the machine it runs on
# (docs/SIMULATOR.md, Validation). Measures the job's topology (links, node
# memory), measures allreduce with `boostcomm bench`, simulates the same sweep
# on the measured cluster (`simulate --topology`) and compares the two.
#
#   sim_validate.sh [--np 2] [--emu] [--out DIR] [--bin build/tools/boostcomm]
#                   [-b 1M] [-e 256M] [-f 2] [--algos native,ring,rhd] [--iters 5] [--repeats 5]
#
# --emu runs the job on the emulated cluster (scripts/emucluster.sh up ... first;
# its state and EMUCLUSTER_PREFIX are used as they are) and probes links up to
# 64 MiB, so that a token-bucket-shaped link shows its rate, not its bursts.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
np=2 emu=0 out="sim_validation" bin="build/tools/boostcomm"
minb=1M maxb=256M factor=2 algos=native,ring,rhd iters=5 repeats=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --np) np="$2"; shift 2 ;;
    --emu) emu=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -b) minb="$2"; shift 2 ;;
    -e) maxb="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    --algos) algos="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "sim_validate: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "sim_validate: no boostcomm binary at '$bin' (--bin)" >&2; exit 2; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
probe=()
if (( emu )); then
  launch() { "$SCRIPT_DIR/emucluster.sh" run -- -np "$np" "$@"; }
  probe=(--probe-sizes 8,4K,64K,1M,4M,16M,64M)
else
  launch() { mpirun -np "$np" --oversubscribe --bind-to none "$@"; }
fi

echo "# $(date -u +%FT%TZ) $(hostname), load: $(cut -d' ' -f1-3 /proc/loadavg)"
launch "$bin" topo "${probe[@]}" --output "$out/topo1.json" | sed 's/^/# /'
launch "$bin" topo "${probe[@]}" --output "$out/topo2.json" > /dev/null
launch "$bin" bench -c allreduce -b "$minb" -e "$maxb" -f "$factor" -n "$iters" -w 2 --repeats "$repeats" \
  --algos "$algos" --output "$out/bench.json" > "$out/bench.txt"
launch "$bin" topo "${probe[@]}" --output "$out/topo3.json" > /dev/null
"$bin" simulate --topology "$out/topo1.json,$out/topo2.json,$out/topo3.json" allreduce -b "$minb" -e "$maxb" -f "$factor" --algos "$algos" \
  --output "$out/sim.json" > "$out/sim.txt"
head -1 "$out/sim.txt"
echo "# $(date -u +%FT%TZ) done, load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$SCRIPT_DIR/sim_compare.py" "$out/bench.json" "$out/sim.json"
