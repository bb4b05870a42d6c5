#!/usr/bin/env bash
# The test cluster's dynamic provisioner and its default StorageClass `benchrun-hostpath`:
#   provisioner.sh build    build tests/cluster/provisioner/ (Go, on sig-storage-lib-external-
#                           provisioner) into $BENCHRUN_CACHE/provisioner/<source hash>/ once;
#                           prints the binary's path
#   provisioner.sh up       build, run it on the host against this checkout's cluster and apply
#                           addons/storageclass.yaml (idempotent: a running provisioner of the same
#                           build is kept; one of an older build is replaced), then start the
#                           cluster's second provisioner, rancher's local-path-provisioner
#                           (local_path.sh up, StorageClass local-path), and its CSI driver
#                           (csi.sh up, StorageClass benchrun-csi). up.sh calls this.
#   provisioner.sh down     stop it (down.sh calls this). The StorageClass stays, like everything
#                           in etcd: claims of it wait (Pending) until the provisioner runs again.
#   provisioner.sh status   exit 0 when it runs, else print its log's tail and exit 1
# Each claim gets a directory $CLUSTER_DIR/hostpath/pvc-<uid>, an ext4 of the claim's size on a
# loop device (sparse image pvc-<uid>.img beside it; both kubelets run on this machine,
# so either node reaches it) and a hostPath PersistentVolume pinned to the node of its first pod;
# unmounted and removed with the volume (reclaimPolicy Delete). Log: $LOG_DIR/provisioner.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cluster.sh
. "$HERE/../lib/cluster.sh"
SRC=$HERE/provisioner
PROV_ROOT=$CLUSTER_DIR/hostpath
CLASS_YAML=$HERE/addons/storageclass.yaml

# The binary is keyed on its source, its module sums and the Go toolchain: a change to any of
# them builds a new one; a warm machine starts without building.
build() {
  command -v go >/dev/null || die "go not found (needed to build the provisioner)"
  local key dir tmp
  key=$( { cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go; go version; } | sha256sum | cut -c1-16)
  dir=$BENCHRUN_CACHE/provisioner/$key
  PROV_BIN=$dir/benchrun-hostpath-provisioner
  [ -x "$PROV_BIN" ] && return 0
  # One build at a time (the background prefetch of `make test` builds it too). Not cache_lock:
  # that lock lasts until the script exits, and `up` leaves the provisioner running with its fds.
  local fd
  mkdir -p "$BENCHRUN_CACHE/locks"
  exec {fd}>"$BENCHRUN_CACHE/locks/provisioner.lock"
  if ! flock -n "$fd"; then
    log "waiting for another build of the provisioner (the background prefetch of make test?)"
    flock -w 1800 "$fd" || die "the provisioner's build lock is still held after 30 min: $BENCHRUN_CACHE/locks/provisioner.lock"
  fi
  if [ ! -x "$PROV_BIN" ]; then
    log "building the hostpath provisioner from the Go module proxy (first time per source: 3 to 5 min on 2 busy cores)"
    mkdir -p "$dir" "$LOG_DIR"
    tmp=$(mktemp "$dir/.build.XXXXXX")
    if ! (cd "$SRC" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp" .) >> "$LOG_DIR/provisioner-build.log" 2>&1; then
      rm -f "$tmp"; die "go build of $SRC failed" provisioner-build
    fi
    mv "$tmp" "$PROV_BIN"
    # Older builds: only the current one is kept.
    find "$BENCHRUN_CACHE/provisioner" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
    log "built $PROV_BIN"
  fi
  exec {fd}>&-
}

up() {
  build
  [ -s "$ADMIN_KUBECONFIG" ] || die "no cluster: run tests/cluster/up.sh first"
  kubectl_ get --raw /readyz >/dev/null 2>&1 || die "the API server does not answer: run tests/cluster/up.sh first"
  local p
  if p=$(pid_of provisioner); then
    if [ "$(readlink "/proc/$p/exe")" = "$PROV_BIN" ]; then
      log "provisioner already running (pid $p)"
    else
      log "provisioner running an older build (pid $p): replacing it"
      stop_daemon provisioner
    fi
  fi
  if ! alive provisioner; then
    mkdir -p "$LOG_DIR"
    local from=1
    [ -f "$LOG_DIR/provisioner.log" ] && from=$(( $(wc -l < "$LOG_DIR/provisioner.log") + 1 ))
    start_daemon provisioner "$PROV_BIN" --kubeconfig="$ADMIN_KUBECONFIG" --root="$PROV_ROOT"
    # Started = its informers have synced and its workers run (the library logs it then).
    wait_for "provisioner started" 60 provisioner \
      awk -v from="$from" 'NR >= from && /Started provisioner controller/ { ok = 1 } END { exit !ok }' "$LOG_DIR/provisioner.log"
  fi
  kubectl_ apply -f "$CLASS_YAML" >> "$LOG_DIR/provisioner.log" 2>&1 || die "applying $CLASS_YAML failed" provisioner
  local defaults
  defaults=$(kubectl_ get storageclass -o jsonpath='{range .items[?(@.metadata.annotations.storageclass\.kubernetes\.io/is-default-class=="true")]}{.metadata.name} {end}')
  [ "$defaults" = "benchrun-hostpath " ] || die "want benchrun-hostpath as the one default StorageClass, have: '$defaults'"
  log "provisioner running (pid $(pid_of provisioner), volumes under $PROV_ROOT, log $LOG_DIR/provisioner.log); default StorageClass benchrun-hostpath"
}

status() {
  alive provisioner || die "the provisioner is not running" provisioner
  log "provisioner running (pid $(pid_of provisioner))"
}

case ${1:-} in
  build) build >&2; echo "$PROV_BIN" ;;
  # local-path from here rather than from up.sh: a change to up.sh restarts a running cluster.
  up) cluster_lock; up; "$HERE/local_path.sh" up; "$HERE/csi.sh" up ;;
  down) cluster_lock; stop_daemon provisioner ;;
  status) status ;;
  *) echo "usage: $0 build|up|down|status" >&2; exit 2 ;;
esac
