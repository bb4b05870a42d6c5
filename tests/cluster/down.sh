#!/usr/bin/env bash
# Stop the test cluster that up.sh started: only the daemons recorded in tests/.state/cluster/pids
# (checked against their start time, so a reused PID is never signalled), the pod containers of
# our own two containerds, and the host pieces up.sh added (netns vm2, routes, our /etc/hosts
# lines, the /vm2 cgroups). Kubernetes state (etcd, PKI, images) is kept for a fast restart.
#   --wipe   also remove tests/.state/cluster, the kubeconfig and images.env
# No `set -e`: a teardown has to go on past pieces that are already gone.
set -uo pipefail
. "$(dirname "$0")/../lib/cluster.sh"
WIPE=0
for a in "$@"; do
  case $a in
    --wipe) WIPE=1 ;;
    *) echo "usage: $0 [--wipe]" >&2; exit 2 ;;
  esac
done
cluster_lock

# kill_pods NODE: without this the runc shims keep pod containers running past containerd (and
# in vm2's case past its network namespace).
NETNS_FILES=""
kill_pods() {
  local node=$1
  alive "containerd-$node" || return 0
  local c t
  for c in $(ctr_ "$node" containers ls -q 2>/dev/null); do
    NETNS_FILES+=" $(ctr_ "$node" containers info "$c" 2>/dev/null | grep -o '"/var/run/netns/cni-[^"]*"' | tr -d '"' | head -1)"
  done
  for t in $(ctr_ "$node" tasks ls -q 2>/dev/null); do ctr_ "$node" tasks kill -s KILL "$t" >/dev/null 2>&1; done
  sleep 0.5
  for t in $(ctr_ "$node" tasks ls -q 2>/dev/null); do ctr_ "$node" tasks rm -f "$t" >/dev/null 2>&1; done
  for c in $(ctr_ "$node" containers ls -q 2>/dev/null); do ctr_ "$node" containers rm "$c" >/dev/null 2>&1; done
  log "removed pod containers of node $node"
}

# kwok (tests/cluster/kwok.sh) first: it would keep re-creating the leases of its fake nodes.
stop_daemon kwok
# The provisioners (tests/cluster/provisioner.sh, local_path.sh, csi.sh) while the API server still answers its watches.
stop_daemon provisioner
stop_daemon local-path-provisioner
"$(dirname "$0")/csi.sh" down   # the CSI driver: sidecars, snapshot controller, plugin
for node in vm2 vm; do stop_daemon "kube-proxy-$node"; stop_daemon "kubelet-$node"; done
if iptables -t nat -S KUBE-SERVICES >/dev/null 2>&1; then
  # The host keeps kube-proxy's rules after it stops (vm2's go with the netns); remove them.
  "$K8S_BIN/kube-proxy" --cleanup >> "$LOG_DIR/kube-proxy-vm.log" 2>&1
  log "ran kube-proxy --cleanup on the host (log: $LOG_DIR/kube-proxy-vm.log)"
fi
for f in $STORAGE_FORWARDS; do stop_daemon "forward-${f%%:*}"; done
for node in vm2 vm; do kill_pods "$node"; stop_daemon "containerd-$node"; done
stop_daemon apiserver-forwarder
for d in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_daemon "$d"; done

for f in $(echo "$NETNS_FILES" | tr ' ' '\n' | sort -u); do
  [ -e "$f" ] && { umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null; rm -f "$f"; }
done
# kubelet volume mounts (tmpfs, projected) and any leftover container rootfs under our state
grep -o " $CLUSTER_DIR/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "WARNING: cannot unmount $m" >&2
done
for node in $NODES; do
  rm -rf "/run/benchrun-runc-$node" "$CLUSTER_DIR/$node/containerd/state" "$CLUSTER_DIR/$node/cni/ipam"
done
if [ -e "/run/netns/$VM2_NETNS" ]; then
  ip netns del "$VM2_NETNS" && echo "deleted netns $VM2_NETNS (with veth v2h/v2n, bridge cni1)"
fi
ip link del v2h 2>/dev/null || true
ip route del 10.89.0.0/16 2>/dev/null || true
if grep -qF "# benchrun test cluster $CLUSTER_DIR" /etc/hosts; then
  grep -vF "# benchrun test cluster $CLUSTER_DIR" /etc/hosts > "$STATE_DIR/hosts.new" && cat "$STATE_DIR/hosts.new" > /etc/hosts
  rm -f "$STATE_DIR/hosts.new"; echo "removed our lines from /etc/hosts"
fi
for d in /sys/fs/cgroup/*/vm2; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
done
ls -d /sys/fs/cgroup/*/vm2 >/dev/null 2>&1 && echo "WARNING: some /vm2 cgroups are still in use" >&2

if [ $WIPE = 1 ]; then
  if grep -q " $CLUSTER_DIR/" /proc/self/mounts; then
    echo "ERROR: mounts left under $CLUSTER_DIR; not wiping:" >&2; grep " $CLUSTER_DIR/" /proc/self/mounts >&2; exit 1
  fi
  ip link del cni0 2>/dev/null || true
  rm -rf "$CLUSTER_DIR" "$KUBECONFIG_OUT" "$IMAGES_ENV"
  echo "wiped $CLUSTER_DIR"
fi
exit 0
