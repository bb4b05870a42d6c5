#!/usr/bin/env bash
# A real Prometheus (Debian's package) on 127.0.0.1:9095 that discovers pods through the test
# cluster's API server and scrapes, every second, the benchrun worker pods (as the chart's
# PodMonitor does: target labels run, worker, namespace, node) and the operator pods.
#   tests/monitoring/prometheus.sh start | stop
# Needs tests/cluster/up.sh. State and TSDB under tests/.state/prometheus.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cluster.sh
source "$here/../lib/cluster.sh"
dir=$STATE_DIR/prometheus
addr=127.0.0.1:9095

case ${1:-} in
  start) ;;
  stop)
    stop_daemon prometheus
    exit 0 ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

command -v prometheus >/dev/null || apt_install prometheus >> "$LOG_DIR/apt.log" 2>&1 ||
  die "apt-get install prometheus failed" apt
mkdir -p "$dir"
sd() { # kubernetes_sd_configs through the admin credentials of the test cluster
  cat <<SD
    kubernetes_sd_configs:
      - role: pod
        api_server: https://127.0.0.1:6443
        tls_config: {ca_file: $PKI/ca.crt, cert_file: $PKI/admin.crt, key_file: $PKI/admin.key}
SD
}
cat > "$dir/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: benchrun-workers
$(sd)
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_benchrun_dev_worker], regex: .+, action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: http, action: keep}
      - {source_labels: [__meta_kubernetes_pod_label_benchrun_dev_run], target_label: run}
      - {source_labels: [__meta_kubernetes_pod_label_benchrun_dev_worker], target_label: worker}
      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
      - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node}
  - job_name: benchrun-operator
    honor_labels: true
$(sd)
    relabel_configs:
      - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_name], regex: benchrun, action: keep}
      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics, action: keep}
      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
YML
promtool check config "$dir/prometheus.yml" >/dev/null || die "invalid $dir/prometheus.yml"
if ! alive prometheus; then
  start_daemon prometheus prometheus --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" --web.listen-address="$addr" --log.level=warn
fi
for _ in $(seq 1 120); do
  curl -sf "http://$addr/-/ready" >/dev/null && { log "prometheus ready on http://$addr"; exit 0; }
  alive prometheus || die "prometheus exited" prometheus
  sleep 0.5
done
die "prometheus not ready after 60 s" prometheus
