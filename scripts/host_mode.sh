#!/usr/bin/env bash
# Runs a command when this VM's two vCPUs share a cache ("fast" mode) and
# says whether they still did when it ended (docs/PERFORMANCE.md, "Method":
# a cache line crosses between them in 25-30 ns or in 155-215 ns, in
# episodes of 10-20 s, and every cross-core path follows).
#
#   scripts/host_mode.sh [--wait SECONDS] -- COMMAND...
#
# Probes with build/bench/core_latency (0.5 s) until a probe is under 60 ns,
# for at most SECONDS (default 60), then runs COMMAND and probes again. The
# last line, on stderr, is "host_mode: before B ns, after A ns: fast|mixed"
# (fast: the probe after is under 60 ns too). Exit status: COMMAND's,
# or 3 when no fast probe came within SECONDS (COMMAND not run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
probe="$root/build/bench/core_latency"
wait_s=60
if [[ "${1:-}" == "--wait" ]]; then wait_s=${2:?--wait needs SECONDS}; shift 2; fi
[[ "${1:-}" == "--" ]] && shift
[[ $# -gt 0 ]] || { echo "usage: $0 [--wait SECONDS] -- COMMAND..." >&2; exit 2; }
[[ -x "$probe" ]] || { echo "host_mode: $probe is not built (make build)" >&2; exit 2; }
# The probe's median in ns; 999 (not fast) when it fails or prints nothing.
latency() {
  local v
  v=$("$probe" 0.5 2>/dev/null | awk '/^core_latency:/ {print $7}') || v=""
  [[ $v =~ ^[0-9]+$ ]] && echo "$v" || echo 999
}
deadline=$((SECONDS + wait_s))
before=$(latency)
while ((before >= 60)); do
  if ((SECONDS >= deadline)); then
    echo "host_mode: no fast probe in ${wait_s} s (last ${before} ns); not run" >&2
    exit 3
  fi
  before=$(latency)
done
status=0
"$@" || status=$?
after=$(latency)
mode=mixed
((after < 60)) && mode=fast
echo "host_mode: before ${before} ns, after ${after} ns: ${mode}" >&2
exit "$status"
