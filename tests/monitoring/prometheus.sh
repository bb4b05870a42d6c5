#!/usr/bin/env bash
# A real Prometheus (Debian's package) on 127.0.0.1:9095 that scrapes, every second, the
# benchrun worker pods (with the chart's PodMonitor's target labels run, worker, namespace,
# node) and the operator pods, found through the test cluster's API server (discover.py).
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
    stop_daemon prom-discovery
    exit 0 ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

command -v prometheus >/dev/null || apt_install prometheus >> "$LOG_DIR/apt.log" 2>&1 ||
  die "apt-get install prometheus failed" apt
mkdir -p "$dir"
# Debian's Prometheus is built without kubernetes_sd_configs: discover.py lists the pods
# through the API server every second and writes file_sd targets (with the PodMonitor's labels).
for f in workers operator; do [ -f "$dir/$f.json" ] || echo '[]' > "$dir/$f.json"; done
cat > "$dir/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: benchrun-workers
    file_sd_configs: [{files: ["$dir/workers.json"], refresh_interval: 1s}]
  - job_name: benchrun-operator
    honor_labels: true
    file_sd_configs: [{files: ["$dir/operator.json"], refresh_interval: 1s}]
YML
promtool check config "$dir/prometheus.yml" >/dev/null || die "invalid $dir/prometheus.yml"
if ! alive prom-discovery; then
  start_daemon prom-discovery python3 "$here/discover.py" https://127.0.0.1:6443 \
    "$PKI/ca.crt" "$PKI/admin.crt" "$PKI/admin.key" "$dir"
fi
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
