#!/usr/bin/env bash
# The test cluster's add-ons, on a running cluster (up.sh calls this last):
#   - CoreDNS (built by build.sh) as an image on both nodes, its Deployment and the kube-dns
#     Service on $CLUSTER_DNS_IP, which the kubelets' clusterDNS names (addons/coredns.yaml)
#   - the storage Services minio, azurite, fake-gcs in namespace `storage`, selector-less, with
#     EndpointSlices on the host address up.sh's forwarders listen on (addons/storage.yaml)
#   - a busybox image on both nodes, for tests that need a shell, nslookup, wget or nc in a pod
# and writes their image references to tests/.state/addons.env (COREDNS_IMAGE, BUSYBOX_IMAGE).
# Idempotent (kubectl apply; images imported only when missing); waits until CoreDNS is Ready.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cluster.sh"
cluster_lock
for n in $NODES; do
  alive "containerd-$n" || die "containerd of node $n is not running; run tests/cluster/up.sh first"
done
[ -x "$COREDNS_BIN" ] || die "$COREDNS_BIN missing; run tests/cluster/build.sh"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || apt_install busybox-static >> "$LOG_DIR/apt.log" 2>&1 || die "apt-get install busybox-static failed" apt

# image NAME BINARY DEST: a one-layer image of BINARY (make_image), tagged by its content, on
# both nodes; prints the reference.
image() {
  local name=$1 bin=$2 dest=$3 ref tar
  ref=localhost/benchrun-$name:$(sha256sum "$bin" | cut -c1-12)
  tar=$IMAGE_CACHE/benchrun-${name}_${ref##*:}.tar
  [ -f "$tar" ] || make_image "$tar" "$ref" "$bin" "$dest"
  for n in $NODES; do import_image "$n" "$tar" "$ref"; done
  echo "$ref"
}
COREDNS_IMAGE=$(image coredns "$COREDNS_BIN" /coredns)
# busybox finds its applets through PATH=/ (make_image's Env): run `busybox sh -c '... busybox nc'`.
BUSYBOX_IMAGE=$(image busybox "$BUSYBOX" /busybox)

sed -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" -e "s|@CLUSTER_DNS_IP@|$CLUSTER_DNS_IP|" "$HERE/addons/coredns.yaml" |
  kubectl_ apply -f - > "$LOG_DIR/addons.log" 2>&1 || die "applying addons/coredns.yaml failed" addons
sed -e "s|@HOST_IP@|$VM2_HOST_IP|" "$HERE/addons/storage.yaml" |
  kubectl_ apply -f - >> "$LOG_DIR/addons.log" 2>&1 || die "applying addons/storage.yaml failed" addons

if ! kubectl_ -n kube-system rollout status deployment/coredns --timeout=120s >> "$LOG_DIR/addons.log" 2>&1; then
  kubectl_ -n kube-system get pods -l k8s-app=kube-dns -o wide >&2 || true
  kubectl_ -n kube-system logs -l k8s-app=kube-dns --tail=30 >&2 || true
  die "CoreDNS not Ready after 120s" addons
fi
# The Deployment's status can still be the one from before a restart; ask the Service itself
# (from the host: kube-proxy's rules cover the host's own traffic too).
end=$(( $(date +%s) + 60 ))
until timeout 10 "$BUSYBOX" nslookup kubernetes.default.svc.cluster.local "$CLUSTER_DNS_IP" > "$LOG_DIR/addons-dns.log" 2>&1; do
  [ "$(date +%s)" -lt "$end" ] || die "CoreDNS at $CLUSTER_DNS_IP does not resolve kubernetes.default.svc.cluster.local after 60s" addons-dns
  sleep 0.5
done
log "CoreDNS Ready ($COREDNS_IMAGE), Service kube-dns $CLUSTER_DNS_IP; storage Services -> $VM2_HOST_IP"

{
  echo "COREDNS_IMAGE=$COREDNS_IMAGE"
  echo "BUSYBOX_IMAGE=$BUSYBOX_IMAGE"
} > "$STATE_DIR/addons.env.tmp"
mv "$STATE_DIR/addons.env.tmp" "$STATE_DIR/addons.env"
