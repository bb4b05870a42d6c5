#!/usr/bin/env bash
# The operator at fleet scale on simulated nodes (issue 11's figures; a measurement, not a test).
#
#   bench/scale.sh [N...]      default: 10 100 250
#   BENCH_DURATION=60 OPERATOR_BIN=/tmp/operator-before bench/scale.sh 2 250
#
# Needs the test cluster, the images and kwok of this checkout:
#   tests/cluster/up.sh && tests/cluster/image.sh && tests/cluster/kwok.sh up
# For each N: N fake nodes (kwok; pod CIDRs in 127.100.0.0/16 and up), the release operator
# binary of the images run on the host, one BenchmarkRun with one worker per fake node, and one
# real `benchrun-worker agent` per pod IP on the host running a 5-second light workload on a
# temporary directory. Prints, per N: kubectl apply -> all Ready (phase Running), -> every
# worker Running, end of the workload -> Succeeded, the start skew, the operator's peak RSS and
# CPU seconds, and the largest object in the run's namespace (the run included).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/lib/cluster.sh"
apt_install python3 openssl
[ -s "$KUBECONFIG_OUT" ] || die "no cluster: run tests/cluster/up.sh"
[ -x "$STATE_DIR/images/benchrun-operator" ] || die "no operator binary: run tests/cluster/image.sh"
alive kwok || die "kwok is not running: run tests/cluster/kwok.sh up"
export KUBECTL=$K8S_BIN/kubectl KUBECONFIG=$KUBECONFIG_OUT
# OPERATOR_BIN may name another build (a before/after comparison); default: the images' one.
export OPERATOR_BIN=${OPERATOR_BIN:-$STATE_DIR/images/benchrun-operator} WORKER_BIN=$STATE_DIR/images/benchrun-worker
exec python3 "$HERE/scale.py" "${@:-10 100 250}"
