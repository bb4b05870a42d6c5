#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl and
# etcd from the Go module proxy (no git checkout) into $K8S_BIN, and CoreDNS into $COREDNS_BIN,
# once. A warm cache returns at once; a cache missing one binary builds only that one.
# Adapted from shared/recipes/cluster/build.sh and build-etcd.sh.
set -euo pipefail
. "$(dirname "$0")/../lib/cache.sh"
CMDS="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
export CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$K8S_BIN"
cache_lock k8s-build

have_all() { for c in $CMDS etcd; do [ -x "$K8S_BIN/$c" ] || return 1; done; [ -x "$COREDNS_BIN" ]; }
if have_all; then exit 0; fi

build_k8s() {
  local build=$BENCHRUN_CACHE/k8s/$K8S_VERSION/build staging_version=v0.${K8S_VERSION#v1.}
  mkdir -p "$build"; cd "$build"
  local gomod; gomod=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || { echo "cannot fetch go.mod of k8s.io/kubernetes@$K8S_VERSION" >&2; exit 1; }
  local gover; gover=$(awk '$1=="go"{print $2; exit}' "$gomod")
  # Staging modules: replaced with ./staging/... and required at v0.0.0.
  local staging; staging=$(awk '/^replace \(/{f=1;next} f&&/^\)/{f=0} f&&$3 ~ /^\.\/staging\//{print $1}' "$gomod" |
    while read -r m; do grep -qE "^\s+$m v0\.0\.0\s*$" "$gomod" && echo "$m"; done)
  {
    printf 'module k8sbuild\n\ngo %s\n\n' "$gover"
    grep '^godebug' "$gomod" || true
    printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    for m in $staging; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    echo ")"
  } > go.mod
  rm -f go.sum; echo 'package main' > dummy.go
  local pkgs=""; for c in $CMDS; do pkgs="$pkgs k8s.io/kubernetes/cmd/$c@$K8S_VERSION"; done
  go get $pkgs
  local commit minor date ldflags="-s -w"
  commit=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -1)
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  date=$(go list -m -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Time": "\(.*\)".*/\1/p')
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldflags="$ldflags -X $p.gitTreeState=clean -X $p.buildDate=$date"
    [ -n "$commit" ] && ldflags="$ldflags -X $p.gitCommit=$commit"
  done
  for c in $CMDS; do
    [ -x "$K8S_BIN/$c" ] && continue
    echo ">>> building $c (first time only; kube-apiserver takes ~8 min on 2 cores)"
    go build -trimpath -ldflags "$ldflags" -o "$K8S_BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$K8S_BIN/$c.tmp" "$K8S_BIN/$c"
  done
}

build_etcd() {
  [ -x "$K8S_BIN/etcd" ] && return 0
  local build=$BENCHRUN_CACHE/k8s/etcd-$ETCD_VERSION
  mkdir -p "$build"; cd "$build"
  # `go install ...@v3.x` is refused (replace directives), so use a throwaway module.
  local gomod gover
  gomod=$(cd /tmp && go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  gover=$(awk '$1=="go"{print $2; exit}' "$gomod")
  printf 'module etcdbuild\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$gover" "$ETCD_VERSION" > go.mod
  rm -f go.sum; echo 'package main' > dummy.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  echo ">>> building etcd"
  go build -trimpath -ldflags "-s -w" -o "$K8S_BIN/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$K8S_BIN/etcd.tmp" "$K8S_BIN/etcd"
}

# CoreDNS with only the plugins the test cluster's Corefile uses (see coredns.sh): the stock main
# (core/plugin) links every plugin, with the AWS, Azure and Google Cloud SDKs, which would
# multiply the download and build time for nothing. `coremain` and the plugin packages are the
# released module, unchanged; only the list of linked plugins differs.
build_coredns() {
  [ -x "$COREDNS_BIN" ] && return 0
  local build=$BENCHRUN_CACHE/coredns/$COREDNS_VERSION/build
  mkdir -p "$build"; cd "$build"
  local gomod gover
  gomod=$(cd /tmp && go mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || { echo "cannot fetch go.mod of github.com/coredns/coredns@$COREDNS_VERSION" >&2; exit 1; }
  gover=$(awk '$1=="go"{print $2; exit}' "$gomod")
  printf 'module corednsbuild\n\ngo %s\n\nrequire github.com/coredns/coredns %s\n' "$gover" "$COREDNS_VERSION" > go.mod
  cat > main.go <<'GO'
// CoreDNS for the benchrun test cluster: the released coremain with a subset of its plugins.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
GO
  # tidy, not `go get` of the module: that would resolve the stock main and fetch every plugin's SDK.
  rm -f go.sum
  go mod tidy
  echo ">>> building coredns $COREDNS_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$COREDNS_BIN.tmp" .
  mv "$COREDNS_BIN.tmp" "$COREDNS_BIN"
}

build_etcd
build_k8s
build_coredns
ls -la "$K8S_BIN" "$COREDNS_BIN"
