#!/usr/bin/env bash
# The test cluster's CSI driver loop.csi.benchrun.dev: benchrun's own plugin (tests/cluster/csi/,
# ext4 images on loop devices) behind the real Kubernetes CSI sidecars and snapshot controller,
# for the control-plane operations that need CSI (snapshot, clone, expand, VolumeAttachments):
#   csi.sh build    build, from tests/cluster/csi/go.mod (its `tool` lines) and the Go module
#                   proxy: the plugin, external-provisioner, external-attacher, external-resizer,
#                   csi-snapshotter and snapshot-controller into $BENCHRUN_CACHE/csi/<source hash>/ once; prints
#                   the directory
#   csi.sh up       build; apply the VolumeSnapshot CRDs (from external-snapshotter's client
#                   module), then run on the host: the plugin's controller with the three
#                   sidecars and the snapshot controller, and its node service once per node
#                   (it registers itself with that node's kubelet, as node-driver-registrar
#                   would); then apply addons/csi.yaml (CSIDriver, StorageClass benchrun-csi,
#                   VolumeSnapshotClass benchrun-csi). Idempotent: running daemons of the
#                   same build are kept. provisioner.sh up calls this.
#   csi.sh down     stop them (down.sh calls this); the class stays, its claims wait
#   csi.sh status   exit 0 when all run, else name the first that does not
# The sidecars and the snapshot controller are the released Kubernetes components, unchanged;
# only the plugin is benchrun's (the Kubernetes project's mock plugin is not in csi-test v5 any
# more, and its host-path driver is not served by the Go module proxy here). Volumes live under
# $CLUSTER_DIR/csi/images. Logs: $LOG_DIR/csi-*.log, $LOG_DIR/snapshot-controller.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cluster.sh
. "$HERE/../lib/cluster.sh"
SRC=$HERE/csi
DRIVER=loop.csi.benchrun.dev
CSI_ROOT=$CLUSTER_DIR/csi
CONTROLLER_SOCK=$CSI_ROOT/controller.sock
MANIFEST=$HERE/addons/csi.yaml
TOOLS="github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner
github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher
github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer
github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter
github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"

# Keyed on the plugin's source, the module's requirements and sums, and the Go toolchain.
build() {
  command -v go >/dev/null || die "go not found (needed to build the CSI plugin and sidecars)"
  local key tmp t
  key=$( { cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go; go version; } | sha256sum | cut -c1-16)
  CSI_BIN=$BENCHRUN_CACHE/csi/$key
  [ -x "$CSI_BIN/benchrun-loop-csi" ] && return 0
  local fd
  mkdir -p "$BENCHRUN_CACHE/locks"
  exec {fd}>"$BENCHRUN_CACHE/locks/csi.lock"
  if ! flock -n "$fd"; then
    log "waiting for another build of the CSI plugin and sidecars (the background prefetch of make test?)"
    flock -w 1800 "$fd" || die "the CSI build lock is still held after 30 min: $BENCHRUN_CACHE/locks/csi.lock"
  fi
  if [ ! -x "$CSI_BIN/benchrun-loop-csi" ]; then
    log "building the CSI plugin, 4 sidecars and the snapshot controller from the Go module proxy (first time per source: 5 to 10 min on 2 busy cores)"
    mkdir -p "$CSI_BIN" "$LOG_DIR"
    tmp=$(mktemp -d "$CSI_BIN/.build.XXXXXX")
    # shellcheck disable=SC2086  # TOOLS: one package per word
    if ! (cd "$SRC" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/" $TOOLS &&
          CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/benchrun-loop-csi" .) >> "$LOG_DIR/csi-build.log" 2>&1; then
      rm -rf "$tmp"; die "go build in $SRC failed" csi-build
    fi
    # The plugin last: its presence means the whole set is there.
    for t in csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller benchrun-loop-csi; do mv "$tmp/$t" "$CSI_BIN/$t"; done
    rmdir "$tmp"
    find "$BENCHRUN_CACHE/csi" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
    log "built $CSI_BIN"
  fi
  exec {fd}>&-
}

# The CRDs as released with the snapshotter (its client module's config/crd), the group
# snapshot ones left out (benchrun takes no group snapshots; the snapshot controller is told so
# with its feature gate CSIVolumeGroupSnapshot, else it waits 30 s for their CRDs at every start).
crds() {
  local dir f
  dir=$(cd "$SRC" && go list -mod=readonly -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8) ||
    die "cannot find external-snapshotter's client module (go mod download in $SRC)"
  for f in "$dir"/config/crd/snapshot.storage.k8s.io_*.yaml; do
    kubectl_ apply --server-side -f "$f" >> "$LOG_DIR/csi.log" 2>&1 || die "applying $f failed" csi
  done
  kubectl_ wait --for=condition=Established --timeout=60s \
    crd/volumesnapshots.snapshot.storage.k8s.io crd/volumesnapshotcontents.snapshot.storage.k8s.io \
    crd/volumesnapshotclasses.snapshot.storage.k8s.io >> "$LOG_DIR/csi.log" 2>&1 || die "the VolumeSnapshot CRDs are not established" csi
}

# ensure NAME READY_PATTERN CMD...: start CMD as daemon NAME unless one of this build runs;
# wait for READY_PATTERN in its log (written after this start).
ensure() {
  local name=$1 ready=$2 p; shift 2
  if p=$(pid_of "$name"); then
    if [ "$(readlink "/proc/$p/exe")" = "$1" ]; then return 0; fi
    log "$name running an older build (pid $p): replacing it"
    stop_daemon "$name"
  fi
  local from=1
  [ -f "$LOG_DIR/$name.log" ] && from=$(( $(wc -l < "$LOG_DIR/$name.log") + 1 ))
  start_daemon "$name" "$@"
  wait_for "$name started" 60 "$name" \
    awk -v from="$from" -v re="$ready" 'NR >= from && $0 ~ re { ok = 1 } END { exit !ok }' "$LOG_DIR/$name.log"
}

registered() { # registered NODE: the kubelet of NODE lists the driver in its CSINode
  kubectl_ get csinode "$1" -o jsonpath='{.spec.drivers[*].name}' 2>/dev/null | grep -qw "$DRIVER"
}

up() {
  build
  [ -s "$ADMIN_KUBECONFIG" ] || die "no cluster: run tests/cluster/up.sh first"
  kubectl_ get --raw /readyz >/dev/null 2>&1 || die "the API server does not answer: run tests/cluster/up.sh first"
  mkdir -p "$LOG_DIR" "$CSI_ROOT/images"
  crds
  local kc=--kubeconfig=$ADMIN_KUBECONFIG n
  ensure csi-controller "serving" "$CSI_BIN/benchrun-loop-csi" --mode=controller \
    --endpoint="$CONTROLLER_SOCK" --root="$CSI_ROOT/images"
  for n in $NODES; do
    ensure "csi-node-$n" "registration socket" "$CSI_BIN/benchrun-loop-csi" --mode=node --node-id="$n" \
      --endpoint="$CLUSTER_DIR/$n/kubelet/plugins/$DRIVER/csi.sock" --root="$CSI_ROOT/images" \
      --registry="$CLUSTER_DIR/$n/kubelet/plugins_registry"
  done
  # Each has started its controller when it logs the line matched here (its informers sync next;
  # an object created before they have is handled once they have, so nothing is missed).
  ensure csi-provisioner "Started provisioner controller" "$CSI_BIN/csi-provisioner" "$kc" \
    --csi-address="$CONTROLLER_SOCK" --leader-election=false --timeout=60s --v=2
  ensure csi-attacher "Starting CSI attacher" "$CSI_BIN/csi-attacher" "$kc" \
    --csi-address="$CONTROLLER_SOCK" --leader-election=false --timeout=60s --v=2
  ensure csi-resizer "Starting external resizer" "$CSI_BIN/csi-resizer" "$kc" \
    --csi-address="$CONTROLLER_SOCK" --leader-election=false --timeout=60s --handle-volume-inuse-error=false --v=2
  ensure csi-snapshotter "Starting CSI snapshotter" "$CSI_BIN/csi-snapshotter" "$kc" \
    --csi-address="$CONTROLLER_SOCK" --leader-election=false --timeout=60s --v=2
  ensure snapshot-controller "Starting snapshot controller" "$CSI_BIN/snapshot-controller" "$kc" \
    --leader-election=false --feature-gates=CSIVolumeGroupSnapshot=false --v=2
  for n in $NODES; do wait_for "$DRIVER registered on $n" 60 "csi-node-$n" registered "$n"; done
  # A CSIDriver's attachRequired cannot change: one of an older checkout (false) is replaced.
  if [ "$(kubectl_ get csidriver "$DRIVER" -o jsonpath='{.spec.attachRequired}' 2>/dev/null)" = false ]; then
    kubectl_ delete csidriver "$DRIVER" >> "$LOG_DIR/csi.log" 2>&1 || die "replacing CSIDriver $DRIVER failed" csi
  fi
  kubectl_ apply -f "$MANIFEST" >> "$LOG_DIR/csi.log" 2>&1 || die "applying $MANIFEST failed" csi
  log "CSI driver $DRIVER running (volumes under $CSI_ROOT/images, logs $LOG_DIR/csi-*.log); StorageClass and VolumeSnapshotClass benchrun-csi"
}

DAEMONS="snapshot-controller csi-snapshotter csi-resizer csi-attacher csi-provisioner csi-controller csi-node-vm csi-node-vm2"

status() {
  local d
  for d in $DAEMONS; do alive "$d" || die "$d is not running" "$d"; done
  log "CSI driver $DRIVER running"
}

case ${1:-} in
  build) build >&2; echo "$CSI_BIN" ;;
  up) cluster_lock; up ;;
  down) cluster_lock; for d in $DAEMONS; do stop_daemon "$d"; done ;;
  status) status ;;
  *) echo "usage: $0 build|up|down|status" >&2; exit 2 ;;
esac
