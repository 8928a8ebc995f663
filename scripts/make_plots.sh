#!/usr/bin/env bash
# Regenerates the charts of docs/PLOTS.md from runs on this machine:
# runs the tools (2 ranks), keeps their JSON in BUILD_DIR/plots/ and draws
# one PNG per chart kind into OUT_DIR with `python3 -m boostcomm.plot`.
#
# Usage: scripts/make_plots.sh [--draw-only] [BUILD_DIR [OUT_DIR]]    (defaults: build docs/img)
#   --draw-only   redraw the PNGs from the JSON of the last run (after a change to the charts)
# `make plots` runs it after building. Takes ~3 minutes on the 2-core
# machines when they are quiet (more under load: the tools time real runs).
set -euo pipefail

draw_only=0
if [[ ${1:-} == --draw-only ]]; then
  draw_only=1
  shift
fi
build=${1:-build}
out=${2:-docs/img}
np=${NP:-2}
cli=$build/tools/boostcomm
data=$build/plots
# The project's environment (matplotlib; `make plots` passes PYTHON).
python=${PYTHON:-.venv/bin/python}
[[ -x $cli ]] || { echo "make_plots: $cli not found (run make build first)" >&2; exit 1; }
mkdir -p "$data" "$out"
# shellcheck source=scripts/mpirun_local.sh
source "$(dirname "$0")/mpirun_local.sh"

run() {
  echo "make_plots: mpirun -np $np $cli $*"
  mpirun -np "$np" --oversubscribe --bind-to none "$cli" "$@" >"$data/last_run.log" 2>&1 ||
    { cat "$data/last_run.log" >&2; exit 1; }
}
plot() {
  # The package from the source tree: plotting reads JSON only.
  PYTHONPATH=python "$python" -m boostcomm.plot --dpi 100 "$@"
}

measure() {
  echo "make_plots: load before the runs: $(uptime)"
  run bench -b 8 -e 16M -f 4 -c allreduce -d float32 -o sum -n 20 -w 5 --output "$data/bench_allreduce.json"
  run bench -b 1K -e 16M -f 4 -c allreduce --algos shm,native,mpi -n 20 -w 5 --output "$data/bench_copy.json"
  run bench -b 1K -e 16M -f 4 -c allreduce --algos shm,native,mpi -n 20 -w 5 --zero-copy \
      --output "$data/bench_zero_copy.json"
  run replay --model resnet50 --comm-share 0.28 --steps 3 --output "$data/replay.json" \
      --timeline "$data/timeline.json"
  run tune -c allreduce,reduce_scatter,allgather -b 1K -e 16M -f 4 --no-knobs --cache "$data/tuning.json"
  echo "make_plots: load after the runs: $(uptime)"
}

if ((draw_only)); then
  echo "make_plots: drawing from the JSON in $data"
else
  measure
fi
plot "$data/bench_allreduce.json" -o "$out/bench_allreduce.png"
plot "$data/bench_copy.json" "$data/bench_zero_copy.json" -o "$out/bench_overlay.png"
plot "$data/replay.json" -o "$out/replay.png"
plot "$data/timeline.json" --step 1 -o "$out/timeline.png"
plot "$data/tuning.json" -o "$out/tuning.png"
