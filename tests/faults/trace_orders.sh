#!/usr/bin/env bash
# `boostcomm trace analyze` over hand-written flight records (ctest
# faults.trace_orders, no mpirun): the missing rank is named whichever order
# the dumps came in, also where the faults.* scenarios cannot put them on one
# host. Rank 1 is stopped before call 200; rank 0 waits in it.
#   flake          rank 0's stall dump, then its "peer exited" dump of the same
#                  call, taken after rank 1 (resumed) had started it too
#   flake_renamed  the same two records under each other's names: the verdict
#                  goes by dump time, not by file name or directory order
#   remote_after   rank 0 cannot see rank 1 (another node, no answer); rank 1's
#                  only dump is later, when it had started call 200: its
#                  entries' start times say it had not at rank 0's stall
#   remote_before  rank 1's only dump is earlier (on demand, in step)
#   stale          flake, plus a record of an earlier job with the same rank
#                  and pid (another container): skipped
#   same_calls     both ranks wait in call 200 (no divergence, nobody
#                  missing): the transport messages each still waited on are
#                  printed, oldest first, three at most
# Usage: trace_orders.sh CLI. Exit 0 when every expectation holds.
set -u
cli=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
t0=1800000000000000000  # rank 0's stall dump (wall ns)
s=1000000000            # one second in ns
fail=0

entry() {  # entry SEQ START_NS END_NS
  local state=completed
  [ "$3" = 0 ] && state="in flight"
  printf '  {"seq": %s, "call": "allreduce float32 x1000 sum", "algorithm": "ring", "state": "%s", "start_ns": %s, "end_ns": %s}' \
    "$1" "$state" "$2" "$3"
}
# record FILE REASON RANK PID DUMP STARTED COMPLETED PEERS CREATED_NS DUMPED_NS ENTRY...
record() {
  local file=$1 reason=$2 rank=$3 pid=$4 dump=$5 started=$6 completed=$7 peers=$8 created=$9 dumped=${10}
  shift 10
  {
    printf '{"reason": "%s", "rank": %s, "pid": %s, "dump": %s, "started": %s, "completed": %s, "size": 2, "peers": [%s], "entries": [\n' \
      "$reason" "$rank" "$pid" "$dump" "$started" "$completed" "$peers"
    local first=1
    for e in "$@"; do
      [ $first = 1 ] || printf ',\n'
      printf '%s' "$e"
      first=0
    done
    # MSGS (optional): the "messages" array's contents.
    printf '\n], "created_ns": %s, "dumped_ns": %s%s}\n' "$created" "$dumped" "${MSGS:+, \"messages\": [$MSGS]}"
  } >"$file"
}
peer() { printf '{"rank": %s, "started": %s, "completed": %s}' "$1" "$2" "$3"; }

created=$((t0 - 60 * s))
e199=$(entry 199 $((t0 - 11 * s / 10)) $((t0 - 11 * s / 10 + 1000000)))
e200=$(entry 200 $((t0 - s)) 0)
stall() {  # stall FILE DUMP: rank 0 at the stall, rank 1 seen before call 200
  record "$1" stall 0 4242 "$2" 201 200 "$(peer 0 201 200), $(peer 1 200 200)" $created $t0 "$e199" "$e200"
}
exited() {  # exited FILE DUMP: rank 0 again, 3.2 s later; rank 1 had started call 200 and exited
  record "$1" "peer exited" 0 4242 "$2" 201 200 "$(peer 0 201 200), $(peer 1 201 200)" $created $((t0 + 32 * s / 10)) \
    "$e199" "$e200"
}
remote_stall() {  # rank 0 at the stall, seeing no other rank
  record "$1" stall 0 4242 1 201 200 "$(peer 0 201 200)" $created $t0 "$e199" "$e200"
}

mkdir "$root/flake" "$root/flake_renamed" "$root/remote_after" "$root/remote_before" "$root/stale"
stall "$root/flake/rank-0.json" 1
exited "$root/flake/rank-0.2.json" 2
stall "$root/flake_renamed/rank-0.2.json" 1
exited "$root/flake_renamed/rank-0.json" 2
remote_stall "$root/remote_after/rank-0.json"
record "$root/remote_after/rank-1.json" "peer exited" 1 4243 1 201 200 "$(peer 1 201 200)" $created $((t0 + 3 * s)) \
  "$(entry 199 $((t0 - 11 * s / 10)) $((t0 - 11 * s / 10 + 1000000)))" "$(entry 200 $((t0 + 25 * s / 10)) 0)"
remote_stall "$root/remote_before/rank-0.json"
record "$root/remote_before/rank-1.json" signal 1 4243 1 200 200 "$(peer 1 200 200)" $created $((t0 - 5 * s / 10)) \
  "$(entry 199 $((t0 - 11 * s / 10)) $((t0 - 11 * s / 10 + 1000000)))"
stall "$root/stale/rank-0.json" 1
exited "$root/stale/rank-0.2.json" 2
record "$root/stale/rank-0.3.json" stall 0 4242 3 51 50 "$(peer 0 51 50), $(peer 1 50 50)" $((t0 - 3600 * s)) \
  $((t0 - 3000 * s)) "$(entry 50 $((t0 - 3001 * s)) 0)"

mkdir "$root/same_calls"
msg() {  # msg KIND PEER TAG AGE_MS STATE
  printf '{"transport": "gloo boostcomm, rank 0 of 2", "kind": "%s", "peer": %s, "tag": %s, "bytes": 730816, "age_ms": %s, "state": "%s"}' \
    "$@"
}
MSGS="$(msg recv 1 1376256 15200 "queued for a waiter"), $(msg recv 1 1376257 15100 "waiting in Gloo"), $(msg send 1 1376256 15000 "waiting in Gloo"), $(msg send 1 1376257 14000 "waiting in Gloo")" \
  record "$root/same_calls/rank-0.json" stall 0 4242 1 201 200 "$(peer 0 201 200)" $created $t0 "$e199" "$e200"
record "$root/same_calls/rank-1.json" stall 1 4243 1 201 200 "$(peer 1 201 200)" $created $t0 "$e199" "$e200"
out=$("$cli" trace analyze "$root/same_calls" 2>&1)
ok=1
grep -q "^no divergence: every rank started the same collectives$" <<<"$out" || ok=0
grep -q "^transport messages not complete at each rank's latest dump (oldest first):$" <<<"$out" || ok=0
grep -q "^  rank 0 (rank-0.json): 4$" <<<"$out" || ok=0
grep -q "^    recv from rank 1 tag 1376256 (730816 B, queued for a waiter, posted 15200 ms before the dump; gloo boostcomm, rank 0 of 2)$" <<<"$out" || ok=0
grep -q "^    \.\.\. 1 more$" <<<"$out" || ok=0
grep -q "^  rank 1 (rank-1.json): " <<<"$out" && ok=0  # rank 1's dump listed no messages
if [ $ok = 1 ]; then
  echo "ok: same_calls"
else
  echo "FAILED: same_calls"
  sed 's/^/    /' <<<"$out"
  fail=1
fi

for case in flake flake_renamed remote_after remote_before stale; do
  out=$("$cli" trace analyze "$root/$case" 2>&1)
  want_at="rank 0's stall dump \\(rank-0.json\\)"
  [ "$case" = flake_renamed ] && want_at="rank 0's stall dump \\(rank-0.2.json\\)"
  ok=1
  grep -Eq "^at $want_at, the first fault dump" <<<"$out" || ok=0
  grep -Eq "^first collective not reached by every rank: seq 200 \(allreduce float32 x1000 sum\)$" <<<"$out" || ok=0
  grep -Eq "^  missing ranks: \{1\}$" <<<"$out" || ok=0
  if [ "$case" = stale ]; then
    grep -Eq "^rank 0: 1 dump\(s\) of another process skipped" <<<"$out" || ok=0
  fi
  if [ $ok = 1 ]; then
    echo "ok: $case"
  else
    echo "FAILED: $case"
    sed 's/^/    /' <<<"$out"
    fail=1
  fi
done
exit $fail
