#!/usr/bin/env bash
# Offline tests of the Helm chart charts/benchrun (no cluster):
#   - helm lint --strict and helm template with each ci/*-values.yaml overlay
#   - values.schema.json rejects unknown keys and bad types (helm template fails, with the message)
#   - check.py: restricted Pod Security Standard, RBAC exactly as operator/src/reconcile/mod.rs lists
#     it (never get/list/watch on Secrets), monitors only when enabled, Role when watchNamespace
#     is set, dashboard PromQL only on metric names registered in the Rust code
#   - the chart's CRDs equal crds/
#   - dashcheck: the dashboard decoded strictly by Grafana's schema types, every PromQL expression
#     of the dashboard and the alerts parsed by Prometheus's parser and checked against the
#     metric families and labels the code registers (tests/helm/dashcheck/metrics.json)
#   - promtool check/test rules on the rendered PrometheusRule
# helm is built from the Go module proxy by tests/helm/install.sh (cached).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cache.sh
source "$here/../lib/cache.sh"
chart=$REPO_ROOT/charts/benchrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

helm=$("$here/install.sh")
echo ">>> $("$helm" version --short)"

# Python with PyYAML for check.py: the default python3, else Debian's with python3-yaml.
py=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import yaml' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
  apt_install python3-yaml
  py=/usr/bin/python3
fi

if "$here/crds_in_sync.sh"; then ok "crds in sync"; else fail "crds out of sync"; fi

# Lint and render each overlay.
for values in "$chart"/ci/*-values.yaml; do
  name=$(basename "$values" -values.yaml)
  if "$helm" lint --strict "$chart" -f "$values" > "$work/lint-$name.log" 2>&1; then
    ok "helm lint --strict -f ci/$name-values.yaml"
  else
    cat "$work/lint-$name.log" >&2
    fail "helm lint --strict -f ci/$name-values.yaml"
  fi
  if "$helm" template benchrun "$chart" -n benchrun-system -f "$values" > "$work/$name.yaml" 2> "$work/template-$name.log"; then
    ok "helm template -f ci/$name-values.yaml"
  else
    cat "$work/template-$name.log" >&2
    fail "helm template -f ci/$name-values.yaml"
  fi
done
for name in default namespaced monitoring; do
  [ -s "$work/$name.yaml" ] || { fail "no ci/$name-values.yaml rendering: check.py needs it"; }
done

# The schema rejects bad values: helm template must fail, naming the problem.
# expect_reject DESCRIPTION MESSAGE HELM-ARGS...
expect_reject() {
  local what=$1 want=$2
  shift 2
  if "$helm" template benchrun "$chart" "$@" > "$work/reject.out" 2>&1; then
    fail "schema accepted $what ($*)"
  elif grep -qF -- "$want" "$work/reject.out"; then
    ok "schema rejects $what"
  else
    cat "$work/reject.out" >&2
    fail "schema rejected $what, but without the message: $want"
  fi
}
expect_reject "an unknown top-level key" "additional properties 'replicaCount' not allowed" --set replicaCount=2
expect_reject "an unknown nested key" "additional properties 'tga' not allowed" --set operator.image.tga=v1
expect_reject "a string for operator.replicas" "at '/operator/replicas': got string, want integer" --set operator.replicas=two
expect_reject "negative replicas" "at '/operator/replicas': minimum" --set operator.replicas=-1
expect_reject "an unknown pullPolicy" "value must be one of 'Always', 'IfNotPresent', 'Never'" --set operator.image.pullPolicy=Sometimes
expect_reject "a number for serviceMonitor.enabled" "at '/serviceMonitor/enabled': got number, want boolean" --set serviceMonitor.enabled=1

# The rendered objects against the code.
if "$py" "$here/check.py" "$REPO_ROOT" "$work"; then ok "check.py"; else fail "check.py (see FAIL lines above)"; fi

# The dashboard and the alerts by the real tools' own code: Grafana's schema types (strict) and
# Prometheus's PromQL parser, against the families the code registers (tests/helm/dashcheck).
dashcheck=$("$here/dashcheck/build.sh")
dash=$chart/dashboards/benchrun.json
metrics=$here/dashcheck/metrics.json
if [ ! -s "$work/alerts.json" ]; then
  fail "check.py wrote no alerts.json from the monitoring overlay"
elif "$dashcheck" -metrics "$metrics" -dashboard "$dash" -alerts "$work/alerts.json"; then
  ok "dashcheck: dashboard and alerts"
else
  fail "dashcheck: dashboard and alerts"
fi
# ... and it is not a check that cannot fail: each broken copy must be refused, naming the problem.
# expect_dashcheck_fails DESCRIPTION MESSAGE PYTHON-EDIT (p is the dashboard's first panel with
# queries, t its first query)
expect_dashcheck_fails() {
  "$py" -c "import json,sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d['panels'] if p.get('targets'))
t = p['targets'][0]
$3
json.dump(d, open(sys.argv[2], 'w'))" \
    "$dash" "$work/broken.json"
  if "$dashcheck" -metrics "$metrics" -dashboard "$work/broken.json" > "$work/dashcheck.out" 2>&1; then
    fail "dashcheck accepted $1"
  elif grep -qF -- "$2" "$work/dashcheck.out"; then
    ok "dashcheck refuses $1"
  else
    cat "$work/dashcheck.out" >&2
    fail "dashcheck refused $1, but without the message: $2"
  fi
}
expect_dashcheck_fails "an unknown panel field" "unexpected field 'colour'" "p['colour'] = 'red'"
expect_dashcheck_fails "a mistyped legend option" "legend.showLegend" "p['options']['legend']['showLegend'] = 'yes'"
expect_dashcheck_fails "a metric the code does not export" '"benchrun_opps_total", which neither' \
  "t['expr'] = 'sum(rate(benchrun_opps_total[5m]))'"
expect_dashcheck_fails "a label the metric does not carry" 'matches label "bucket"' \
  "t['expr'] = 'sum(rate(benchrun_ops_total{bucket=\"x\"}[5m]))'"
expect_dashcheck_fails "a grouping on a label no series carries" 'groups or matches on label "opp"' \
  "t['expr'] = 'sum by (opp) (rate(benchrun_ops_total[5m]))'"
expect_dashcheck_fails "PromQL that does not parse" "PromQL does not parse" \
  "t['expr'] = 'sum by (op) (rate(benchrun_ops_total[5m])'"

# promtool on the PrometheusRule: Debian's prometheus package, installed when we may (root).
if ! command -v promtool >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt_install prometheus >/dev/null || echo "note: apt-get install prometheus failed" >&2
fi
if command -v promtool >/dev/null; then
  if [ ! -s "$work/rules.yaml" ]; then
    fail "no rules.yaml from the monitoring overlay"
  elif promtool check rules "$work/rules.yaml"; then
    ok "promtool check rules"
    cp "$here/alerts_test.yaml" "$work/"
    if promtool test rules "$work/alerts_test.yaml"; then ok "promtool test rules"; else fail "promtool test rules"; fi
  else
    fail "promtool check rules"
  fi
else
  # Not a skip: the alert rules are part of what this test is for.
  fail "promtool not available (apt-get install prometheus)"
fi

if command -v shellcheck >/dev/null; then
  if shellcheck -x "$here"/*.sh "$here/../cluster/provisioner.sh"; then
    ok "shellcheck tests/helm/*.sh tests/cluster/provisioner.sh"
  else
    fail "shellcheck tests/helm/*.sh tests/cluster/provisioner.sh"
  fi
  # Every other script the tests and the benchmarks run, at warning level (the info-level
  # notes of older scripts are not gated).
  others=("$REPO_ROOT"/tests/lib/*.sh "$REPO_ROOT"/tests/helm/dashcheck/*.sh "$REPO_ROOT"/tests/cluster/*.sh "$REPO_ROOT"/tests/storage/*.sh
          "$REPO_ROOT"/tests/monitoring/*.sh "$REPO_ROOT"/images/*.sh "$REPO_ROOT"/bench/*.sh "$REPO_ROOT"/.ci/run)
  if shellcheck -x -S warning "${others[@]}"; then
    ok "shellcheck -S warning of tests/, images/, bench/ and .ci/run"
  else
    fail "shellcheck -S warning of tests/, images/, bench/ and .ci/run"
  fi
else
  fail "shellcheck not installed (apt-get install shellcheck; .ci/run installs it)"
fi

echo "chart: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
