#!/usr/bin/env bash
# Self-signed PKI and kubeconfigs of the test cluster, under $CLUSTER_DIR/pki (per checkout).
# Keeps what exists: delete tests/.state/cluster (down.sh --wipe) to start over.
set -euo pipefail
. "$(dirname "$0")/../lib/cluster.sh"
mkdir -p "$PKI"; cd "$PKI"

# sign NAME CN O [SANs]: a key and a CA-signed certificate (server+client when SANs are given).
sign() {
  local name=$1 cn=$2 o=$3 san=${4:-}
  [ -f "$name.crt" ] && return 0
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  local subj="/CN=$cn"; [ -n "$o" ] && subj="/O=$o/CN=$cn"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$san" ]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"
    else echo "extendedKeyUsage=clientAuth"; fi
  } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

if [ ! -f ca.crt ]; then
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -nodes -key ca.key -sha256 -days 3650 -subj "/CN=benchrun-test-ca" -out ca.crt
fi
# The vm2 kubelet reaches the apiserver through the forwarder on $VM2_HOST_IP; it is a SAN so
# no tls-server-name override is needed.
sign apiserver kube-apiserver "" \
  "IP:127.0.0.1,IP:$VM2_HOST_IP,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
sign admin admin system:masters
sign controller-manager system:kube-controller-manager ""
sign scheduler system:kube-scheduler ""
sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
# system:kube-proxy is bound to the built-in ClusterRole system:node-proxier.
sign kube-proxy system:kube-proxy ""
for n in $NODES; do sign "kubelet-$n" "system:node:$n" system:nodes; done
if [ ! -f sa.key ]; then
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi

# kcfg OUT USER NAME SERVER: self-contained kubeconfig (certificates inlined), so it can be
# copied or read by any client without the PKI directory.
kcfg() {
  local out=$1 user=$2 name=$3 server=$4
  b64() { base64 -w0 < "$1"; }
  cat > "$out.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: benchrun-test
  cluster:
    certificate-authority-data: $(b64 "$PKI/ca.crt")
    server: $server
users:
- name: $user
  user:
    client-certificate-data: $(b64 "$PKI/$name.crt")
    client-key-data: $(b64 "$PKI/$name.key")
contexts:
- name: $user@benchrun-test
  context: {cluster: benchrun-test, user: $user}
current-context: $user@benchrun-test
EOF
  chmod 600 "$out.tmp"; mv "$out.tmp" "$out"
}
kcfg "$ADMIN_KUBECONFIG" admin admin https://127.0.0.1:6443
kcfg "$CLUSTER_DIR/controller-manager.kubeconfig" system:kube-controller-manager controller-manager https://127.0.0.1:6443
kcfg "$CLUSTER_DIR/scheduler.kubeconfig" system:kube-scheduler scheduler https://127.0.0.1:6443
kcfg "$CLUSTER_DIR/kubelet-vm.kubeconfig" system:node:vm kubelet-vm https://127.0.0.1:6443
kcfg "$CLUSTER_DIR/kubelet-vm2.kubeconfig" system:node:vm2 kubelet-vm2 "https://$VM2_HOST_IP:6443"
kcfg "$CLUSTER_DIR/kube-proxy-vm.kubeconfig" system:kube-proxy kube-proxy https://127.0.0.1:6443
kcfg "$CLUSTER_DIR/kube-proxy-vm2.kubeconfig" system:kube-proxy kube-proxy "https://$VM2_HOST_IP:6443"
