#!/usr/bin/env bash
# Instructions per blocking call on the three hot paths (issue "one door"):
# an 8 B native allreduce (the direct backend call), a 64 B broadcast (the
# small shared-memory call) and a 1 KiB ring allreduce (a schedule on the
# engine). 2 ranks on this host under callgrind; per call = (Ir of 2N calls -
# Ir of N calls) / N on rank 0, so start-up and warm-up cancel out. Only
# rank 0 runs under callgrind: rank 1, some 50x faster, is always first at
# every meeting point, so rank 0 almost never spins waiting for it and the
# count is the path's own (with both under callgrind, spinning made it vary
# by 2x between runs).
# Usage: scripts/callgrind_calls.sh [BUILD_DIR] [N]   (default build, 10000)
set -euo pipefail
build=${1:-build}
n=${2:-10000}
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=/dev/null
source "$here/scripts/mpirun_local.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# total Ir of rank 0 for one bench run: name, calls, env..., -- bench args
irOf() {
  local tag=$1 calls=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local bench=("$build/tools/boostcomm" bench --no-check --repeats 1 -w 20 -n "$calls" "$@")
  # Local ranks inherit mpirun's environment (one host); -x would reach
  # only the first of the two app contexts.
  env "${envs[@]}" mpirun --oversubscribe --bind-to none \
    -np 1 valgrind --tool=callgrind --callgrind-out-file="$out/$tag.$calls" "${bench[@]}" : \
    -np 1 "${bench[@]}" >/dev/null 2>&1
  local total ours
  total=$(awk '/^summary:/ {print $2}' "$out/$tag.$calls")
  # The self cost of boostcomm's own functions (libboostcomm.so).
  ours=$(callgrind_annotate --threshold=100 "$out/$tag.$calls" 2>/dev/null |
    awk '/libboostcomm\.so/ {gsub(",", "", $1); sum += $1} END {print sum + 0}')
  echo "$total $ours"
}

perCall() {
  local tag=$1
  shift
  local a b
  read -r -a a <<<"$(irOf "$tag" "$n" "$@")"
  read -r -a b <<<"$(irOf "$tag" $((2 * n)) "$@")"
  printf '%-32s %7d instructions per call, %6d of them in libboostcomm (rank 0; %d vs %d calls)\n' "$tag" \
    $(((b[0] - a[0]) / n)) $(((b[1] - a[1]) / n)) "$n" $((2 * n))
}

perCall "8 B native allreduce (direct)" BOOSTCOMM_SELECTION=allreduce:0-=native BOOSTCOMM_SHM_SMALL_BYTES=0 -- \
  -c allreduce -b 8 -e 8 --algos selected
perCall "64 B broadcast (small)" BOOSTCOMM_FINGERPRINTS=1 -- -c broadcast -b 64 -e 64 --algos selected
perCall "1 KiB ring allreduce (engine)" BOOSTCOMM_FINGERPRINTS=1 -- -c allreduce -b 1K -e 1K --algos ring
