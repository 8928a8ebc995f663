#!/usr/bin/env bash
# emucluster_rsh.sh: the "remote shell" of the emulated cluster (emucluster.sh).
#
# Open MPI calls it as its plm_rsh_agent, like ssh:  emucluster_rsh.sh HOST CMD...
# where CMD... is one shell command line split into words (ssh joins them with
# spaces and hands the line to the remote shell; so do we).
# emucluster.sh also calls it as:  emucluster_rsh.sh --exec HOST PROGRAM ARGS...
# which runs PROGRAM directly (no shell re-parsing of ARGS).
#
# "Entering" HOST means: its network namespace (ip netns exec), a fresh UTS
# namespace with hostname HOST (Open MPI tells nodes apart by hostname), and a
# private mount namespace where the cluster's hosts file is bind-mounted over
# /etc/hosts. The mount is private (no propagation), so the machine's
# /etc/hosts is never touched and the mount vanishes with the process tree.
set -euo pipefail

PREFIX="${EMUCLUSTER_PREFIX:-bc}"
STATE="${EMUCLUSTER_STATE:-/run/boostcomm-emucluster-${PREFIX}}"

die() { echo "emucluster_rsh: error: $*" >&2; exit 255; }

mode=shell
if [[ "${1:-}" == "--exec" ]]; then
  mode=exec
  shift
fi
# ssh-style options Open MPI may add (-x, -o ...): none apply here.
while [[ "${1:-}" == -* ]]; do
  case "$1" in
    -o|-l|-p|-i) shift 2 ;;
    *) shift ;;
  esac
done
host="${1:-}"
shift || true
[[ -n "$host" ]] || die "usage: $0 HOST COMMAND... | --exec HOST PROGRAM ARGS..."
[[ $# -gt 0 ]] || die "no command for host '$host'"
[[ -f "$STATE/hosts" ]] || die "the emulated cluster is down (no $STATE/hosts)"

# HOST may be a node name or its address; only the cluster's own hosts are
# accepted, so nothing is ever started outside the namespaces created by up.
ns="$(awk -v h="$host" '$1 != "127.0.0.1" && ($1 == h || $2 == h) { print $2; exit }' "$STATE/hosts")"
[[ -n "$ns" ]] || die "'$host' is not a node of the emulated cluster (see $STATE/hosts)"

if [[ "$mode" == shell ]]; then
  set -- /bin/sh -c "$*"
fi
# Inside the new namespaces: set the hostname, bind the hosts file, then exec.
# shellcheck disable=SC2016
exec ip netns exec "$ns" unshare --uts --mount --propagation private -- \
  /bin/sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
  emucluster-enter "$ns" "$STATE/hosts" "$@"
