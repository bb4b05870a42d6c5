#!/usr/bin/env bash
# Fail when the chart's copy of the CRDs (charts/benchrun/crds) differs from crds/ (the CRDs
# `benchrun-operator crd` generates). Fix: cp crds/*.yaml charts/benchrun/crds/
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! diff -ru "$root/crds" "$root/charts/benchrun/crds"; then
  echo "FAIL: charts/benchrun/crds differs from crds/; run: cp crds/*.yaml charts/benchrun/crds/" >&2
  exit 1
fi
echo "ok: charts/benchrun/crds matches crds/"
