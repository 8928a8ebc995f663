#!/usr/bin/env bash
# One fault scenario (fault_scenario.cc) under mpirun -np 2, then checks of
# what every rank reported, of mpirun's own report when a rank died, of the
# time from the injected fault to the end of the job (deadline + 5 s at most),
# and of `boostcomm trace analyze` over the flight records the ranks dumped.
# Usage: run_fault.sh MPIEXEC PROGRAM SCENARIO CLI
# FAULT_EMU=1: run on the emulated 2-node cluster (4 ranks, 2 per node;
# EMUCLUSTER_PREFIX must name a cluster that is up). FAULT_QUIET=1: print only
# the summary line. Exit 0 when every expectation holds.
set -u
mpiexec=$1 program=$2 scenario=$3 cli=$4
out=$(mktemp) err=$(mktemp) trace=$(mktemp -d) all=$(mktemp) analysis=$(mktemp)
trap 'rm -rf "$out" "$err" "$trace" "$all" "$analysis"' EXIT
chmod 755 "$trace"
export BOOSTCOMM_TRACE_DIR=$trace
export BOOSTCOMM_STALL_WARN_MS=${BOOSTCOMM_STALL_WARN_MS:-1000}
good=500
deadline_ms=600000  # the built-in default, where the scenario does not set one
case $scenario in
  stop|stop_exit) deadline_ms=4000; good=200 ;;
  late_stop) deadline_ms=4000; good=100 ;;
  slow) deadline_ms=600; good=20 ;;
  count_shm|count_16m_*) good=20 ;;
  kill_shm|kill_inter) deadline_ms=4000; good=3 ;;
  exit0|exit1|abort|sigterm|extra|callback_throw) deadline_ms=4000; good=100 ;;
  config_*) deadline_ms=4000; good=20 ;;
esac
[ "$deadline_ms" = 600000 ] || export BOOSTCOMM_TIMEOUT_MS=$deadline_ms
np=2
launch=("$mpiexec" -np 2 --oversubscribe --bind-to none)
# stop_exit: rank 0 outlives rank 1's exit until it has dumped again (mpirun
# would otherwise end the job about a second after the exit; a race).
[ "$scenario" = stop_exit ] && launch+=(--mca orte_enable_recovery 1)
if [ "${FAULT_EMU:-0}" = 1 ]; then
  np=4
  launch=("$(dirname "$0")/../../scripts/emucluster.sh" run -- -np 4 --npernode 2
          -x BOOSTCOMM_TRACE_DIR -x BOOSTCOMM_STALL_WARN_MS)
  [ -n "${BOOSTCOMM_TIMEOUT_MS:-}" ] && launch+=(-x BOOSTCOMM_TIMEOUT_MS)
fi
start=$(date +%s.%N)
timeout 120 "${launch[@]}" "$program" "$scenario" "$good" >"$out" 2>"$err"
rc=$?
end=$(date +%s.%N)
elapsed=$(echo "$end - $start" | bc)
cat "$out" "$err" >"$all"
dumps=$(cd "$trace" && ls rank-*.json 2>/dev/null | tr '\n' ' ')
# Time to report: from the injected fault (or from the start) to the end.
fault_at=$(sed -n 's/^rank [0-9]*: FAULT .* at \([0-9.]*\)$/\1/p' "$out" | head -1)
since_fault=$(echo "$end - ${fault_at:-$start}" | bc)
"$cli" trace analyze "$trace" >"$analysis" 2>&1
if [ "${FAULT_QUIET:-0}" != 1 ]; then
  echo "--- scenario $scenario: mpirun rc $rc after ${elapsed} s (${since_fault} s after the fault)"
  echo "--- stdout"; cat "$out"
  echo "--- stderr"; grep -v '^\s*$' "$err" | head -40
  echo "--- flight records: $dumps"
  echo "--- trace analyze"; cat "$analysis"
fi
fail=0
expect() {  # expect FILE REGEX WHAT
  if grep -Eq -- "$2" "$1"; then echo "ok: $3"; else echo "FAILED: $3 (no match for /$2/)"; fail=1; fi
}
# Every rank but a dead culprit reports: CAUGHT, or OK where the scenario is not a fault.
reported() {  # reported RANKS...
  for r in "$@"; do expect "$out" "^rank $r: (CAUGHT|OK)" "rank $r reports"; done
}
died() {  # died HOW: mpirun names rank 1 and ends the job with an error
  [ "$rc" -ne 0 ] || { echo "FAILED: mpirun exited 0 although rank 1 died"; fail=1; }
  expect "$err" "$1" "mpirun names rank 1 ($scenario)"
  # Before mpirun's teardown (about 1 s), rank 0's watchdog finds rank 1's
  # process gone (it probes its node peers' pids while a call waits). Not
  # across emulated nodes: a communicator spanning nodes shares no call
  # status, so it has no node peers to probe.
  [ "${FAULT_EMU:-0}" = 1 ] || expect "$all" "rank 0: (CAUGHT transport failure .*)?rank 1 \(pid [0-9]+\) on this node exited while rank 0 waits in seq" \
    "rank 0 names the exited rank 1 itself"
}
[ "$rc" -ne 124 ] || { echo "FAILED: hung (killed after 120 s)"; fail=1; }
grep -q WRONG "$out" && { echo "FAILED: a wrong result"; fail=1; }
limit=$(echo "scale=3; $deadline_ms / 1000 + 5" | bc)
# (Not for slow: no fault, 50 calls of half a deadline each by design.)
if [ "$deadline_ms" != 600000 ] && [ "$scenario" != slow ] && [ "$(echo "$since_fault > $limit" | bc)" = 1 ]; then
  echo "FAILED: the job ended ${since_fault} s after the fault, more than the deadline + 5 s ($limit s)"; fail=1
fi
case $scenario in slow|callback_throw|extra) ;; *)
  if grep -q "OK returned normally" "$out"; then echo "FAILED: a rank returned normally from a faulty call"; fail=1; fi ;;
esac
both="rank 0: allreduce float32 x1000 sum, seq 500; rank 1: broadcast float32 x1000 root 0, seq 500"
case $scenario in
  stop)
    expect "$err" "boostcomm: warning: rank 0: a collective has waited .* not reached by rank 1 .*last completed seq 199" \
      "rank 0 warns naming rank 1 and its last completed call"
    expect "$out" "rank 0: CAUGHT timeout after [0-9.]+ s: .*within 4000 ms.*not reached by rank 1" \
      "rank 0 fails at its deadline naming rank 1"
    expect "$analysis" "first collective not reached by every rank: seq 200 .*" "trace analyze names seq 200"
    expect "$analysis" "missing ranks: \{1\}" "trace analyze names the missing rank" ;;
  stop_exit)
    # The flake of issue 39, provoked: the stall dump, then a dump of the same
    # call once rank 1 had started it too. Neither replaces the other.
    expect "$err" "boostcomm: warning: rank 0: a collective has waited .* not reached by rank 1 .*flight record .*/rank-0.json" \
      "rank 0 warns naming rank 1 (first dump: rank-0.json)"
    expect "$out" "rank 0: CAUGHT timeout after [0-9.]+ s: .*within 4000 ms.*not reached by rank 1" \
      "rank 0 fails at its deadline naming rank 1"
    expect "$err" "rank 0: rank 1 \(pid [0-9]+\) on this node exited while rank 0 waits in seq 200.*last started seq 200" \
      "rank 0 names the exited rank 1, which had started seq 200"
    expect "$trace/rank-0.json" '"reason": "stall", "rank": 0, "pid": [0-9]+, "dump": 1, "started": 201, "completed": 200' \
      "rank-0.json: the stall dump, rank 0 waiting in seq 200"
    expect "$trace/rank-0.json" '\{"rank": 1, "started": 200, ' "rank-0.json: rank 1 had not started seq 200"
    expect "$trace/rank-0.2.json" '"reason": "peer exited", "rank": 0, "pid": [0-9]+, "dump": 2, ' \
      "rank-0.2.json: the second dump (peer exited), kept beside the first"
    expect "$trace/rank-0.2.json" '\{"rank": 1, "started": 201, ' "rank-0.2.json: rank 1 had started seq 200 by then"
    expect "$analysis" "^at rank 0's stall dump \(rank-0.json\)" "trace analyze judges at the stall dump"
    expect "$analysis" "first collective not reached by every rank: seq 200 .*" "trace analyze names seq 200"
    expect "$analysis" "missing ranks: \{1\}" "trace analyze names the missing rank" ;;
  late_stop)
    # The other order: the dumps before the telling one say less (a late rank
    # that caught up; an on-demand dump with the ranks in step).
    expect "$trace/rank-0.json" '"reason": "stall", "rank": 0, "pid": [0-9]+, "dump": 1, "started": 101, "completed": 100' \
      "rank-0.json: the first stall dump, rank 0 waiting in seq 100"
    expect "$trace/rank-0.2.json" '"reason": "signal", "rank": 0, "pid": [0-9]+, "dump": 2, "started": 200, "completed": 200' \
      "rank-0.2.json: the on-demand dump, every call completed"
    expect "$trace/rank-0.3.json" '"reason": "stall", "rank": 0, "pid": [0-9]+, "dump": 3, "started": 201, "completed": 200' \
      "rank-0.3.json: the second stall dump, rank 0 waiting in seq 200"
    expect "$out" "rank 0: CAUGHT timeout after [0-9.]+ s: .*within 4000 ms.*not reached by rank 1" \
      "rank 0 fails at its deadline naming rank 1"
    expect "$analysis" "rank 0's stall dump \(rank-0.json\), rank\(s\) \{1\} had not started seq 100; .*completed later" \
      "trace analyze calls the stall at seq 100 a late rank"
    expect "$analysis" "^at rank 0's stall dump \(rank-0.3.json\)" "trace analyze judges at the second stall dump"
    expect "$analysis" "first collective not reached by every rank: seq 200 .*" "trace analyze names seq 200"
    expect "$analysis" "missing ranks: \{1\}" "trace analyze names the missing rank" ;;
  slow)
    expect "$out" "rank 0: OK returned normally" "rank 0 completes (no false timeout)"
    expect "$out" "rank 1: OK returned normally" "rank 1 completes"
    grep -q CAUGHT "$out" && { echo "FAILED: an error for a rank that is only slow"; fail=1; }
    grep -q "warning" "$err" && { echo "FAILED: a stall warning for a rank that is only slow"; fail=1; } ;;
  kill_shm|kill_inter)
    died "rank 1 with PID [0-9]+ on node .* exited on signal 9" ;;
  exit0)
    died "mpiexec has exited due to process rank 1 with PID" ;;  # "... exiting improperly" (next line)
  exit1)
    died "Process name: \[\[[0-9]+,[0-9]+\],1\]" ;;  # Open MPI: "[[job,1],rank]", then "Exit code: 1"
  abort)
    died "rank 1 with PID [0-9]+ on node .* exited on signal 6" ;;
  sigterm)
    died "rank 1 with PID [0-9]+ on node .* exited on signal 15|rank 1 .*(signal 15|Terminated)" ;;
  callback_throw)
    expect "$err" "warning: a completion callback threw .*injected callback failure" "rank 1 says its callback threw"
    reported 0 1
    expect "$out" "rank 0: OK returned normally" "rank 0's later calls are right"
    expect "$out" "rank 1: OK returned normally" "rank 1's later calls are right" ;;
  op)
    expect "$all" "rank 0: .*collective mismatch: $both" "rank 0 reports both sides"
    expect "$all" "rank 1: .*collective mismatch: rank 1: broadcast float32 x1000 root 0, seq 500; rank 0: allreduce" \
      "rank 1 reports both sides"
    expect "$analysis" "first divergent collective: seq 500" "trace analyze names the divergent call"
    expect "$analysis" "ranks \{1\}: broadcast float32 x1000 root 0" "trace analyze names rank 1's call" ;;
  gather_bcast)
    expect "$all" "rank 0: .*collective mismatch: rank 0: allgather float32 x2000, seq 500; rank 1: broadcast float32 x1000 root 0" \
      "rank 0 reports both sides"
    expect "$all" "rank 1: .*collective mismatch: rank 1: broadcast float32 x1000 root 0, seq 500; rank 0: allgather" \
      "rank 1 reports both sides" ;;
  count_shm)
    expect "$out" "rank 0: CAUGHT mismatch .*rank 0: allreduce float32 x16777216 sum.*rank 1: allreduce float32 x16777217 sum" \
      "rank 0 raises kMismatch naming both counts"
    expect "$out" "rank 1: CAUGHT mismatch .*rank 1: allreduce float32 x16777217 sum.*rank 0: allreduce float32 x16777216" \
      "rank 1 raises kMismatch naming both counts" ;;
  count_small)
    expect "$out" "rank 0: CAUGHT mismatch .*x1000 sum.*x1001 sum" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*x1001 sum.*x1000 sum" "rank 1 raises kMismatch" ;;
  count_minus|count_plus|count_16m_minus|count_16m_plus)
    # Native, blocking: the faulty call raises on both ranks (the rank with
    # the larger count too: before, it returned a wrong result), or, where
    # the backend call hangs, the watchdog prints it and ends the job.
    seq=500; n0=1000
    case $scenario in count_16m_*) seq=20; n0=16777216 ;; esac
    case $scenario in *minus) n1=$((n0 - 1)) ;; *) n1=$((n0 + 1)) ;; esac
    a="allreduce float32 x$n0 sum" b="allreduce float32 x$n1 sum"
    expect "$all" "rank 0: (CAUGHT mismatch .*)?collective mismatch: rank 0: $a, seq $seq; rank 1: $b" "rank 0 reports both counts"
    expect "$all" "rank 1: (CAUGHT mismatch .*)?collective mismatch: rank 1: $b, seq $seq; rank 0: $a" "rank 1 reports both counts" ;;
  dtype_native)
    # The float32 rank's call returns (and raises); the float64 rank's stays
    # inside the backend waiting for the rest of its data: the watchdog prints
    # the mismatch there and ends the job.
    a="allreduce float32 x1000 sum" b="allreduce float64 x1000 sum"
    expect "$all" "rank 0: (CAUGHT mismatch .*)?collective mismatch: rank 0: $a, seq 500; rank 1: $b" "rank 0 reports both dtypes"
    expect "$all" "rank 1: (CAUGHT mismatch .*)?collective mismatch: rank 1: $b, seq 500; rank 0: $a" "rank 1 reports both dtypes" ;;
  dtype_shm)
    expect "$out" "rank 0: CAUGHT mismatch .*allreduce float32 x1000 sum.*allreduce float64 x1000 sum" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*allreduce float64 x1000 sum.*allreduce float32 x1000 sum" "rank 1 raises kMismatch" ;;
  redop|redop_shm)
    # From the faulty call itself (native too: no call follows it).
    expect "$out" "rank 0: CAUGHT mismatch .*rank 0: allreduce float32 x1000 sum, seq 500; rank 1: allreduce float32 x1000 max" \
      "rank 0 raises kMismatch naming both ops"
    expect "$out" "rank 1: CAUGHT mismatch .*rank 1: allreduce float32 x1000 max, seq 500; rank 0: allreduce float32 x1000 sum" \
      "rank 1 raises kMismatch naming both ops" ;;
  root|root_native)
    expect "$out" "rank 0: CAUGHT mismatch .*broadcast float32 x1000 root 0.*broadcast float32 x1000 root 1" "rank 0 raises kMismatch"
    expect "$out" "rank 1: CAUGHT mismatch .*broadcast float32 x1000 root 1.*broadcast float32 x1000 root 0" "rank 1 raises kMismatch" ;;
  root_ring)
    expect "$out" "rank 0: CAUGHT mismatch .*rank 0: broadcast float32 x8 root 0, seq 500; rank 1: broadcast float32 x8 root 1" \
      "rank 0 raises kMismatch naming both roots"
    expect "$out" "rank 1: CAUGHT mismatch .*rank 1: broadcast float32 x8 root 1, seq 500; rank 0: broadcast float32 x8 root 0" \
      "rank 1 raises kMismatch naming both roots" ;;
  root_small|root_small_fin)
    # Both took themselves for the root and returned; the pending check of
    # their next call (or of finalize) compares the receivers' fingerprints.
    expect "$out" "rank 0: CAUGHT mismatch .*rank 0: broadcast float32 x1000 root 0, seq 500; rank 1: broadcast float32 x1000 root 1" \
      "rank 0 raises kMismatch naming both roots"
    expect "$out" "rank 1: CAUGHT mismatch .*rank 1: broadcast float32 x1000 root 1, seq 500; rank 0: broadcast float32 x1000 root 0" \
      "rank 1 raises kMismatch naming both roots" ;;
  extra)
    expect "$out" "rank 1: CAUGHT timeout .*not reached by rank 0" "rank 1 fails at its deadline naming rank 0" ;;
  config_algo|config_strategy|config_cache|config_small|config_fingerprints)
    var=$(case $scenario in config_algo) echo BOOSTCOMM_ALGO;; config_strategy) echo BOOSTCOMM_STRATEGY;;
          config_small) echo BOOSTCOMM_SHM_SMALL_BYTES;; config_fingerprints) echo BOOSTCOMM_FINGERPRINTS;;
          *) echo BOOSTCOMM_TUNING_CACHE;; esac)
    for r in 0 1; do
      o=$((1 - r))
      expect "$out" "rank $r: CAUGHT mismatch .*ranks are configured differently: rank $r has $var .*rank $o has $var" \
        "rank $r raises kMismatch naming $var on both ranks"
    done ;;
  *) echo "unknown scenario $scenario"; fail=1 ;;
esac
echo "summary: $scenario $([ $fail = 0 ] && echo pass || echo FAIL) rc=$rc elapsed=${elapsed}s since_fault=${since_fault}s"
exit $fail
