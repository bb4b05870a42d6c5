#!/usr/bin/env bash
# kwok beside the test cluster: simulated nodes for the operator's fleet test
# (operator/tests/cluster_fleet.rs) and bench/scale.sh.
#   kwok.sh install   build kwok from the Go module proxy into $BENCHRUN_CACHE once (~3 min)
#   kwok.sh up        install, then run kwok against the cluster of this checkout (idempotent)
#   kwok.sh down      delete the simulated nodes (label type=kwok) and stop kwok
# kwok runs out of cluster and simulates only nodes labelled type=kwok (tests/cluster/conf/
# kwok.yaml): the real kubelet nodes are untouched. The nodes themselves are created by the test
# that uses them, with a pod CIDR inside 127.0.0.0/8, so that the pods kwok marks Running get
# loopback IPs where the test starts real worker agents. down.sh stops kwok too.
set -euo pipefail
. "$(dirname "$0")/../lib/cluster.sh"
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
KWOK_BIN=$BENCHRUN_CACHE/kwok/$KWOK_VERSION/kwok

install() {
  [ -x "$KWOK_BIN" ] && return 0
  cache_lock kwok-build
  [ -x "$KWOK_BIN" ] && return 0
  log "building kwok $KWOK_VERSION from the Go module proxy (first time only, ~3 min on 2 cores)"
  mkdir -p "$(dirname "$KWOK_BIN")"
  (cd /tmp && CGO_ENABLED=0 GOBIN=$(dirname "$KWOK_BIN") go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  [ -x "$KWOK_BIN" ] || die "go install did not produce $KWOK_BIN"
}

up() {
  install
  [ -s "$ADMIN_KUBECONFIG" ] || die "no cluster: run tests/cluster/up.sh first"
  kubectl_ get --raw /readyz >/dev/null 2>&1 || die "the API server does not answer: run tests/cluster/up.sh first"
  if alive kwok; then log "kwok already running"; return 0; fi
  start_daemon kwok "$KWOK_BIN" --kubeconfig="$ADMIN_KUBECONFIG" --config="$REPO_ROOT/tests/cluster/conf/kwok.yaml"
  # kwok has no readiness endpoint here; it is up when it is still running after it has read
  # its configuration and started its informers (it exits at once on a bad configuration).
  sleep 2
  alive kwok || die "kwok exited" kwok
  log "kwok running (log: $LOG_DIR/kwok.log)"
}

down() {
  if [ -s "$ADMIN_KUBECONFIG" ] && kubectl_ get --raw /readyz >/dev/null 2>&1; then
    kubectl_ delete nodes -l type=kwok --wait=false >/dev/null 2>&1 || true
  fi
  stop_daemon kwok
}

case ${1:-} in
  install) install ;;
  up) up ;;
  down) down ;;
  *) echo "usage: $0 install|up|down" >&2; exit 2 ;;
esac
