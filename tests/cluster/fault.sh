#!/usr/bin/env bash
# Faults on the running test cluster, for operator/tests/cluster_faults.rs (and by hand):
#   fault.sh stop DAEMON     stop one daemon of the cluster (kube-apiserver, kubelet-vm2, ...)
#   fault.sh start           start again whatever daemon is not running (up.sh, idempotent)
#   fault.sh cut POD_IP      drop every packet to and from a pod on vm2 (the network to it is cut)
#   fault.sh heal POD_IP     remove the rules `cut` added
#   fault.sh storage-stop NAME   stop one storage server of tests/storage/up.sh (minio, azurite,
#                                fakegcs); its data stays
#   fault.sh storage-start       start the stopped storage servers again (tests/storage/up.sh)
# Acts on the cluster of this checkout, or of $BENCHRUN_STATE when set, like the other scripts.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cluster.sh"

# The rules of `cut` carry this comment, so `heal` removes exactly them.
MARK=benchrun-fault

# Pods on vm2 are reached through vm2's network namespace: host -> veth -> vm2 -> bridge cni1,
# so a rule in vm2's FORWARD chain cuts a pod off from the operator and from everything else.
vm2_ipt() { $NSX_VM2 iptables -w "$@"; }

cut() {
  local ip=$1
  case $ip in 10.89.*) ;; *) die "cut: $ip is not a pod IP on vm2 (10.89.0.0/16)";; esac
  for dir in -d -s; do
    vm2_ipt -C FORWARD "$dir" "$ip" -m comment --comment "$MARK" -j DROP 2>/dev/null ||
      vm2_ipt -I FORWARD 1 "$dir" "$ip" -m comment --comment "$MARK" -j DROP
  done
  log "cut the network to and from $ip (vm2 FORWARD)"
}

heal() {
  local ip=$1
  for dir in -d -s; do
    while vm2_ipt -C FORWARD "$dir" "$ip" -m comment --comment "$MARK" -j DROP 2>/dev/null; do
      vm2_ipt -D FORWARD "$dir" "$ip" -m comment --comment "$MARK" -j DROP
    done
  done
  log "healed the network of $ip"
}

storage_stop() {
  local name=$1 pidfile=$STATE_DIR/storage/pids/$1.pid p
  [ -s "$pidfile" ] || die "storage-stop: no $pidfile (is tests/storage/up.sh running $name?)"
  p=$(cat "$pidfile")
  kill -TERM "$p" 2>/dev/null || die "storage-stop: $name (pid $p) is not running"
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; log "$name did not stop on TERM, sent KILL"; fi
  log "stopped storage server $name (pid $p)"
}

case ${1:-} in
  stop) [ -n "${2:-}" ] || die "usage: $0 stop DAEMON"; alive "$2" || die "$2 is not running"; stop_daemon "$2" ;;
  start) "$HERE/up.sh" ;;
  cut) cut "${2:?usage: $0 cut POD_IP}" ;;
  heal) heal "${2:?usage: $0 heal POD_IP}" ;;
  storage-stop) storage_stop "${2:?usage: $0 storage-stop NAME}" ;;
  storage-start) "$HERE/../storage/up.sh" ;;
  *) sed -n '2,10p' "$0" >&2; exit 2 ;;
esac
