#!/usr/bin/env bash
# Start the test cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler (all on
# 127.0.0.1) and two nodes, vm (host) and vm2 (network namespace), each with its own containerd,
# kubelet and kube-proxy. Waits until both nodes are Ready with a heartbeat from the kubelet
# running now, starts the add-ons (CoreDNS, the storage Services: addons.sh), the dynamic
# provisioner with the default StorageClass (provisioner.sh) and writes the admin
# kubeconfig to tests/.state/kubeconfig.
#
# Idempotent: each daemon is started only if the one recorded in tests/.state/cluster/pids is not
# running, so a second run on a running cluster returns in seconds (and repairs a dead daemon).
# Logs: tests/.state/logs/*.log. Stop with tests/cluster/down.sh.
# Adapted from shared/recipes/cluster (NODE-RECIPE.md, second-node/RECIPE.md); the settings that
# recipe found necessary on this kind of machine are marked "recipe:".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cluster.sh"
[ "$(id -u)" = 0 ] || die "up.sh must run as root (it starts containerd, kubelet and a network namespace)"
mkdir -p "$LOG_DIR" "$PID_DIR"
cluster_lock

# ------------------------------------------------------------------ binaries and packages
# Another copy of build.sh may already be filling the shared cache (e.g. started by hand); a
# second go build of the same binaries would only double the time on 2 cores, so wait for it.
while pgrep -f 'cluster/build\.sh' >/dev/null; do
  log "waiting for a build.sh that is already running (log: $BENCHRUN_CACHE/logs/k8s-build.log)"; sleep 20
done
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  [ -x "$K8S_BIN/$b" ] && continue
  log "building Kubernetes $K8S_VERSION and etcd into $K8S_BIN (first time only: 15-20 min on 2 cores); log $LOG_DIR/build.log"
  break
done
if ! "$HERE/build.sh" >> "$LOG_DIR/build.log" 2>&1; then die "building Kubernetes failed" build; fi
apt_install containerd runc containernetworking-plugins iptables conntrack socat iproute2 util-linux \
  openssl curl gcc libc6-dev ca-certificates >> "$LOG_DIR/apt.log" 2>&1 || die "apt-get install failed" apt
for b in containerd runc ctr socat nsenter; do command -v "$b" >/dev/null || die "$b not found after install"; done
[ -x /usr/lib/cni/bridge ] || die "/usr/lib/cni/bridge missing (containernetworking-plugins)"

# A cluster started by another version of these scripts would keep its old flags and configs
# for as long as it runs; restart it (state is kept, so this takes seconds).
CONFIG_HASH=$(cat "$HERE/up.sh" "$HERE/conf/"* "$HERE/../lib/cluster.sh" | sha256sum | cut -c1-16)
if [ -n "$(ls "$PID_DIR" 2>/dev/null)" ] && [ "$(cat "$CLUSTER_DIR/config-hash" 2>/dev/null)" != "$CONFIG_HASH" ]; then
  log "the running cluster was started by a different version of up.sh; restarting it"
  "$HERE/down.sh" >> "$LOG_DIR/down.log" 2>&1 || die "down.sh failed" down
fi
mkdir -p "$CLUSTER_DIR"; echo "$CONFIG_HASH" > "$CLUSTER_DIR/config-hash"

# ------------------------------------------------------------------ leftovers of a dead cluster
# A machine can keep the network of a test cluster whose daemons are gone (killed without
# down.sh, or run from a checkout whose tests/.state is gone): the bridge cni0 with dead pods'
# veths on it, vm2's namespace, and the pods' namespaces, each still holding its address. A new
# cluster's IPAM starts again at .2, so its first pod would share an address with a dead one and
# the kubelet's probes could reach the dead one (a fresh CI machine saw a readiness probe get
# "connection refused" for a minute). So, when nothing of this cluster runs, clear them first.
any_ours_alive() {
  local f
  for f in "$PID_DIR"/*.pid; do [ -e "$f" ] && alive "$(basename "$f" .pid)" && return 0; done
  return 1
}
if ! any_ours_alive; then
  # Someone else's cluster (another checkout) holds the ports: say so before touching anything.
  for port in 2379 6443 10250; do
    if [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]; then
      die "port $port is in use, but no daemon of this checkout's cluster runs: another test cluster (another checkout, or BENCHRUN_STATE) is up; stop it with its own tests/cluster/down.sh"
    fi
  done
  if ip link show cni0 >/dev/null 2>&1; then ip link del cni0; log "removed the bridge cni0 a dead cluster left"; fi
  if [ -e "/run/netns/$VM2_NETNS" ]; then ip netns del "$VM2_NETNS"; log "removed the namespace $VM2_NETNS a dead cluster left"; fi
  ip link del v2h 2>/dev/null || true
  for f in /run/netns/cni-*; do
    [ -e "$f" ] || continue
    # Only namespaces no process uses: a pod's, left when its processes were killed.
    [ -z "$(ip netns pids "$(basename "$f")" 2>/dev/null)" ] || continue
    ip netns del "$(basename "$f")" 2>/dev/null && log "removed the pod namespace $(basename "$f") a dead cluster left"
  done
  rm -rf "$CLUSTER_DIR/vm/cni/ipam" "$CLUSTER_DIR/vm2/cni/ipam"
fi

# ------------------------------------------------------------------ PKI, kubeconfigs
"$HERE/pki.sh" || die "pki.sh failed"

# A worker prints its JSON summary on stdout and its table on stderr at the same moment; the log
# API merges the two streams line by line, so tests read stdout alone (`stream=Stdout`), which
# needs this gate on the apiserver and the kubelets (alpha in 1.37, test cluster only).
FEATURE_GATES=PodLogsQuerySplitStreams=true

# ------------------------------------------------------------------ control plane (loopback)
if ! alive etcd; then
  start_daemon etcd "$K8S_BIN/etcd" --name=benchrun --data-dir="$CLUSTER_DIR/etcd" \
    --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
    --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --initial-cluster=benchrun=http://127.0.0.1:2380 --initial-cluster-state=new
fi
wait_for "etcd /health" 60 etcd curl -sf http://127.0.0.1:2379/health

if ! alive kube-apiserver; then
  # Binds loopback only. The address it advertises is the host end of vm2's veth, where the
  # apiserver-forwarder below listens (port 6443 too): pods on both nodes reach it (vm's through
  # the host, vm2's through the veth), so the apiserver's own endpoint reconciler publishes a
  # `kubernetes` Service endpoint that kube-proxy makes work from every pod. (recipe: a loopback
  # --advertise-address is refused by the reconciler.)
  start_daemon kube-apiserver "$K8S_BIN/kube-apiserver" \
    --advertise-address="$VM2_HOST_IP" --bind-address=127.0.0.1 --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --feature-gates="$FEATURE_GATES"
fi
wait_for "kube-apiserver /readyz" 180 kube-apiserver kubectl_ get --raw /readyz

if ! alive kube-controller-manager; then
  start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range=10.0.0.0/24
fi
if ! alive kube-scheduler; then
  start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" \
    --kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$CLUSTER_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false
fi
wait_for "kube-controller-manager /healthz" 120 kube-controller-manager curl -skf https://127.0.0.1:10257/healthz
wait_for "kube-scheduler /readyz" 120 kube-scheduler curl -skf https://127.0.0.1:10259/readyz

# ------------------------------------------------------------------ host network for vm2
# recipe (second-node): the node lives in netns vm2, with no default route, so nothing it runs
# can leave the machine; the host routes vm2's pod subnet through the veth and back.
if [ ! -e "/run/netns/$VM2_NETNS" ]; then ip netns add "$VM2_NETNS"; fi
if ! ip link show v2h >/dev/null 2>&1; then
  ip link add v2h type veth peer name v2n
  ip link set v2n netns "$VM2_NETNS"
  ip addr add "$VM2_HOST_IP/24" dev v2h; ip link set v2h up
  ip -n "$VM2_NETNS" addr add "$VM2_NODE_IP/24" dev v2n
  ip -n "$VM2_NETNS" link set v2n up; ip -n "$VM2_NETNS" link set lo up
  log "netns $VM2_NETNS: veth v2h $VM2_HOST_IP <-> v2n $VM2_NODE_IP"
fi
ip route replace 10.89.0.0/16 via "$VM2_NODE_IP" dev v2h
ip -n "$VM2_NETNS" route replace 10.88.0.0/16 via "$VM2_HOST_IP" dev v2n
sysctl -qw net.ipv4.ip_forward=1
$NSX_VM2 sysctl -qw net.ipv4.ip_forward=1

# The apiserver dials a node by its Hostname address first (logs, exec, port-forward). Nothing
# resolves vm2, and vm may not resolve on another machine, so both go to /etc/hosts, marked so
# down.sh removes only our lines. /etc/hosts may be a bind mount: rewrite in place, never rename.
HOSTS_MARK="# benchrun test cluster $CLUSTER_DIR"
add_host() { # add_host IP NAME
  [ "$(getent ahostsv4 "$2" | awk 'NR==1{print $1}')" = "$1" ] && return 0
  echo "$1 $2 $HOSTS_MARK" >> /etc/hosts
  [ "$(getent ahostsv4 "$2" | awk 'NR==1{print $1}')" = "$1" ] || die "$2 resolves to $(getent ahostsv4 "$2" | awk 'NR==1{print $1}'), not $1; fix /etc/hosts"
}
add_host 127.0.0.1 vm
add_host "$VM2_NODE_IP" vm2

# recipe: the apiserver binds loopback only, which netns vm2 cannot reach; forward from the
# host end of the veth (a SAN of the apiserver certificate, see pki.sh).
if ! alive apiserver-forwarder; then
  start_daemon apiserver-forwarder socat "TCP-LISTEN:6443,bind=$VM2_HOST_IP,fork,reuseaddr,backlog=1024" TCP:127.0.0.1:6443
fi

# ------------------------------------------------------------------ pause image (built locally)
PAUSE_REF=localhost/pause:local
PAUSE_TAR=$IMAGE_CACHE/pause_local.tar
if [ ! -f "$PAUSE_TAR" ]; then
  mkdir -p "$IMAGE_CACHE"
  gcc -static -O2 -s -o "$IMAGE_CACHE/pause" "$HERE/conf/pause.c" || die "gcc -static pause.c failed"
  make_image "$PAUSE_TAR" "$PAUSE_REF" "$IMAGE_CACHE/pause" /pause
fi

# ------------------------------------------------------------------ nodes
DEFDEV=$(ip -4 route show default | awk '{for(i=1;i<NF;i++) if($i=="dev"){print $(i+1); exit}}')
# recipe: the kubelet rejects a loopback --node-ip; the machine's own eth0 address is accepted
# (nothing dials it: the apiserver uses the Hostname address, 127.0.0.1).
VM_NODE_IP=$(ip -4 -o addr show dev "${DEFDEV:-eth0}" 2>/dev/null | awk '{split($4,a,"/"); print a[1]; exit}')
[ -n "$VM_NODE_IP" ] || die "no IPv4 address on the default-route interface for kubelet --node-ip of vm"

# node_conf NODE BRIDGE SUBNET GATEWAY ADDRESS EXTRA_KUBELET_YAML
node_conf() {
  local node=$1 br=$2 subnet=$3 gw=$4 addr=$5 extra=$6 d=$CLUSTER_DIR/$1
  mkdir -p "$d/containerd" "$d/cni/net.d" "$d/cni/ipam" "$d/manifests"
  cat > "$d/containerd/config.toml" <<EOF
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
[grpc]
  address = "$d/containerd/containerd.sock"
[ttrpc]
  address = "$d/containerd/containerd.sock.ttrpc"
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_REF"
    stream_server_address = "127.0.0.1"
    enable_cdi = false
    # recipe: no CAP_SYS_RESOURCE here, so runc cannot set the pause container's
    # oom_score_adj=-998 and every sandbox fails ("can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    # A Block claim's device node is owned by the pod's runAsUser/runAsGroup, so a non-root
    # worker can open it (otherwise root:disk 0660 from the host). Users' clusters need the
    # same for block benchmarks without root (docs/VOLUMES.md).
    device_ownership_from_security_context = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "/run/benchrun-runc-$node"   # two containerds must not share runc state
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$d/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "$d/containerd/opt"
EOF
  cat > "$d/cni/net.d/10-benchrun.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "benchrun-$node",
  "plugins": [
    {
      "type": "bridge", "bridge": "$br", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$subnet", "gateway": "$gw"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$d/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat > "$d/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$d/containerd/containerd.sock
imageServiceEndpoint: unix://$d/containerd/containerd.sock
cgroupDriver: cgroupfs          # containerd 1.6 has no RuntimeConfig RPC; no systemd here
failCgroupV1: false             # recipe: kubelet >= 1.35 refuses cgroup v1 by default
failSwapOn: false
protectKernelDefaults: false
staticPodPath: $d/manifests
podLogsDir: $d/pod-logs
resolvConf: /etc/resolv.conf
address: $addr
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$CLUSTER_DNS_IP]   # CoreDNS's Service (addons.sh)
# Hand-made images cannot be pulled again: never garbage-collect or evict them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No disk-pressure eviction ("0%" disables a threshold): the nodes' filesystem is the host's,
# shared with builds and with other tenants of the machine, whose free space swings by tens of
# GB; a dip below 1% (2.5 GB of 252 GB here) tainted vm2 for 5 minutes mid-run and failed
# tests far from the cause. A disk that truly fills fails with ENOSPC, which says so. An
# emptyDir over its sizeLimit is still evicted (that check is separate from these).
evictionHard: {memory.available: "100Mi", nodefs.available: "0%", imagefs.available: "0%", nodefs.inodesFree: "0%"}
mergeDefaultEvictionSettings: false
serializeImagePulls: false
syncFrequency: 10s
nodeStatusUpdateFrequency: 10s
featureGates: {${FEATURE_GATES%%=*}: true}
$extra
EOF
}

# start_containerd NODE [NSENTER...]
start_containerd() {
  local node=$1; shift
  local name=containerd-$node
  if ! alive "$name"; then
    local off; off=$(stat -c %s "$LOG_DIR/$name.log" 2>/dev/null || echo 0)
    start_daemon "$name" "$@" containerd --config "$CLUSTER_DIR/$node/containerd/config.toml"
    wait_for "$name socket" 30 "$name" ctr_ "$node" version
    # recipe: CRI answers "server is not initialized yet" until it has recovered its state, and
    # a kubelet started before that exits; this line is its last init step.
    local end=$(( $(date +%s) + 60 ))
    # Not `tail | grep -q`: under pipefail a match that SIGPIPEs tail would read as no match.
    until grep -q 'Start streaming server' < <(tail -c +$((off + 1)) "$LOG_DIR/$name.log"); do
      [ "$(date +%s)" -lt "$end" ] || die "$name CRI not initialized after 60s" "$name"
      alive "$name" || die "$name exited" "$name"
      sleep 0.1
    done
    log "$name CRI ready"
  fi
  import_image "$node" "$PAUSE_TAR" "$PAUSE_REF"
}

declare -A KUBELET_START
# start_kubelet NODE NODE_IP [NSENTER...]
start_kubelet() {
  local node=$1 ip=$2; shift 2
  local name=kubelet-$node
  if alive "$name"; then KUBELET_START[$node]=""; return 0; fi
  KUBELET_START[$node]=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # recipe: a kubelet that races containerd's CRI start exits at once; retry a few times.
  for try in 1 2 3; do
    start_daemon "$name" "$@" "$K8S_BIN/kubelet" \
      --config="$CLUSTER_DIR/$node/kubelet-config.yaml" \
      --kubeconfig="$CLUSTER_DIR/kubelet-$node.kubeconfig" \
      --hostname-override="$node" \
      --root-dir="$CLUSTER_DIR/$node/kubelet" \
      --cert-dir="$CLUSTER_DIR/$node/kubelet-pki" \
      --node-ip="$ip" --v=1
    local end=$(( $(date +%s) + 30 ))
    while [ "$(date +%s)" -lt "$end" ] && alive "$name"; do
      "$@" curl -sf http://127.0.0.1:10248/healthz >/dev/null 2>&1 && { log "$name healthz ok"; return 0; }
      sleep 0.2
    done
    alive "$name" && die "$name not healthy after 30s" "$name"
    echo "$name exited (try $try)" >&2; grep -E '^[EF][0-9]' "$LOG_DIR/$name.log" | tail -3 >&2 || true
    sleep 2
  done
  die "$name keeps exiting" "$name"
}

node_conf vm cni0 10.88.0.0/16 10.88.0.1 127.0.0.1 ""
# cgroupRoot keeps vm2's pods apart from vm's (/kubepods); the kubelet needs it to exist.
node_conf vm2 cni1 10.89.0.0/16 10.89.0.1 "$VM2_NODE_IP" "cgroupRoot: /vm2"
for d in /sys/fs/cgroup/*/; do
  case $d in */unified/) continue ;; esac
  mkdir -p "${d}vm2"
done
if [ -d /sys/fs/cgroup/cpuset/vm2 ]; then
  [ -n "$(cat /sys/fs/cgroup/cpuset/vm2/cpuset.cpus)" ] || cat /sys/fs/cgroup/cpuset/cpuset.cpus > /sys/fs/cgroup/cpuset/vm2/cpuset.cpus
  [ -n "$(cat /sys/fs/cgroup/cpuset/vm2/cpuset.mems)" ] || cat /sys/fs/cgroup/cpuset/cpuset.mems > /sys/fs/cgroup/cpuset/vm2/cpuset.mems
fi

# recipe: nsenter --net, not `ip netns exec`, which would give the daemon its own mount
# namespace and a /sys without cgroups (kubelet volume mounts would be invisible to containerd).
start_containerd vm
start_containerd vm2 $NSX_VM2
start_kubelet vm "$VM_NODE_IP"
start_kubelet vm2 "$VM2_NODE_IP" $NSX_VM2

# recipe: after a restart the Node keeps the old kubelet's Ready for ~40 s, so Ready only counts
# with a heartbeat newer than this kubelet's start.
for node in $NODES; do
  end=$(( $(date +%s) + 180 ))
  while :; do
    r=$(kubectl_ get node "$node" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}' 2>/dev/null) || r=""
    if [ "${r%% *}" = True ] && [[ ! "${r#* }" < "${KUBELET_START[$node]}" ]]; then break; fi
    alive "kubelet-$node" || die "kubelet-$node exited before node $node was Ready" "kubelet-$node"
    [ "$(date +%s)" -lt "$end" ] || die "node $node not Ready after 180s (Ready=$r)" "kubelet-$node" "containerd-$node"
    sleep 0.2
  done
  log "node $node Ready (heartbeat ${r#* })"
done

# ------------------------------------------------------------------ kube-proxy
# iptables mode (iptables-nft on Debian 12), one per node; vm2's in its netns like its kubelet,
# so it programs that namespace's rules, which vm2's pods' traffic crosses. masqueradeAll: a pod
# reaching a Service whose endpoint sits on its own bridge gets the reply back through the node
# (no reliance on br_netfilter). conntrack sysctls are left as they are (0 = do not set).
# kube_proxy_conf NODE: write the config to kube-proxy.yaml.new (see start_kube_proxy)
kube_proxy_conf() {
  cat > "$CLUSTER_DIR/$1/kube-proxy.yaml.new" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $CLUSTER_DIR/kube-proxy-$1.kubeconfig}
hostnameOverride: $1
mode: iptables
clusterCIDR: $POD_CIDR
iptables: {masqueradeAll: true}
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [primary]
EOF
}
# start_kube_proxy NODE [NSENTER...]
start_kube_proxy() {
  local node=$1 conf; shift
  conf=$CLUSTER_DIR/$node/kube-proxy.yaml
  kube_proxy_conf "$node"
  # kube-proxy exits when its config file is written to, even with the same content: on a
  # running cluster, touch the file only when it changes, and then restart kube-proxy.
  if cmp -s "$conf.new" "$conf"; then
    rm -f "$conf.new"
  else
    stop_daemon "kube-proxy-$node"
    mv "$conf.new" "$conf"
  fi
  alive "kube-proxy-$node" ||
    start_daemon "kube-proxy-$node" "$@" "$K8S_BIN/kube-proxy" --config="$CLUSTER_DIR/$node/kube-proxy.yaml" --v=1
}
start_kube_proxy vm
start_kube_proxy vm2 $NSX_VM2
# /healthz answers 200 once the rules were written after the first sync with the apiserver.
wait_for "kube-proxy-vm /healthz" 60 kube-proxy-vm curl -sf http://127.0.0.1:10256/healthz
wait_for "kube-proxy-vm2 /healthz" 60 kube-proxy-vm2 $NSX_VM2 curl -sf http://127.0.0.1:10256/healthz

# ------------------------------------------------------------------ storage forwarders
# The storage servers (tests/storage/up.sh) listen on 127.0.0.1; the storage Services
# (addons.sh) point at $VM2_HOST_IP, which pods on both nodes reach. These forward from there.
# They can start before the servers: each connection is forwarded when it arrives.
for fwd in $STORAGE_FORWARDS; do
  name=${fwd%%:*} port=${fwd#*:}
  alive "forward-$name" ||
    start_daemon "forward-$name" socat "TCP-LISTEN:$port,bind=$VM2_HOST_IP,fork,reuseaddr,backlog=1024" "TCP:127.0.0.1:$port"
done

"$HERE/addons.sh" || die "addons.sh failed"
# The dynamic provisioner on the host and the default StorageClass benchrun-hostpath.
"$HERE/provisioner.sh" up || die "provisioner.sh up failed" provisioner

cp "$ADMIN_KUBECONFIG" "$KUBECONFIG_OUT.tmp"; mv "$KUBECONFIG_OUT.tmp" "$KUBECONFIG_OUT"
kubectl_ get nodes -o wide
log "cluster up; export KUBECONFIG=$KUBECONFIG_OUT (kubectl: $K8S_BIN/kubectl)"
