# shellcheck shell=bash disable=SC2034  # sourced; the variables are used by the scripts that source it
# Shared layout and helpers of the test cluster (tests/cluster/*.sh). Sourced, not executed.
#
# Two real nodes on one machine, adapted from shared/recipes/cluster (+ second-node):
#   vm   host network namespace; containerd + kubelet; pods on bridge cni0 10.88.0.0/16
#   vm2  network namespace "vm2" (veth v2h 10.200.0.1 <-> v2n 10.200.0.2); its own containerd,
#        kubelet, runc root, cgroup root /vm2; pods on bridge cni1 10.89.0.0/16
# Pods reach a server on the host at 10.88.0.1 (from vm) or 10.200.0.1 (from vm2).
. "$(dirname "${BASH_SOURCE[0]}")/cache.sh"

CLUSTER_DIR=$STATE_DIR/cluster          # PKI, etcd data, containerd and kubelet state of this checkout
PKI=$CLUSTER_DIR/pki
PID_DIR=$CLUSTER_DIR/pids               # NAME.pid = "PID STARTTIME" of each daemon we started
LOG_DIR=$STATE_DIR/logs
KUBECONFIG_OUT=$STATE_DIR/kubeconfig    # admin kubeconfig the tests use
ADMIN_KUBECONFIG=$CLUSTER_DIR/admin.kubeconfig
IMAGES_ENV=$STATE_DIR/images.env
IMAGE_CACHE=$BENCHRUN_CACHE/images      # image tarballs, shared by checkouts (content-addressed tags)

NODES="vm vm2"
VM2_NETNS=vm2
VM2_HOST_IP=10.200.0.1                  # host end of the veth; apiserver forwarder binds here
VM2_NODE_IP=10.200.0.2
POD_CIDR=10.88.0.0/15                   # vm's 10.88.0.0/16 and vm2's 10.89.0.0/16
CLUSTER_DNS_IP=10.0.0.10                # CoreDNS's Service (service range 10.0.0.0/24)
# Storage servers forwarded from $VM2_HOST_IP to 127.0.0.1 for the storage Services: NAME:PORT
STORAGE_FORWARDS="minio:9000 azurite:10000 fake-gcs:4443"
NSX_VM2="nsenter --net=/run/netns/$VM2_NETNS"

kubectl_() { "$K8S_BIN/kubectl" --kubeconfig="$ADMIN_KUBECONFIG" "$@"; }
ctr_() { local node=$1; shift; ctr -a "$CLUSTER_DIR/$node/containerd/containerd.sock" -n k8s.io "$@"; }

_T0=${_T0:-$(date +%s.%N)}
elapsed() { awk -v a="$_T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1fs", b-a}'; }
log() { echo "[$(basename "$0") $(elapsed)] $*"; }

# die MSG [LOGNAME...]: print the message and the tail of each named log, then exit 1.
die() {
  local msg=$1; shift
  echo "ERROR: $msg" >&2
  local l
  for l in "$@"; do
    [ -f "$LOG_DIR/$l.log" ] || continue
    echo "---- last 30 lines of $LOG_DIR/$l.log ----" >&2
    tail -n 30 "$LOG_DIR/$l.log" >&2
  done
  exit 1
}

# cluster_lock: up.sh, down.sh and image.sh of one checkout run one at a time (a second up.sh
# would start every daemon twice; image.sh's pruning would race another import). A script
# called by a lock holder (up.sh -> down.sh) inherits the lock.
cluster_lock() {
  [ -n "${BENCHRUN_CLUSTER_LOCKED:-}" ] && return 0
  mkdir -p "$STATE_DIR"
  exec 8>"$STATE_DIR/.cluster.lock"
  if ! flock -n 8; then
    echo "[$(basename "$0")] waiting for another up.sh/down.sh/image.sh of this checkout to finish" >&2
    flock -w 1800 8 || die "still locked after 30 min: $STATE_DIR/.cluster.lock"
  fi
  export BENCHRUN_CLUSTER_LOCKED=1
}

# A PID alone could be reused by an unrelated process after a crash, so the pid file also keeps
# the process start time (field 22 of /proc/PID/stat); only an exact match counts as ours.
_starttime() { awk '{sub(/^.*\) /, ""); print $20}' "/proc/$1/stat" 2>/dev/null; }
# An exited daemon stays a zombie until init reaps it (seconds, here); that is not running.
_running() { local st; st=$(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]; }
pid_of() { # pid_of NAME: print the PID if that daemon is ours and running
  local f=$PID_DIR/$1.pid p st
  [ -s "$f" ] || return 1
  read -r p st < "$f"
  [ -n "$p" ] && [ -n "$st" ] && [ "$(_starttime "$p")" = "$st" ] && _running "$p" && echo "$p"
}
alive() { pid_of "$1" >/dev/null; }

# start_daemon NAME CMD...: start detached (own session, survives the script), log to
# $LOG_DIR/NAME.log, record PID. setsid, nohup and nsenter all exec, so $! is the daemon itself
# (and exec keeps the start time, so it can be read at once).
start_daemon() {
  local name=$1; shift
  mkdir -p "$PID_DIR" "$LOG_DIR"
  echo "==== $(date -u +%FT%TZ) start: $*" >> "$LOG_DIR/$name.log"
  # 8>&-: a daemon must not inherit the cluster lock, or it would hold it for its whole life.
  setsid nohup "$@" >> "$LOG_DIR/$name.log" 2>&1 < /dev/null 8>&- &
  local p=$!
  echo "$p $(_starttime "$p")" > "$PID_DIR/$name.pid"
}

# stop_daemon NAME: TERM, then KILL after 10 s; only a process recorded by start_daemon.
stop_daemon() {
  local name=$1 p
  if p=$(pid_of "$name"); then
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 1 100); do _running "$p" || break; sleep 0.1; done
    if _running "$p"; then kill -KILL "$p" 2>/dev/null || true; echo "  $name did not stop, sent KILL"; fi
    log "stopped $name (pid $p)"
  fi
  rm -f "$PID_DIR/$name.pid"
}

# wait_for DESC TIMEOUT_S DAEMON CMD...: poll CMD until it succeeds; fail early (with the log)
# when DAEMON exits.
wait_for() {
  local desc=$1 t=$2 d=$3; shift 3
  local end=$(( $(date +%s) + t ))
  while [ "$(date +%s)" -lt "$end" ]; do
    "$@" >/dev/null 2>&1 && { log "$desc ok"; return 0; }
    alive "$d" || die "$d exited while waiting for $desc" "$d"
    sleep 0.2
  done
  die "$desc not ready after ${t}s" "$d"
}

# make_image TAR REF BINARY DEST [SRC:DEST...]: write a docker-archive image (one reproducible,
# uncompressed layer; no Docker, no registry, no image tool) that `ctr images import` accepts.
# Runs as uid/gid 65532 (the distroless "nonroot" user); the root fs holds only the binary,
# /etc/passwd+group, an empty /tmp and the mount points, so readOnlyRootFilesystem works.
make_image() {
  local tar=$1 ref=$2 bin=$3 dest=$4; shift 4
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/benchrun-img.XXXXXX")
  local root=$work/rootfs
  mkdir -p "$root"/{etc,tmp,proc,sys,dev,run,data,config} "$work/out"
  chmod 1777 "$root/tmp"
  install -m 0755 "$bin" "$root$dest"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
  local e
  for e in "$@"; do mkdir -p "$(dirname "$root${e#*:}")"; cp -L "${e%%:*}" "$root${e#*:}"; done
  find "$root" -mindepth 1 -maxdepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar -C "$root" --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' -cf "$work/layer.tar" -T -
  local layer; layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  mkdir -p "$work/out/$layer"; mv "$work/layer.tar" "$work/out/$layer/layer.tar"
  local config
  config=$(printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"User":"65532:65532","Env":["PATH=/"],"Entrypoint":["%s"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"tests/lib/cluster.sh make_image %s"}]}' \
    "$dest" "$layer" "$(basename "$bin")")
  local csha; csha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" > "$work/out/$csha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$csha" "$ref" "$layer" > "$work/out/manifest.json"
  mkdir -p "$(dirname "$tar")"
  (cd "$work/out" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' -cf "$tar.$$.tmp" *)
  mv "$tar.$$.tmp" "$tar"
  rm -rf "$work"
}

# import_image NODE TAR REF: import into that node's containerd unless it already has REF.
import_image() {
  local node=$1 tar=$2 ref=$3
  # grep reads a finished listing, not a pipe: under pipefail, `ctr ... | grep -q` fails
  # whenever grep matches and exits before ctr has written everything (SIGPIPE).
  local have
  have=$(ctr_ "$node" images ls -q 2>/dev/null) || have=
  grep -qxF "$ref" <<< "$have" && return 0
  ctr_ "$node" images import "$tar" > /dev/null || die "import of $ref into containerd on $node failed" "containerd-$node"
  have=$(ctr_ "$node" images ls -q) || die "cannot list images on $node" "containerd-$node"
  grep -qxF "$ref" <<< "$have" || die "$ref missing on $node after import"
}
