#!/usr/bin/env bash
# One fault scenario (fault_scenario.cc) under mpirun -np 2, then checks of
# what every rank reported, and of `boostcomm trace analyze` over the flight
# records they dumped. Usage: run_fault.sh MPIEXEC PROGRAM SCENARIO CLI
# Exit 0 when every expectation holds; prints the outputs either way.
set -u
mpiexec=$1 program=$2 scenario=$3 cli=$4
out=$(mktemp) err=$(mktemp) trace=$(mktemp -d)
trap 'rm -rf "$out" "$err" "$trace"' EXIT
export BOOSTCOMM_TRACE_DIR=$trace
export BOOSTCOMM_STALL_WARN_MS=${BOOSTCOMM_STALL_WARN_MS:-1000}
good=500
case $scenario in
  stop) export BOOSTCOMM_TIMEOUT_MS=4000; good=200 ;;
  slow) export BOOSTCOMM_TIMEOUT_MS=4000; good=50 ;;
  count_shm) good=20 ;;
esac
start=$(date +%s.%N)
timeout 60 "$mpiexec" -np 2 --oversubscribe --bind-to none "$program" "$scenario" "$good" >"$out" 2>"$err"
rc=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
all=$(mktemp); trap 'rm -rf "$out" "$err" "$all" "$trace"' EXIT
cat "$out" "$err" >"$all"
echo "--- scenario $scenario: mpirun rc $rc after ${elapsed} s"
echo "--- stdout"; cat "$out"
echo "--- stderr"; grep -v '^\s*$' "$err" | head -40
analysis=$(mktemp); "$cli" trace analyze "$trace" >"$analysis" 2>&1
echo "--- trace analyze"; cat "$analysis"
fail=0
expect() {  # expect FILE REGEX WHAT
  if grep -Eq -- "$2" "$1"; then echo "ok: $3"; else echo "FAILED: $3 (no match for /$2/)"; fail=1; fi
}
[ "$rc" -ne 124 ] || { echo "FAILED: hung (killed after 60 s)"; fail=1; }
grep -q WRONG "$out" && { echo "FAILED: a wrong result"; fail=1; }
if [ "$scenario" != slow ] && grep -q "OK returned normally" "$out"; then
  echo "FAILED: a rank returned normally from a faulty call"; fail=1
fi
both="rank 0: allreduce float32 x1000 sum, seq 500; rank 1: broadcast float32 x1000 root 0, seq 500"
case $scenario in
  stop)
    expect "$err" "boostcomm: warning: rank 0: a collective has waited .* not reached by rank 1 .*last completed seq 199" \
      "rank 0 warns naming rank 1 and its last completed call"
    expect "$out" "rank 0: CAUGHT timeout after [0-9.]+ s: .*within 4000 ms.*not reached by rank 1" \
      "rank 0 fails at its deadline naming rank 1"
    expect "$analysis" "first collective not reached by every rank: seq 200 .*" "trace analyze names seq 200"
    expect "$analysis" "missing ranks: \{1\}" "trace analyze names the missing rank" ;;
  op)
    expect "$all" "rank 0: .*collective mismatch: $both" "rank 0 reports both sides"
    expect "$all" "rank 1: .*collective mismatch: rank 1: broadcast float32 x1000 root 0, seq 500; rank 0: allreduce" \
      "rank 1 reports both sides"
    expect "$analysis" "first divergent collective: seq 500" "trace analyze names the divergent call"
    expect "$analysis" "ranks \{1\}: broadcast float32 x1000 root 0" "trace analyze names rank 1's call" ;;
  slow)
    expect "$out" "rank 0: OK returned normally" "rank 0 completes (no false timeout)"
    expect "$out" "rank 1: OK returned normally" "rank 1 completes"
    grep -q CAUGHT "$out" && { echo "FAILED: an error for a rank that is only slow"; fail=1; } ;;
  count_shm)
    expect "$out" "rank 0: CAUGHT mismatch .*rank 0: allreduce float32 x16777216 sum.*rank 1: allreduce float32 x16777217 sum" \
      "rank 0 raises kMismatch naming both counts"
    expect "$out" "rank 1: CAUGHT mismatch .*rank 1: allreduce float32 x16777217 sum.*rank 0: allreduce float32 x16777216" \
      "rank 1 raises kMismatch naming both counts" ;;
  count_small)
    expect "$out" "rank 0: CAUGHT mismatch .*x1000 sum.*x1001 sum" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*x1001 sum.*x1000 sum" "rank 1 raises kMismatch" ;;
  dtype_shm)
    expect "$out" "rank 0: CAUGHT mismatch .*allreduce float32 x1000 sum.*allreduce float64 x1000 sum" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*allreduce float64 x1000 sum.*allreduce float32 x1000 sum" "rank 1 raises kMismatch" ;;
  root)
    expect "$out" "rank 0: CAUGHT mismatch .*broadcast float32 x1000 root 0.*broadcast float32 x1000 root 1" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*broadcast float32 x1000 root 1.*broadcast float32 x1000 root 0" "rank 1 raises kMismatch" ;;
  *) echo "unknown scenario $scenario"; fail=1 ;;
esac
exit $fail
