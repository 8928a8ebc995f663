#!/usr/bin/env bash
# emucluster.sh: an emulated multi-node cluster on one Linux host, for tests
# and benchmarks of topology-aware collectives (see docs/TOPOLOGY.md).
#
#   emucluster.sh up N [--rate 1gbit] [--slots 2] [--delay-ms D]
#   emucluster.sh down
#   emucluster.sh status
#   emucluster.sh hostfile            # prints the path of the Open MPI hostfile
#   emucluster.sh run -- <mpirun args...>
#   emucluster.sh exec NODE -- <command...>   # a shell/command inside one node
#
# Layout: node i is network namespace ${PREFIX}node$i with one interface eth0
# (10.213.0.(i+1)/24). Its peer veth ${PREFIX}v$i sits in namespace
# ${PREFIX}br, enslaved to bridge br0; nothing is added to the root
# namespace, and traffic to 10.213.0.0/24 never leaves the namespaces created
# here. Both ends of each veth carry a tbf qdisc at the link rate, so each
# direction of a node's link is shaped.
#
# Why it looks like this (facts from trying it on these machines):
# - Each node needs its own hostname (UTS namespace): Open MPI names its
#   session directory and shared-memory segments after the hostname, and two
#   "nodes" with one name collide. Different hostnames also keep vader (shared
#   memory) inside a node: ranks on other nodes reach each other over TCP.
# - mpirun runs inside node 0; Open MPI starts the other nodes' daemons through
#   emucluster_rsh.sh (plm_rsh_agent), which enters the node's namespaces.
# - Host names resolve through a private hosts file bind-mounted over
#   /etc/hosts in a private mount namespace per process tree; the machine's
#   /etc/hosts is never edited.
# - The kernel has no netem, so --delay-ms would need a user-space packet
#   holder (NFQUEUE + libnetfilter-queue); neither is installed here, so the
#   option is refused rather than silently ignored.
# - IPv6 is disabled in the namespaces and Open MPI is restricted to the
#   emulated subnet, so it never tries a link-local or host address.
#
# Environment: EMUCLUSTER_PREFIX (default "bc") names namespaces and hosts;
# EMUCLUSTER_STATE (default /run/boostcomm-emucluster-$PREFIX) holds the state.
set -euo pipefail

PREFIX="${EMUCLUSTER_PREFIX:-bc}"
STATE="${EMUCLUSTER_STATE:-/run/boostcomm-emucluster-${PREFIX}}"
SUBNET_PREFIX="10.213.0"
SUBNET="${SUBNET_PREFIX}.0/24"
BRNS="${PREFIX}br"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RSH="${SCRIPT_DIR}/emucluster_rsh.sh"
MAX_NODES=64

die() { echo "emucluster: error: $*" >&2; exit 2; }
usage() { sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# Root and working network namespaces are required; exit 77 ("skip", as
# autotools and our ctest entries use) when this machine cannot do it.
require_netns() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "emucluster: skipped: needs root for network namespaces (running as uid $(id -u))" >&2
    exit 77
  fi
  for tool in ip tc unshare nsenter; do
    command -v "$tool" >/dev/null || { echo "emucluster: skipped: '$tool' not found" >&2; exit 77; }
  done
}

# Root is not always enough (containers without CAP_SYS_ADMIN, seccomp):
# try one namespace before building the cluster.
probe_netns() {
  local probe="${PREFIX}probe$$" err
  if ! err="$(ip netns add "$probe" 2>&1)"; then
    echo "emucluster: skipped: network namespaces are not permitted here (ip netns add: $err)" >&2
    exit 77
  fi
  ip netns del "$probe"
}

node_ns() { echo "${PREFIX}node$1"; }
node_ip() { echo "${SUBNET_PREFIX}.$(($1 + 1))"; }

# Namespaces of ours that exist now (any N from an earlier up).
our_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^(${PREFIX}node[0-9]+|${BRNS})$" || true
}

# tc rate ("1gbit", "100mbit", "2.5gbit") -> bytes per second.
rate_bytes_per_s() {
  local text="$1"
  [[ "$text" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] ||
    die "--rate '$text' is not a rate (valid: a number followed by bit, kbit, mbit, gbit or tbit, e.g. 1gbit)"
  local mult
  case "${BASH_REMATCH[3]}" in
    bit) mult=1 ;; kbit) mult=1e3 ;; mbit) mult=1e6 ;; gbit) mult=1e9 ;; tbit) mult=1e12 ;;
  esac
  awk -v v="${BASH_REMATCH[1]}" -v m="$mult" 'BEGIN { printf "%d\n", v * m / 8 }'
}

cmd_down() {
  require_netns
  local ns pid
  for ns in $(our_namespaces); do
    # Processes still inside (an aborted mpirun, a stray orted): end them,
    # then the namespace and its veth ends disappear with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
  for ns in $(our_namespaces); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] && break
      sleep 0.1
    done
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE"
  local left
  left="$(our_namespaces)"
  [[ -z "$left" ]] || die "namespaces still present after down: $left"
}

cmd_up() {
  local n="" rate="1gbit" slots=2 delay=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --rate) rate="${2:?--rate needs a value}"; shift 2 ;;
      --rate=*) rate="${1#*=}"; shift ;;
      --slots) slots="${2:?--slots needs a value}"; shift 2 ;;
      --slots=*) slots="${1#*=}"; shift ;;
      --delay-ms) delay="${2:?--delay-ms needs a value}"; shift 2 ;;
      --delay-ms=*) delay="${1#*=}"; shift ;;
      -*) die "unknown option '$1' of up (valid: --rate, --slots, --delay-ms)" ;;
      *) [[ -z "$n" ]] || die "up takes one node count, got '$n' and '$1'"; n="$1"; shift ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le $MAX_NODES ]] ||
    die "up needs a node count between 1 and $MAX_NODES, got '${n}'"
  [[ "$slots" =~ ^[0-9]+$ && "$slots" -ge 1 ]] || die "--slots must be a positive integer, got '$slots'"
  if [[ -n "$delay" && "$delay" != "0" ]]; then
    die "--delay-ms is not supported yet: the kernel has no netem and no NFQUEUE holder is built" \
        "(needs iptables/nft + libnetfilter-queue, not installed). Use --delay-ms 0 or leave it out."
  fi
  local bytes_per_s
  bytes_per_s="$(rate_bytes_per_s "$rate")"
  require_netns
  probe_netns

  # Idempotent: whatever an earlier up left is replaced.
  cmd_down
  mkdir -p "$STATE"

  # tbf needs a bucket of at least rate/HZ bytes or it cannot reach the rate;
  # 4 ms worth (HZ >= 250), at least 64 KiB so one GSO super-packet fits.
  local burst=$(( bytes_per_s / 250 ))
  (( burst < 65536 )) && burst=65536

  ip netns add "$BRNS"
  ip -n "$BRNS" link add br0 type bridge
  ip -n "$BRNS" link set br0 up
  ip -n "$BRNS" link set lo up

  local hosts="$STATE/hosts" hostfile="$STATE/hostfile" i ns
  printf '127.0.0.1\tlocalhost\n' >"$hosts"
  : >"$hostfile"
  for ((i = 0; i < n; i++)); do
    ns="$(node_ns "$i")"
    ip netns add "$ns"
    # Before the veth exists, so it never gets an IPv6 address.
    ip netns exec "$ns" sh -c 'for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; do [ -w $f ] && echo 1 > $f; done; true'
    ip -n "$BRNS" link add "${PREFIX}v$i" type veth peer name eth0 netns "$ns"
    ip -n "$BRNS" link set "${PREFIX}v$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
    tc -n "$BRNS" qdisc add dev "${PREFIX}v$i" root tbf rate "$rate" burst "$burst" latency 20ms
    printf '%s\t%s\n' "$(node_ip "$i")" "$ns" >>"$hosts"
    printf '%s slots=%s\n' "$ns" "$slots" >>"$hostfile"
  done
  printf 'nodes=%s\nrate=%s\nslots=%s\nprefix=%s\n' "$n" "$rate" "$slots" "$PREFIX" >"$STATE/config"
  echo "emucluster: $n nodes up (${PREFIX}node0..${PREFIX}node$((n - 1)), $SUBNET, $rate per link direction)"
}

cmd_status() {
  require_netns
  if [[ ! -f "$STATE/config" ]]; then
    echo "emucluster: down"
    local left
    left="$(our_namespaces)"
    [[ -z "$left" ]] || echo "emucluster: stray namespaces (run down): $left"
    return 0
  fi
  cat "$STATE/config"
  local ns
  for ns in $(our_namespaces); do
    [[ "$ns" == "$BRNS" ]] && continue
    echo "--- $ns: $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}'), processes: $(ip netns pids "$ns" | wc -l)"
    tc -n "$ns" -s qdisc show dev eth0 | sed 's/^/  /'
  done
}

cmd_hostfile() {
  [[ -f "$STATE/hostfile" ]] || die "the cluster is down (run: $0 up N)"
  echo "$STATE/hostfile"
}

# Open MPI settings for the emulated cluster, as environment variables so the
# caller's mpirun arguments stay untouched.
mpi_env() {
  export OMPI_MCA_plm_rsh_agent="$RSH"
  export OMPI_MCA_btl_tcp_if_include="$SUBNET"
  export OMPI_MCA_oob_tcp_if_include="$SUBNET"
  export OMPI_MCA_btl="self,vader,tcp"
  export OMPI_MCA_orte_default_hostfile="$STATE/hostfile"
  export OMPI_MCA_rmaps_base_oversubscribe=1
  export OMPI_MCA_hwloc_base_binding_policy=none
  export EMUCLUSTER_STATE="$STATE" EMUCLUSTER_PREFIX="$PREFIX"
  if [[ $(id -u) -eq 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
}

cmd_run() {
  [[ "${1:-}" == "--" ]] && shift
  [[ $# -gt 0 ]] || die "run needs mpirun arguments: $0 run -- -np 4 ./program"
  require_netns
  if [[ ! -f "$STATE/config" ]]; then
    probe_netns  # exits 77 (skip) when up could not have worked either
    die "the cluster is down (run: $0 up N)"
  fi
  mpi_env
  exec "$RSH" --exec "$(node_ns 0)" mpirun --hostfile "$STATE/hostfile" --bind-to none --oversubscribe "$@"
}

cmd_exec() {
  local node="${1:?exec needs a node index}"
  shift
  [[ "${1:-}" == "--" ]] && shift
  [[ -f "$STATE/config" ]] || die "the cluster is down (run: $0 up N)"
  [[ "$node" =~ ^[0-9]+$ ]] || die "exec needs a node index, got '$node'"
  mpi_env
  exec "$RSH" --exec "$(node_ns "$node")" "$@"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down ;;
  status) shift; cmd_status ;;
  hostfile) shift; cmd_hostfile ;;
  run) shift; cmd_run "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  -h|--help|help) usage ;;
  *) echo "emucluster: unknown command '${1:-}' (valid: up, down, status, hostfile, run, exec)" >&2; usage ;;
esac
