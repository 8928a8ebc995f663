#!/usr/bin/env bash
# Runs the whole test suite several times, each from a fresh clone of this
# repository's HEAD, some of them with a competing load on every core, and
# lists every failure: how docs/TESTING.md's flake counts are measured.
#
# Usage: scripts/flake_hunt.sh [RUNS [LOADED]]   (default 5 runs, 2 of them loaded)
#   FLAKE_DIR    where the clones and logs go (default /tmp/boostcomm-flake-hunt)
#   CTEST_ARGS   passed to make test (default: make's own)
# A loaded run starts one busy loop per core (nice 0, like a second build)
# before `make test` and stops them after. Every run builds in its own
# clone, as a newcomer would; the virtual environment is shared (VENV), since
# it only holds the pinned PyPI packages.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
loaded=${2:-2}
dir=${FLAKE_DIR:-/tmp/boostcomm-flake-hunt}
venv=$repo/.venv
mkdir -p "$dir"
summary=$dir/summary.txt
: >"$summary"
commit=$(git -C "$repo" rev-parse --short HEAD)

load_pids=()
start_load() {
  for _ in $(seq "$(nproc)"); do
    (while :; do :; done) &
    load_pids+=($!)
  done
}
stop_load() {
  ((${#load_pids[@]})) && kill "${load_pids[@]}" 2>/dev/null || true
  load_pids=()
}
trap stop_load EXIT

for i in $(seq "$runs"); do
  clone=$dir/run$i
  rm -rf "$clone"
  git clone --quiet "$repo" "$clone"
  kind=quiet
  # The loaded runs are the last ones (the first run's build is then quiet too).
  if ((i > runs - loaded)); then kind=loaded; start_load; fi
  began=$SECONDS
  set +e
  make -C "$clone" test VENV="$venv" ${CTEST_ARGS:+CTEST_ARGS="$CTEST_ARGS"} >"$dir/run$i.log" 2>&1
  rc=$?
  set -e
  stop_load
  failed=$(grep -E '^\s+[0-9]+ - ' "$dir/run$i.log" | sed -E 's/^\s+[0-9]+ - //' | tr '\n' ';' || true)
  totals=$(grep -E 'tests passed, [0-9]+ tests failed out of' "$dir/run$i.log" | tail -1 || true)
  line="run $i ($kind, $commit): rc $rc, $((SECONDS - began)) s; ${totals:-no ctest summary}; failed: ${failed:-none}"
  echo "$line" | tee -a "$summary"
done
echo "flake_hunt: summary in $summary"
