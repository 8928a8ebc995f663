#!/usr/bin/env bash
# Side-by-side performance of two boostcomm builds, interleaved in one run
# (issue 13, "Must not regress"): the 2-rank allreduce bench sweep, the
# ResNet-50 and BERT-Large replays, and DDP on a torchvision model (gloo vs
# the boostcomm backend). Prints a markdown before/after table (medians over
# rounds) and writes it to OUT_DIR/table.md.
#
#   scripts/compare_builds.sh BEFORE_REPO AFTER_REPO OUT_DIR [ROUNDS]
#
# Both repos must be built already (`make build`: <repo>/build/tools/boostcomm
# and the Python package in <repo>/build/python). Each tree runs its own CLI,
# its own examples/python/ddp_benchmark.py and its own scripts/mpirun_local.sh.
#
# Order: in every round each case runs once per tree, BEFORE then AFTER in
# odd rounds and AFTER then BEFORE in even rounds (ABBA across rounds), so a
# drift in machine load hits both trees alike. Results go to
# OUT_DIR/<round>/<before|after>/<case>.{json,log}; OUT_DIR/runs.jsonl has one
# line per run (exit status, seconds, load average before and after).
#
# Environment (all optional):
#   QUICK=1              tiny step counts: a functional smoke test, not a measurement
#   CASES="bench resnet50 bert ddp"   the cases to run, in this order
#   NP=2                 ranks
#   RUN_TIMEOUT=900      seconds before one run is killed (it is then reported as failed)
#   REPLAY_COMPUTE=fixed (default) both trees replay the same emulated compute per step:
#                        COMPUTE_RESNET50_S (0.040) and COMPUTE_BERT_S (0.285), the
#                        quiet-machine calibration at --comm-share 0.28 / 0.38
#                        (docs/PERF_REPLAY.md: sync 14.8-16.6 ms and 170-178 ms).
#                REPLAY_COMPUTE=calibrated  each run calibrates itself (--comm-share 0.28 / 0.38,
#                        as `make demo`); the calibration phase varies 10x under load
#                        here, and with it the step time, so before/after step times
#                        then differ by the calibration's noise.
#   DDP_MODEL=resnet18   any torchvision.models constructor taking num_classes
#   DDP_ARGS="..."       extra ddp_benchmark.py arguments (default: --batch 16 --reps 3 --steps 3 --warmup 2)
#   DDP_HARNESS_REPO=DIR run DIR/examples/python/ddp_benchmark.py for both trees
#                        (default: each tree's own; the module always comes from the tree)
#   WAIT_LOAD=2.5        before starting, wait (up to 20 min) until the 1-minute load is below this
set -euo pipefail

usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; }
if (($# < 3 || $# > 4)); then
  usage >&2
  exit 2
fi
BEFORE=$(cd "$1" && pwd)
AFTER=$(cd "$2" && pwd)
OUT=$3
ROUNDS=${4:-3}
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds: ROUNDS must be a positive integer, not '$ROUNDS'" >&2; exit 2; }

QUICK=${QUICK:-0}
CASES=${CASES:-bench resnet50 bert ddp}
NP=${NP:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
REPLAY_COMPUTE=${REPLAY_COMPUTE:-fixed}
COMPUTE_RESNET50_S=${COMPUTE_RESNET50_S:-0.040}
COMPUTE_BERT_S=${COMPUTE_BERT_S:-0.285}
DDP_MODEL=${DDP_MODEL:-resnet18}
HERE0=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PY:-$HERE0/.venv/bin/python}  # the project's environment (make deps): torch 2.13.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TABLE_PY=$HERE/compare_table.py

# Make's `make bench` sweep (Makefile BENCH_ARGS: 8 B .. 16M by 4, i.e. up to 8 MiB), only the
# selection table's choice and raw MPI (the control: the refactor does not touch it), the two
# interleaved per size, 5 blocks per median.
BENCH_ARGS=(bench -b 8 -e 16M -f 4 -c allreduce -d float32 -o sum -n 20 -w 5
            --algos "selected,mpi" --interleave --repeats 5)
R50_STEPS=5 BERT_STEPS=3 REPLAY_WARMUP=1
DDP_DEFAULT_ARGS="--batch 16 --reps 3 --steps 3 --warmup 2"
if [[ "$QUICK" == 1 ]]; then
  BENCH_ARGS=(bench -b 8 -e 128K -f 4 -c allreduce -d float32 -o sum -n 5 -w 1
              --algos "selected,mpi" --interleave --repeats 1)
  R50_STEPS=2 BERT_STEPS=1 REPLAY_WARMUP=1
  DDP_DEFAULT_ARGS="--batch 8 --reps 1 --steps 1 --warmup 1"
fi
read -r -a DDP_EXTRA <<<"${DDP_ARGS:-$DDP_DEFAULT_ARGS}"
case "$REPLAY_COMPUTE" in
  fixed) R50_CAL=(--comm-share 0 --compute-seconds "$COMPUTE_RESNET50_S")
         BERT_CAL=(--comm-share 0 --compute-seconds "$COMPUTE_BERT_S") ;;
  calibrated) R50_CAL=(--comm-share 0.28) BERT_CAL=(--comm-share 0.38) ;;
  *) echo "compare_builds: REPLAY_COMPUTE must be fixed or calibrated, not '$REPLAY_COMPUTE'" >&2; exit 2 ;;
esac

# ---- preflight: fail before the first run, not 10 minutes in.
[[ -f "$TABLE_PY" ]] || { echo "compare_builds: $TABLE_PY is missing" >&2; exit 1; }
for repo in "$BEFORE" "$AFTER"; do
  for need in build/tools/boostcomm scripts/mpirun_local.sh; do
    [[ -e "$repo/$need" ]] || { echo "compare_builds: $repo/$need is missing (run make build there)" >&2; exit 1; }
  done
  if [[ " $CASES " == *" ddp "* ]]; then
    harness=${DDP_HARNESS_REPO:-$repo}/examples/python/ddp_benchmark.py
    [[ -f "$harness" ]] || { echo "compare_builds: $harness is missing" >&2; exit 1; }
    compgen -G "$repo/build/python/boostcomm/_boostcomm_torch*.so" >/dev/null || {
      echo "compare_builds: $repo/build/python/boostcomm has no _boostcomm_torch module (configure found no torch?)" >&2
      exit 1
    }
  fi
  # A build older than its sources measures the wrong code.
  newer=$(cd "$repo" && find src include tools python -type f -newer build/tools/boostcomm 2>/dev/null | head -3)
  [[ -z "$newer" ]] || echo "compare_builds: WARNING: $repo has sources newer than its build (e.g. ${newer//$'\n'/, }); run make build there" >&2
done
if [[ " $CASES " == *" ddp "* ]]; then
  "$PY" -c "import torch" 2>/dev/null || {
    echo "compare_builds: $PY cannot import torch (make deps creates .venv with it)" >&2
    exit 1
  }
fi
command -v mpirun >/dev/null || { echo "compare_builds: mpirun not found" >&2; exit 1; }

load1() { cut -d' ' -f1 /proc/loadavg; }
if [[ -n "${WAIT_LOAD:-}" ]]; then
  for _ in $(seq 40); do
    "$PY" -c "import sys; sys.exit(0 if $(load1) < $WAIT_LOAD else 1)" && break
    echo "compare_builds: load $(load1) >= $WAIT_LOAD, waiting 30 s" >&2
    sleep 30
  done
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
: >"$OUT/runs.jsonl"

# DDP on a torchvision model: the tree's own ddp_benchmark.py (gloo and boostcomm in one job,
# interleaved, with no_sync() floors), its image model swapped for torchvision's. The
# harness's "cnn" batches are 3x32x32 images with 10 classes, which a torchvision ResNet
# with num_classes=10 takes as is.
DDP_DRIVER=$OUT/ddp_torchvision.py
cat >"$DDP_DRIVER" <<'PY'
import json, os, sys
repo, harness_dir, arch = os.environ["CMP_REPO"], os.environ["CMP_HARNESS_DIR"], os.environ["CMP_TV_MODEL"]
sys.path.insert(0, harness_dir)
import boostcomm
# The module under test must be this tree's build, not an installed copy or the other tree's.
where = os.path.realpath(boostcomm.__file__)
if not where.startswith(os.path.realpath(repo) + os.sep):
    sys.exit(f"ddp_torchvision: imported boostcomm from {where}, not from {repo}")
import ddp_benchmark as db
import image_models  # torchvision's models, or the same ResNets where torchvision does not import
db.MODELS["cnn"] = lambda: image_models.build(arch, num_classes=10)
out = None
if "--json" in sys.argv:
    out = sys.argv[sys.argv.index("--json") + 1]
sys.argv = [sys.argv[0], "--model", "cnn"] + sys.argv[1:]
rc = db.main()
# Rank 0 wrote the JSON; only it labels the model (a second writer could read it half written).
if out and os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0" and os.path.exists(out):
    with open(out) as f:
        result = json.load(f)
    result["model"] = f"{image_models.source()}.{arch}"
    result["boostcomm_module"] = where
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
sys.exit(rc)
PY

failures=0
# run_case ROUND TREE REPO CASE
run_case() {
  local round=$1 tree=$2 repo=$3 case=$4
  local dir=$OUT/$round/$tree
  local json=$dir/$case.json log=$dir/$case.log
  mkdir -p "$dir"
  local cmd
  case "$case" in
    bench) cmd=("$repo/build/tools/boostcomm" "${BENCH_ARGS[@]}" --output "$json") ;;
    resnet50) cmd=("$repo/build/tools/boostcomm" replay --model resnet50 "${R50_CAL[@]}" --steps "$R50_STEPS"
                   --warmup "$REPLAY_WARMUP" --modes "baseline,fused,boosted" --output "$json") ;;
    bert) cmd=("$repo/build/tools/boostcomm" replay --model bert-large "${BERT_CAL[@]}" --steps "$BERT_STEPS"
               --warmup "$REPLAY_WARMUP" --modes "baseline,fused,boosted" --output "$json") ;;
    ddp) cmd=(env "PYTHONPATH=$repo/build/python" "CMP_REPO=$repo" "CMP_TV_MODEL=$DDP_MODEL"
              "CMP_HARNESS_DIR=${DDP_HARNESS_REPO:-$repo}/examples/python"
              "$PY" "$DDP_DRIVER" "${DDP_EXTRA[@]}" --json "$json") ;;
    *) echo "compare_builds: unknown case '$case' (CASES: bench resnet50 bert ddp)" >&2; exit 2 ;;
  esac
  local l0 t0 t1 rc=0
  l0=$(load1) t0=$(date +%s.%N)
  printf '[%s] round %s %-6s %-8s load %s ... ' "$(date +%H:%M:%S)" "$round" "$tree" "$case" "$l0"
  # A subshell per run: the tree's own MPI environment, nothing carried over.
  (
    cd "$repo"
    # shellcheck source=/dev/null
    source "$repo/scripts/mpirun_local.sh"
    printf '$ mpirun -np %s --oversubscribe --bind-to none' "$NP"; printf ' %q' "${cmd[@]}"; echo
    exec timeout --kill-after=20 "$RUN_TIMEOUT" mpirun -np "$NP" --oversubscribe --bind-to none "${cmd[@]}"
  ) >"$log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  local secs
  secs=$("$PY" -c "print(round($t1 - $t0, 2))")
  if ((rc != 0)); then
    failures=$((failures + 1))
    echo "FAILED rc=$rc after ${secs}s (see $log)"
  else
    echo "${secs}s"
  fi
  printf '{"round": %s, "tree": "%s", "repo": "%s", "case": "%s", "rc": %s, "seconds": %s, "load1_start": %s, "load1_end": %s}\n' \
    "$round" "$tree" "$repo" "$case" "$rc" "$secs" "$l0" "$(load1)" >>"$OUT/runs.jsonl"
}

harness_label=${DDP_HARNESS_REPO:-"each tree's own"}
describe() { git -C "$1" describe --always --dirty 2>/dev/null || echo unknown; }
start=$(date +%s)
uptime_start=$(uptime)
{
  echo "before: $BEFORE ($(describe "$BEFORE"))"
  echo "after:  $AFTER ($(describe "$AFTER"))"
  echo "rounds: $ROUNDS  cases: $CASES  quick: $QUICK  np: $NP"
  echo "replay compute: $REPLAY_COMPUTE (resnet50 ${R50_CAL[*]}, bert-large ${BERT_CAL[*]})"
  echo "ddp: torchvision.$DDP_MODEL ${DDP_EXTRA[*]} (harness: $harness_label)"
  echo "uptime at start: $uptime_start"
} | tee "$OUT/meta.txt"

for ((round = 1; round <= ROUNDS; round++)); do
  if ((round % 2 == 1)); then order=("before:$BEFORE" "after:$AFTER"); else order=("after:$AFTER" "before:$BEFORE"); fi
  for case in $CASES; do
    for entry in "${order[@]}"; do
      run_case "$round" "${entry%%:*}" "${entry#*:}" "$case"
    done
  done
done

uptime_end=$(uptime)
elapsed=$(($(date +%s) - start))
{
  echo "uptime at end: $uptime_end"
  echo "elapsed: ${elapsed}s"
} | tee -a "$OUT/meta.txt"

"$PY" "$TABLE_PY" "$OUT" | tee "$OUT/table.md"
if ((failures > 0)); then
  echo "compare_builds: $failures run(s) failed; their logs are under $OUT" >&2
  exit 1
fi
