#!/usr/bin/env bash
# Build tests/helm/dashcheck (Grafana's foundation SDK and Prometheus's PromQL parser, from the
# Go module proxy at the versions go.mod pins) and print the binary's path. Go's build cache
# makes a rebuild of an unchanged tree a second or two.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cache.sh
source "$here/../../lib/cache.sh"
command -v go >/dev/null || { echo "dashcheck/build.sh: go not found (needed to build dashcheck)" >&2; exit 1; }
out=$BENCHRUN_CACHE/dashcheck/bin
mkdir -p "$out"
cache_lock dashcheck-build
(cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$out/dashcheck" .) >&2
echo "$out/dashcheck"
