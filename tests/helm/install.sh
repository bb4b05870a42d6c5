#!/usr/bin/env bash
# Build helm from the Go module proxy into $BENCHRUN_CACHE/helm/<version>/bin and print the path
# of the binary. A no-op (prints the path only) when that version is already built.
#   HELM_VERSION  helm.sh/helm/v3 module version (default below)
set -euo pipefail
# shellcheck source=tests/lib/cache.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cache.sh"
HELM_VERSION=${HELM_VERSION:-v3.22.0}
HELM_BIN=$BENCHRUN_CACHE/helm/$HELM_VERSION/bin
[ -x "$HELM_BIN/helm" ] || cache_lock helm-build
if [ ! -x "$HELM_BIN/helm" ]; then
  command -v go >/dev/null || { echo "install.sh: go not found (needed to build helm)" >&2; exit 1; }
  echo ">>> building helm $HELM_VERSION from the Go module proxy (GOPATH=$GOPATH)" >&2
  mkdir -p "$HELM_BIN"
  # Build into a temporary directory and move into place, so an interrupted build never leaves a
  # half-written binary that the check above would take for a finished one.
  tmp=$(mktemp -d "$BENCHRUN_CACHE/helm/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # The ldflags helm's own Makefile sets: without them `helm version` says "v3.22" and
  # .Capabilities.KubeVersion (helm template/lint) is v1.20.0, which fails charts that need a
  # newer Kubernetes. The Kubernetes version is that of the client-go helm is built with
  # (client-go v0.N.x is Kubernetes 1.N), read from helm's go.mod.
  go mod download "helm.sh/helm/v3@$HELM_VERSION" >&2
  gomod=$(go env GOMODCACHE)/cache/download/helm.sh/helm/v3/@v/$HELM_VERSION.mod
  client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")
  [[ $client_go =~ ^v0\.([0-9]+)\. ]] || { echo "install.sh: no k8s.io/client-go version in $gomod" >&2; exit 1; }
  k8s_minor=${BASH_REMATCH[1]}
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN=$tmp CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  mv "$tmp/helm" "$HELM_BIN/helm"
fi
echo "$HELM_BIN/helm"
