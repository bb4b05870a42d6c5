#!/usr/bin/env bash
# rancher's local-path-provisioner, the test cluster's second real provisioner, and its
# StorageClass `local-path` (not the default: benchrun-hostpath is):
#   local_path.sh build    build github.com/rancher/local-path-provisioner $LOCAL_PATH_VERSION
#                          from the Go module proxy (its go.mod and go.sum) into
#                          $BENCHRUN_CACHE/local-path-provisioner/<version+go hash>/ once;
#                          prints the binary's path
#   local_path.sh up       build, apply addons/local-path.yaml (namespace, helper pods'
#                          ServiceAccount, ConfigMap, StorageClass), import the helper image on
#                          both nodes and run the provisioner on the host against this
#                          checkout's cluster (idempotent: a running one of the same build and
#                          manifest is kept, else replaced). provisioner.sh up calls this.
#   local_path.sh down     stop it (down.sh calls this); the class stays, its claims wait
#   local_path.sh status   exit 0 when it runs, else print its log's tail and exit 1
# Out of cluster, as upstream runs it in a pod: `start --kubeconfig`, config.json and
# helperPod.yaml read from the ConfigMap. For each claim it creates a helper pod on the claim's
# node (image: busybox as /bin/sh, built here, imported, never pulled) that makes the directory
# $CLUSTER_DIR/local-path/pvc-<uid>_<ns>_<claim> (mode 0777), then a hostPath PersistentVolume
# pinned to that node; deleting the claim runs a helper pod that removes it. The volume has no
# size limit (a directory on the host's file system): keep writes small.
# It polls its helper pod once a second (upstream's code), so provisioning and deletion take
# at least about a second each: that is this provisioner's real behaviour, not the harness's.
# Its log says "unable to retrieve in cluster config" after each helper pod: it copies the
# helper's log only from inside a pod; harmless out of cluster. Log: $LOG_DIR/local-path-provisioner.log.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cluster.sh
. "$HERE/../lib/cluster.sh"
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}
MODULE=github.com/rancher/local-path-provisioner
NAME=local-path-provisioner
LPP_ROOT=$CLUSTER_DIR/local-path
MANIFEST=$HERE/addons/local-path.yaml

# The binary is keyed on the version and the Go toolchain; a warm machine starts without building.
build() {
  command -v go >/dev/null || die "go not found (needed to build $MODULE)"
  local key dir tmp src
  key=$( { echo "$MODULE@$LOCAL_PATH_VERSION"; go version; } | sha256sum | cut -c1-16)
  dir=$BENCHRUN_CACHE/local-path-provisioner/$key
  LPP_BIN=$dir/local-path-provisioner
  [ -x "$LPP_BIN" ] && return 0
  # One build at a time (the background prefetch of `make test` builds it too). Not cache_lock:
  # that lock lasts until the script exits, and `up` leaves the provisioner running with its fds.
  local fd
  mkdir -p "$BENCHRUN_CACHE/locks"
  exec {fd}>"$BENCHRUN_CACHE/locks/local-path-provisioner.lock"
  if ! flock -n "$fd"; then
    log "waiting for another build of $NAME (the background prefetch of make test?)"
    flock -w 1800 "$fd" || die "the $NAME build lock is still held after 30 min: $BENCHRUN_CACHE/locks/local-path-provisioner.lock"
  fi
  if [ ! -x "$LPP_BIN" ]; then
    log "building $MODULE $LOCAL_PATH_VERSION from the Go module proxy (first time per version: 2 to 4 min on 2 busy cores)"
    mkdir -p "$dir" "$LOG_DIR"
    # Built in the module's own directory with its go.mod and go.sum: its dependencies at the
    # versions it was released with, checked against its sums. Not -mod=vendor: a module's zip
    # on the proxy leaves out vendor/ (all but modules.txt).
    go mod download "$MODULE@$LOCAL_PATH_VERSION" >> "$LOG_DIR/local-path-build.log" 2>&1 ||
      die "go mod download $MODULE@$LOCAL_PATH_VERSION failed" local-path-build
    src=$(go env GOMODCACHE)/$MODULE@$LOCAL_PATH_VERSION
    tmp=$(mktemp "$dir/.build.XXXXXX")
    if ! (cd "$src" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp" .) >> "$LOG_DIR/local-path-build.log" 2>&1; then
      rm -f "$tmp"; die "go build of $MODULE@$LOCAL_PATH_VERSION failed" local-path-build
    fi
    mv "$tmp" "$LPP_BIN"
    find "$BENCHRUN_CACHE/local-path-provisioner" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
    log "built $LPP_BIN"
  fi
  exec {fd}>&-
}

# The helper pods' image: busybox as /bin/sh (the provisioner runs `/bin/sh /script/setup`) and
# as /bin/busybox (the scripts call it by name), tagged by content, on both nodes; prints the ref.
helper_image() {
  local bb=/bin/busybox ref tar n
  [ -x "$bb" ] || apt_install busybox-static >> "$LOG_DIR/apt.log" 2>&1 || die "apt-get install busybox-static failed" apt
  # Tagged by the binary and the layout, so a change of either is a new image.
  ref=localhost/benchrun-local-path-helper:$( { cat "$bb"; echo "/busybox /bin/sh /bin/busybox"; } | sha256sum | cut -c1-12)
  tar=$IMAGE_CACHE/benchrun-local-path-helper_${ref##*:}.tar
  [ -f "$tar" ] || make_image "$tar" "$ref" "$bb" /busybox "$bb:/bin/sh" "$bb:/bin/busybox"
  for n in $NODES; do import_image "$n" "$tar" "$ref"; done
  echo "$ref"
}

up() {
  build
  [ -s "$ADMIN_KUBECONFIG" ] || die "no cluster: run tests/cluster/up.sh first"
  kubectl_ get --raw /readyz >/dev/null 2>&1 || die "the API server does not answer: run tests/cluster/up.sh first"
  mkdir -p "$LOG_DIR" "$LPP_ROOT"
  local image rendered hash p
  image=$(helper_image)
  rendered=$CLUSTER_DIR/local-path.yaml
  sed -e "s|@ROOT@|$LPP_ROOT|" -e "s|@HELPER_IMAGE@|$image|" "$MANIFEST" > "$rendered.tmp"
  mv "$rendered.tmp" "$rendered"
  kubectl_ apply -f "$rendered" >> "$LOG_DIR/$NAME.log" 2>&1 || die "applying $MANIFEST failed" "$NAME"
  # It reads the ConfigMap once, at start: a changed manifest (or binary) needs a new process.
  hash=$( { cat "$rendered"; echo "$LPP_BIN"; } | sha256sum | cut -c1-16)
  if p=$(pid_of "$NAME"); then
    if [ "$(readlink "/proc/$p/exe")" = "$LPP_BIN" ] && [ "$(cat "$CLUSTER_DIR/$NAME.hash" 2>/dev/null)" = "$hash" ]; then
      log "$NAME already running (pid $p)"
    else
      log "$NAME running an older build or configuration (pid $p): replacing it"
      stop_daemon "$NAME"
    fi
  fi
  if ! alive "$NAME"; then
    local from=1
    [ -f "$LOG_DIR/$NAME.log" ] && from=$(( $(wc -l < "$LOG_DIR/$NAME.log") + 1 ))
    start_daemon "$NAME" "$LPP_BIN" start --kubeconfig="$ADMIN_KUBECONFIG" \
      --namespace=local-path-storage --configmap-name=local-path-config --provisioner-name=rancher.io/local-path
    echo "$hash" > "$CLUSTER_DIR/$NAME.hash"
    # Started = its informers have synced and its workers run (the library logs it then).
    wait_for "$NAME started" 60 "$NAME" \
      awk -v from="$from" 'NR >= from && /Started provisioner controller/ { ok = 1 } END { exit !ok }' "$LOG_DIR/$NAME.log"
  fi
  local default
  default=$(kubectl_ get storageclass local-path -o jsonpath='{.metadata.annotations.storageclass\.kubernetes\.io/is-default-class}')
  [ "$default" != true ] || die "StorageClass local-path must not be a default class"
  log "$NAME running (pid $(pid_of "$NAME"), volumes under $LPP_ROOT, helper image $image, log $LOG_DIR/$NAME.log); StorageClass local-path"
}

status() {
  alive "$NAME" || die "$NAME is not running" "$NAME"
  log "$NAME running (pid $(pid_of "$NAME"))"
}

case ${1:-} in
  build) build >&2; echo "$LPP_BIN" ;;
  up) cluster_lock; up ;;
  down) cluster_lock; stop_daemon "$NAME" ;;
  status) status ;;
  *) echo "usage: $0 build|up|down|status" >&2; exit 2 ;;
esac
