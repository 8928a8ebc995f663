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
# it only holds the pinned PyPI packages, and so is the compiler cache (ccache,
# where installed; FLAKE_CCACHE=0 turns it off): the build is not what is
# hunted, and a cached build leaves the time to the runs.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
loaded=${2:-2}
dir=${FLAKE_DIR:-/tmp/boostcomm-flake-hunt}
venv=$repo/.venv
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)  # absolute: ccache's CCACHE_BASEDIR must be
summary=$dir/summary.txt
if [[ ${FLAKE_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  # Ninja and one compiler name, and every run builds at one path
  # ($dir/clone, moved to run$i afterwards): the unity build's batch files
  # include the sources by absolute path, and gtest's assertions expand
  # __FILE__, so only the same path gives a later run the first run's objects.
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CC=gcc CXX=g++
  export CCACHE_BASEDIR=$dir CCACHE_DIR=$dir/ccache
  command -v ninja >/dev/null && export CMAKE_GENERATOR=Ninja
fi
: >"$summary"
# Every run tests the commit that was HEAD when the hunt began, whatever is
# committed meanwhile.
commit=$(git -C "$repo" rev-parse HEAD)

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
  clone=$dir/clone
  rm -rf "$clone" "$dir/run$i"
  git clone --quiet "$repo" "$clone"
  git -C "$clone" checkout --quiet --detach "$commit"
  kind=quiet
  # The loaded runs are the last ones (the first run's build is then quiet too).
  if ((i > runs - loaded)); then kind=loaded; start_load; fi
  began=$SECONDS
  set +e
  make -C "$clone" test VENV="$venv" ${CTEST_ARGS:+CTEST_ARGS="$CTEST_ARGS"} >"$dir/run$i.log" 2>&1
  rc=$?
  set -e
  stop_load
  mv "$clone" "$dir/run$i"
  failed=$(grep -E '^\s+[0-9]+ - ' "$dir/run$i.log" | sed -E 's/^\s+[0-9]+ - //' | tr '\n' ';' || true)
  totals=$(grep -E 'tests passed, [0-9]+ tests failed out of' "$dir/run$i.log" | tail -1 || true)
  line="run $i ($kind, ${commit:0:7}): rc $rc, $((SECONDS - began)) s; ${totals:-no ctest summary}; failed: ${failed:-none}"
  echo "$line" | tee -a "$summary"
done
echo "flake_hunt: summary in $summary"
