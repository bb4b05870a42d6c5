#!/usr/bin/env bash
# The chart on the real test cluster, as a user installs it (issue: install it like users do):
#   1. helm template | kubectl apply --dry-run=server for the default and namespaced overlays
#      (the monitoring overlay needs the prometheus-operator CRDs, which this cluster lacks)
#   2. README.md's cluster quick start, command by command (read from README.md, so the test
#      follows the README as written): its `helm install`, with only what this cluster needs
#      added (the tags of the images tests/cluster/image.sh imported, replicas 2 for step 3)
#   3. leader election: exactly one holder; delete the leader pod, another replica takes over
#   4. the README's `kubectl apply -f examples/benchmarkrun-pvc-file.yaml` (unmodified, in the
#      kubeconfig's namespace as for a user) completes under the installed operator on claims
#      of the default StorageClass (tests/cluster/provisioner.sh); merged results in status;
#      the README's `kubectl get br -w` shows it Running, then Succeeded
#   5. helm upgrade with a changed value keeps the token key Secret's data
#   6. helm uninstall leaves nothing of the release but the CRD
# During 4, a real Prometheus (tests/monitoring/prometheus.sh) scrapes the operator and the
# workers through pod discovery; `promtool check metrics` passes on the real /metrics of a
# worker and of the operator; every PromQL expression of the dashboard returns data for the run.
# Needs tests/cluster/up.sh (with kube-proxy, CoreDNS and the provisioner) and
# tests/cluster/image.sh. Every wait is bounded and on an observable state.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cluster.sh
source "$here/../lib/cluster.sh"
chart=$REPO_ROOT/charts/benchrun
helm=$("$here/install.sh")
release=benchrun
rns=benchrun-system
k() { kubectl_ "$@"; }
h() { "$helm" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
fail() {
  echo "FAIL: $*" >&2
  k -n "$rns" get pods,lease -o wide >&2 || true
  k -n "$rns" logs -l app.kubernetes.io/name=benchrun --tail=40 --all-containers >&2 || true
  k -n "${qs_ns:-default}" get br,pods,pvc -o wide >&2 || true
  tail -n 20 "$LOG_DIR/provisioner.log" >&2 || true
  exit 1
}
[ -s "$IMAGES_ENV" ] || fail "no $IMAGES_ENV: run tests/cluster/image.sh"
# shellcheck disable=SC1090
. "$IMAGES_ENV"
"$REPO_ROOT/tests/cluster/provisioner.sh" status >/dev/null ||
  fail "the cluster's provisioner is not running (tests/cluster/provisioner.sh up)"

# README.md's quick start: the commands of the sh block under "## Install it in a cluster",
# continuation lines joined. The test runs them as written, from the repository's root.
readme_cmd() { # readme_cmd PREFIX: the quick start's first command that starts with PREFIX
  local cmds
  cmds=$(awk '/^## Install it in a cluster/ { s = 1; next } s && /^```sh/ { b = 1; next }
       b && /^```/ { exit } b { sub(/#.*/, ""); line = line $0
         if (line ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, " ", line); next } print line; line = "" }' \
    "$REPO_ROOT/README.md" | sed 's/[[:space:]]\{1,\}/ /g; s/ $//')
  grep -m1 "^$1 " <<< "$cmds" || fail "README.md's cluster quick start has no '$1' command"
}
readme_install=$(readme_cmd "helm install")
readme_apply=$(readme_cmd "kubectl apply")
readme_watch=$(readme_cmd "kubectl get br")
read -ra install_words <<< "${readme_install#helm }"
read -ra apply_words <<< "${readme_apply#kubectl }"
read -ra watch_words <<< "${readme_watch#kubectl }"
[ "${install_words[1]} ${install_words[2]}" = "$release charts/benchrun" ] ||
  fail "README.md installs '${install_words[*]:1:2}', this test checks release $release of charts/benchrun"
[[ " ${install_words[*]} " == *" -n $rns "* ]] || fail "README.md installs into another namespace than $rns"
# What the test cluster adds: the images image.sh imported are the README's repositories, with
# a content-addressed tag instead of the chart's appVersion.
for img in "operator.image.repository=${OPERATOR_IMAGE%:*}" "operator.workerImage.repository=${WORKER_IMAGE%:*}"; do
  [[ " ${install_words[*]} " == *" --set $img "* ]] || fail "README.md's helm install does not set $img (the image image.sh imported)"
done
image_tags=(--set "operator.image.tag=${OPERATOR_IMAGE##*:}" --set "operator.workerImage.tag=${WORKER_IMAGE##*:}")
image_values=(--set "operator.image.repository=${OPERATOR_IMAGE%:*}" --set "operator.workerImage.repository=${WORKER_IMAGE%:*}" "${image_tags[@]}")
# Where `kubectl apply` puts the example for a user: the kubeconfig's namespace.
qs_file=$REPO_ROOT/${apply_words[2]}
if [ "${apply_words[0]} ${apply_words[1]}" != "apply -f" ] || [ ! -f "$qs_file" ]; then
  fail "cannot read the README's '$readme_apply'"
fi
name=$(awk '/^metadata:/ { m = 1; next } m && /^  name:/ { print $2; exit }' "$qs_file")
[ -n "$name" ] || fail "no metadata.name in $qs_file"
qs_ns=$(k config view --minify -o jsonpath='{..namespace}')
qs_ns=${qs_ns:-default}

# A previous, interrupted run of this script. Its runs' finalizers are removed by hand: the
# operator that would remove them may be gone.
if k -n "$qs_ns" get br "$name" >/dev/null 2>&1; then
  k -n "$qs_ns" patch br "$name" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null || true
  k -n "$qs_ns" delete br "$name" --wait=true >/dev/null
fi
h uninstall "$release" -n "$rns" --wait >/dev/null 2>&1 || true

log "1. server-side dry run of the rendered chart"
# The namespaces the release and the namespaced overlay's watchNamespace put objects in.
watch_ns=$(sed -n 's/^watchNamespace: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart/ci/namespaced-values.yaml")
for ns in "$rns" "$watch_ns"; do
  k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
done
for overlay in default namespaced; do
  h template "$release" "$chart" -n "$rns" --include-crds -f "$chart/ci/$overlay-values.yaml" \
    | k apply --dry-run=server -f - >/dev/null || fail "dry run of the $overlay overlay"
  log "ok: $overlay overlay accepted by the API server (dry run)"
done

log "2. README.md's quick start: $readme_install (+ image tags, 2 replicas)"
(cd "$REPO_ROOT" && h "${install_words[@]}" "${image_tags[@]}" \
  --set operator.replicas=2 --wait --timeout 180s) > "$LOG_DIR/helm-install.log" ||
  fail "helm install (output in $LOG_DIR/helm-install.log)"
key_before=$(k -n "$rns" get secret -l app.kubernetes.io/instance="$release" -o jsonpath='{.items[0].data}')
[ -n "$key_before" ] || fail "no token key Secret"

# Least privilege, as the API server sees it: impersonate the operator's ServiceAccount.
sa=$(k -n "$rns" get deploy -l app.kubernetes.io/instance="$release" \
  -o jsonpath='{.items[0].spec.template.spec.serviceAccountName}')
as=(--as="system:serviceaccount:$rns:$sa")
for denied in "get secrets -n default" "list secrets -A" "watch secrets -A" "get secrets -n $rns" \
    "create deployments -n default" "delete nodes" "create clusterrolebindings" \
    "delete persistentvolumes" "create persistentvolumes" "update storageclasses" \
    "patch volumeattachments.storage.k8s.io"; do
  # shellcheck disable=SC2086  # the verb, resource and flags are separate words
  [ "$(k auth can-i $denied "${as[@]}" 2>/dev/null)" = no ] || fail "the operator's ServiceAccount can $denied"
done
# Control-plane runs (docs/CONTROL_PLANE.md, rbac.controlPlane): volumes and classes read only.
for allowed in "create pods -n default" "create secrets -n default" "list nodes" "patch benchmarkruns.benchrun.dev --subresource=status -n default" \
    "watch persistentvolumes" "get storageclasses" "watch volumeattachments.storage.k8s.io"; do
  # shellcheck disable=SC2086
  [ "$(k auth can-i $allowed "${as[@]}" 2>/dev/null)" = yes ] || fail "the operator's ServiceAccount cannot $allowed"
done
log "ok: the operator's ServiceAccount cannot read Secrets or touch unrelated resources"

log "3. leader election"
lease=$(k -n "$rns" get deploy -l app.kubernetes.io/instance="$release" \
  -o jsonpath='{.items[0].spec.template.spec.containers[0].env[?(@.name=="BENCHRUN_LEASE_NAME")].value}')
[ -n "$lease" ] || fail "the Deployment sets no BENCHRUN_LEASE_NAME"
holder() { k -n "$rns" get lease "$lease" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
wait_holder() { # wait_holder NOT_THIS: print a holder that is a running pod other than NOT_THIS
  local deadline=$((SECONDS + $2)) h
  while [ $SECONDS -lt $deadline ]; do
    h=$(holder)
    if [ -n "$h" ] && [ "$h" != "$1" ] && k -n "$rns" get pod "$h" >/dev/null 2>&1; then
      echo "$h"; return 0
    fi
    sleep 0.5
  done
  return 1
}
leader=$(wait_holder "" 60) || fail "no replica took the lease $lease within 60 s"
log "leader: $leader"
t0=$SECONDS
k -n "$rns" delete pod "$leader" --wait=false >/dev/null
next=$(wait_holder "$leader" 60) || fail "no takeover within 60 s of deleting the leader $leader"
log "ok: $next took over $((SECONDS - t0)) s after $leader was deleted"

log "4. README.md's quick start: $readme_apply, then $readme_watch, scraped by Prometheus"
"$REPO_ROOT/tests/monitoring/prometheus.sh" start
prom=http://127.0.0.1:9095
# check_metrics WHAT URL: promtool's lint of a real /metrics page.
check_metrics() {
  local page
  page=$(curl -sf --max-time 5 "$2") || fail "cannot read $1 metrics at $2"
  printf '%s\n' "$page" | promtool check metrics || fail "promtool check metrics: $1 ($2)"
  log "ok: promtool check metrics on the $1's /metrics"
}
(cd "$REPO_ROOT" && k "${apply_words[@]}") >/dev/null || fail "$readme_apply"
# The README's watch, as a user leaves it open; stopped once the run has finished.
watch_log=$LOG_DIR/e2e-get-br-w.log
(cd "$REPO_ROOT" && exec timeout 600 "$K8S_BIN/kubectl" --kubeconfig="$ADMIN_KUBECONFIG" "${watch_words[@]}") > "$watch_log" 2>&1 &
watch_pid=$!
seen_running=
deadline=$((SECONDS + 420))
while :; do
  phase=$(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.phase}')
  if [ "$phase" = Running ] && [ -z "$seen_running" ]; then
    seen_running=$(k -n "$qs_ns" get br "$name" --no-headers)
    log "kubectl get br while running: $seen_running"
    worker_ip=$(k -n "$qs_ns" get pods -l benchrun.dev/run="$name" -o jsonpath='{.items[0].status.podIP}')
    operator_ip=$(k -n "$rns" get pod "$(holder)" -o jsonpath='{.status.podIP}')
    check_metrics worker "http://$worker_ip:8080/metrics"
    check_metrics operator "http://$operator_ip:8080/metrics"
    # Each worker's claim (no storageClassName in the example) got a volume of the cluster's
    # default StorageClass from its provisioner.
    claims=$(k -n "$qs_ns" get pvc -l benchrun.dev/run="$name" -o jsonpath='{range .items[*]}{.spec.storageClassName}/{.status.phase} {end}')
    [ "$claims" = "benchrun-hostpath/Bound benchrun-hostpath/Bound " ] ||
      fail "the run's claims are '$claims', want two Bound claims of the default StorageClass benchrun-hostpath"
    volumes=$(k -n "$qs_ns" get pvc -l benchrun.dev/run="$name" -o jsonpath='{.items[*].spec.volumeName}')
    [ -n "$volumes" ] || fail "the run's Bound claims name no volume"
    # The workers would be refused in a namespace enforcing the restricted Pod Security
    # Standard (as a user's may): the API server's answer to a dry run of that label.
    pss=$(k label --dry-run=server --overwrite namespace "$qs_ns" pod-security.kubernetes.io/enforce=restricted 2>&1 >/dev/null | grep -F "$name" || true)
    [ -z "$pss" ] || fail "the run's pods violate the restricted Pod Security Standard: $pss"
  fi
  case $phase in
    Succeeded) break ;;
    Failed) fail "the run failed: $(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.conditions}')" ;;
  esac
  [ $SECONDS -lt $deadline ] || fail "the run is still $phase after 420 s"
  sleep 1
done
[ -n "$seen_running" ] || fail "never saw the run Running"
ops=$(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.results.get.count}')
puts=$(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.results.put.count}')
workers=$(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.workers[*].phase}')
[ "${ops:-0}" -gt 0 ] || puts=
[ "${puts:-0}" -gt 0 ] || fail "no merged get and put counts in status.results (get '$ops', put '$puts')"
[ "$workers" = "Collected Collected" ] || fail "workers ended '$workers', want one Collected per node"
log "ok: $(k -n "$qs_ns" get br "$name" --no-headers)"
# What the README's `kubectl get br -w` showed (its first column is the run's name).
deadline=$((SECONDS + 10))
until awk -v n="$name" '$1 == n && / Succeeded / { ok = 1 } END { exit !ok }' "$watch_log"; do
  [ $SECONDS -lt $deadline ] || fail "'$readme_watch' never showed $name Succeeded: $(cat "$watch_log")"
  sleep 1
done
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
awk -v n="$name" '$1 == n && / Running / { ok = 1 } END { exit !ok }' "$watch_log" ||
  fail "'$readme_watch' never showed $name Running: $(cat "$watch_log")"
log "ok: $readme_watch showed $name Running, then Succeeded"
# The chart's default workerNetworkPolicy: the in-cluster operator gave the run a policy that
# admits only its own pods (by namespace and labels) to the workers' port.
# Named NAME-workers-UID: found by the run's label.
np=$(k -n "$qs_ns" get networkpolicy -l "benchrun.dev/run=$name" -o jsonpath='{.items[0].spec.podSelector.matchLabels.benchrun\.dev/run} {.items[0].spec.ingress[0].ports[0].port} {.items[0].spec.ingress[0].from[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name} {.items[0].spec.ingress[0].from[0].podSelector.matchLabels.app\.kubernetes\.io/component}') ||
  fail "no NetworkPolicy for the run $name"
[ "$np" = "$name 8080 $rns operator" ] || fail "the NetworkPolicy of $name is '$np', want '$name 8080 $rns operator'"
log "ok: the NetworkPolicy of $name admits only the operator's pods to port 8080"
# The operator publishes the merged result once the run finished: wait for Prometheus to have
# scraped it, then evaluate the whole dashboard over the run.
deadline=$((SECONDS + 60))
until curl -sf "$prom/api/v1/query" --data-urlencode \
    "query=benchrun_operator_run_ops_per_second{namespace=\"$qs_ns\",run=\"$name\"}" |
    grep -q '"value"'; do
  [ $SECONDS -lt $deadline ] || fail "Prometheus never scraped the operator's result for $name"
  sleep 1
done
started=$(date -d "$(k -n "$qs_ns" get br "$name" -o jsonpath='{.status.startTime}')" +%s)
python3 "$REPO_ROOT/tests/monitoring/check_dashboard.py" "$prom" \
  "$chart/dashboards/benchrun.json" "$qs_ns" "$name" $((started - 10)) $(($(date +%s) + 10)) ||
  fail "a dashboard query returned no data"
"$REPO_ROOT/tests/monitoring/prometheus.sh" stop

log "5. helm upgrade keeps the token key"
h upgrade "$release" "$chart" -n "$rns" "${image_values[@]}" --set operator.replicas=2 \
  --set operator.logLevel=debug --wait --timeout 180s > "$LOG_DIR/helm-upgrade.log" ||
  fail "helm upgrade (output in $LOG_DIR/helm-upgrade.log)"
key_after=$(k -n "$rns" get secret -l app.kubernetes.io/instance="$release" -o jsonpath='{.items[0].data}')
[ "$key_before" = "$key_after" ] || fail "helm upgrade changed the token key"
log "ok: token key unchanged by helm upgrade"

log "6. helm uninstall"
k -n "$qs_ns" delete br "$name" --wait=true --timeout=120s >/dev/null || fail "kubectl delete br $name"
# The claims go with the run; their volumes (and the provisioner's directories) with the claims.
deadline=$((SECONDS + 120))
# shellcheck disable=SC2086  # one word per volume
until [ -z "$(k get pv $volumes --ignore-not-found -o name)" ]; do
  [ $SECONDS -lt $deadline ] || fail "the run's volumes $volumes are still there 120 s after it was deleted"
  sleep 1
done
log "ok: the run's claims and volumes ($volumes) are gone with it"
h uninstall "$release" -n "$rns" --wait --timeout 120s >/dev/null || fail "helm uninstall"
# Pods go by garbage collection after their Deployment: wait (bounded) for everything to go.
deadline=$((SECONDS + 90))
while :; do
  left=$(k get all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases -n "$rns" \
    -l app.kubernetes.io/instance="$release" -o name 2>/dev/null
    k get clusterroles,clusterrolebindings -l app.kubernetes.io/instance="$release" -o name)
  [ -z "$left" ] && break
  [ $SECONDS -lt $deadline ] || fail "left behind 90 s after uninstall: $left"
  sleep 1
done
k get crd benchmarkruns.benchrun.dev >/dev/null || fail "the CRD went with the release"
k delete namespace "$rns" "$watch_ns" --wait=false >/dev/null
log "ok: nothing left but the CRD"
