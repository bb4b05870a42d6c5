#!/usr/bin/env bash
# Control-plane latency of the test cluster's two real provisioners (issue 32's figures; a
# measurement, not a test): provision-to-first-I/O p50/p99 at concurrency 1, 5 and 20 on
# benchrun-hostpath and local-path, and what the measurement costs the API server.
#
#   bench/controlplane.sh [CONCURRENCY...]     default: 1 5 20
#   COUNT=40 CLASSES=local-path bench/controlplane.sh 5
#   CLASSES=benchrun-csi OPERATIONS="provision attach firstIO snapshot clone expand delete" \
#     bench/controlplane.sh 1 5                  the CSI driver's snapshot, clone and expand too
#   IN_USE=busy CLASSES=benchrun-csi OPERATIONS="provision attach snapshot clone delete" \
#     bench/controlplane.sh 2                    ... while the pods keep I/O running on the
#                                                volumes (IN_USE=mounted: only mounted)
#
# Needs the test cluster and its images: tests/cluster/up.sh && tests/cluster/image.sh
# (up.sh starts both provisioners). For each class and concurrency: a control-plane run of
# COUNT (default 20) claims of 16Mi through provision, attach, firstIO and delete, run by the
# operator binary on the host (OPERATOR_BIN, default the images' release build) watching one
# namespace. See bench/controlplane.py for the columns. Run it on an otherwise idle machine:
# the figures are the control plane's (API server, scheduler, kubelets, provisioners), and all
# of them share these cores; `uptime` is printed first and last.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cluster.sh
. "$HERE/../tests/lib/cluster.sh"
apt_install python3
[ -s "$KUBECONFIG_OUT" ] || die "no cluster: run tests/cluster/up.sh"
[ -s "$IMAGES_ENV" ] || die "no images: run tests/cluster/image.sh"
# shellcheck disable=SC1090  # written by image.sh
. "$IMAGES_ENV"
export KUBECTL=$K8S_BIN/kubectl KUBECONFIG=$KUBECONFIG_OUT WORKER_IMAGE
export OPERATOR_BIN=${OPERATOR_BIN:-$STATE_DIR/images/benchrun-operator}
[ -x "$OPERATOR_BIN" ] || die "no operator binary $OPERATOR_BIN: run tests/cluster/image.sh"
# shellcheck disable=SC2086  # CLASSES: one class per word
"$KUBECTL" get storageclass ${CLASSES:-benchrun-hostpath local-path} >/dev/null || die "a StorageClass is missing: run tests/cluster/up.sh"
echo "load before: $(uptime)"
[ $# -gt 0 ] || set -- 1 5 20
python3 "$HERE/controlplane.py" "$@"
echo "load after: $(uptime)"
