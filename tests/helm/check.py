#!/usr/bin/env python3
"""Offline checks of the rendered benchrun chart (run by tests/helm/test.sh).

    check.py REPO_ROOT RENDER_DIR

RENDER_DIR holds `helm template` output, one file per ci/ overlay: default.yaml,
namespaced.yaml, monitoring.yaml. The checks read the Rust sources for what the chart must
match (metric names, RBAC, env vars, ports, labels), so a change in the code that the chart
does not follow fails here. Writes RENDER_DIR/rules.yaml (the PrometheusRule's groups) for
promtool. Exits 1 listing every failure.
"""
import base64
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(sys.argv[1])
RENDER = Path(sys.argv[2])
CHART = REPO / "charts/benchrun"
FAILURES = []
PASSED = [0]


def check(cond, msg):
    """Record one check; a failure is reported at the end, not raised."""
    if cond:
        PASSED[0] += 1
    else:
        FAILURES.append(msg)
    return cond


def load(name):
    docs = [d for d in yaml.safe_load_all((RENDER / f"{name}.yaml").read_text()) if d]
    return docs


def kinds(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, overlay):
    found = kinds(docs, kind)
    check(len(found) == 1, f"{overlay}: expected one {kind}, found {len(found)}")
    return found[0] if found else {}


RUST_VERBS = "get|list|watch|create|update|patch|delete|deletecollection"


# ---------------------------------------------------------------- facts read from the code
def metric_names():
    """Metric names registered in operator/src/metrics.rs and worker/src/metrics.rs, with the
    _bucket/_sum/_count series of histograms."""
    names = set()
    ctor = re.compile(
        r"\b(Opts|HistogramOpts|IntCounter|IntGauge|Counter|Gauge|Histogram)::new\(\s*\"(benchrun_[a-z0-9_]+)\"",
        re.S,
    )
    for f in ["operator/src/metrics.rs", "worker/src/metrics.rs"]:
        for kind, name in ctor.findall((REPO / f).read_text()):
            names.add(name)
            if kind in ("HistogramOpts", "Histogram"):
                names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def documented_rbac():
    """{resource: verbs} from the '# RBAC the operator needs' block of reconcile/mod.rs."""
    text = (REPO / "operator/src/reconcile/mod.rs").read_text()
    m = re.search(r"//! # RBAC the operator needs\n((?://!.*\n)+?)//!\s*\n", text)
    if not check(m, "reconcile/mod.rs: no '# RBAC the operator needs' block to compare RBAC with"):
        return {}
    block = " ".join(line[3:].strip() for line in m.group(1).splitlines())
    verbs_re = rf"(?:{RUST_VERBS})(?:\s*,\s*(?:{RUST_VERBS}))*"
    out = {}
    for res, verbs in re.findall(rf"`([\w./]+)`:\s*(?:\*\*)?({verbs_re})", block):
        out[res] = set(v.strip() for v in verbs.split(","))
    check(out, "reconcile/mod.rs: the RBAC block lists no resources")
    return out


def main_rs():
    return (REPO / "operator/src/main.rs").read_text()


def resources_rs():
    return (REPO / "operator/src/resources.rs").read_text()


# ---------------------------------------------------------------- values and schema
def check_values_documented():
    lines = (CHART / "values.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"^\s*[A-Za-z][\w.-]*:", line):
            continue
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        check(prev.lstrip().startswith("#"),
              f"values.yaml:{i + 1}: `{line.strip()}` has no comment line above it")


def check_schema():
    schema = json.loads((CHART / "values.schema.json").read_text())
    check(schema.get("additionalProperties") is False,
          "values.schema.json: additionalProperties must be false at the top level")

    def walk(node, path):
        if not isinstance(node, dict):
            return
        if node.get("type") == "object":
            check("additionalProperties" in node,
                  f"values.schema.json {path or '/'}: object without additionalProperties")
            if "properties" in node:
                check(node.get("additionalProperties") is False,
                      f"values.schema.json {path}: object with properties must set additionalProperties: false")
        for k, v in node.get("properties", {}).items():
            walk(v, f"{path}/{k}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key], f"{path}/{key}")

    walk(schema, "")
    # Every value in values.yaml is described by the schema (the top-level false would reject
    # the chart's own defaults otherwise, but nested free-form maps would not).
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def covered(v, s, path):
        if isinstance(v, dict) and "properties" in s:
            for k, sub in v.items():
                check(k in s["properties"], f"values.schema.json: {path}/{k} is not in the schema")
                if k in s["properties"]:
                    covered(sub, s["properties"][k], f"{path}/{k}")

    covered(values, schema, "")


# ---------------------------------------------------------------- workloads
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                   "persistentVolumeClaim", "projected", "secret"}


def check_restricted(dep, overlay):
    """The Pod Security Standard `restricted` profile, field by field."""
    spec = dep["spec"]["template"]["spec"]
    psc = spec.get("securityContext", {})
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        check(not spec.get(f), f"{overlay}: operator pod sets {f}")
    for v in spec.get("volumes", []):
        types = set(v) - {"name"}
        check(types <= ALLOWED_VOLUMES, f"{overlay}: volume {v['name']} of a type restricted forbids: {types}")
    check(psc.get("runAsNonRoot") is True, f"{overlay}: pod securityContext.runAsNonRoot is not true")
    check(psc.get("runAsUser") == 65532, f"{overlay}: pod securityContext.runAsUser is not 65532")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
          f"{overlay}: pod seccompProfile is not RuntimeDefault")
    check(spec.get("automountServiceAccountToken") is True,
          f"{overlay}: the operator pod must mount its ServiceAccount token")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext", {})
        n = f"{overlay}: container {c['name']}"
        check(sc.get("allowPrivilegeEscalation") is False, f"{n}: allowPrivilegeEscalation is not false")
        check(sc.get("readOnlyRootFilesystem") is True, f"{n}: readOnlyRootFilesystem is not true")
        check(sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{n}: runAsNonRoot is not true")
        check(sc.get("runAsUser", psc.get("runAsUser")) not in (None, 0), f"{n}: runs as root")
        check(not sc.get("privileged"), f"{n}: privileged")
        caps = sc.get("capabilities", {})
        check("ALL" in caps.get("drop", []), f"{n}: capabilities.drop lacks ALL")
        check(set(caps.get("add", [])) <= {"NET_BIND_SERVICE"}, f"{n}: adds capabilities {caps.get('add')}")
        seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
        check(seccomp in ("RuntimeDefault", "Localhost"), f"{n}: seccompProfile {seccomp}")
        check("resources" in c and c["resources"].get("requests"), f"{n}: no resource requests")
        for p in c.get("ports", []):
            check(not p.get("hostPort"), f"{n}: hostPort")


def check_deployment(docs, overlay, values):
    dep = one(docs, "Deployment", overlay)
    if not dep:
        return
    check_restricted(dep, overlay)
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    check(c.get("args") == ["run"], f"{overlay}: operator args are {c.get('args')}, want [run]")
    tag = values.get("operator", {}).get("image", {}).get("tag") or "0.1.0"
    check(c["image"].endswith(":" + tag), f"{overlay}: operator image {c['image']} does not end in :{tag}")
    replicas = values.get("operator", {}).get("replicas", 1)
    check(dep["spec"]["replicas"] == replicas, f"{overlay}: replicas {dep['spec']['replicas']}, want {replicas}")
    # Every required flag of `benchrun-operator run` (a non-Option field with an env) is set.
    src = main_rs()
    for attr, ty in re.findall(r'#\[arg\(([^\]]*)\)\]\s*\n\s*\w+:\s*([\w<>:]+)', src):
        name = re.search(r'env\s*=\s*"([A-Z0-9_]+)"', attr)
        if name and not ty.startswith("Option") and ty != "bool" and "default_value" not in attr:
            check(name.group(1) in env,
                  f"{overlay}: the Deployment does not set {name.group(1)} (required by operator/src/main.rs)")
    for name in env:
        if name.startswith("BENCHRUN_"):
            known = name in src or name in {"BENCHRUN_LEADER_ELECT", "BENCHRUN_LEASE_NAME", "BENCHRUN_LEASE_NAMESPACE"}
            check(known, f"{overlay}: the Deployment sets {name}, which operator/src/main.rs does not read")
    watch = values.get("watchNamespace", "")
    if watch:
        check(env.get("BENCHRUN_NAMESPACE", {}).get("value") == watch, f"{overlay}: BENCHRUN_NAMESPACE is not {watch}")
    else:
        check("BENCHRUN_NAMESPACE" not in env, f"{overlay}: BENCHRUN_NAMESPACE set without watchNamespace")
    le = replicas > 1 or values.get("leaderElection", {}).get("enabled", False)
    check((env.get("BENCHRUN_LEADER_ELECT", {}).get("value") == "true") == le,
          f"{overlay}: BENCHRUN_LEADER_ELECT must be \"true\" exactly when replicas > 1 or leaderElection.enabled")
    # Never two unelected operators at once (a rolling update would run the old and the new
    # together, each deciding alone): Recreate whenever leader election is off.
    strategy = dep["spec"].get("strategy", {}).get("type", "RollingUpdate")
    check(le or strategy == "Recreate",
          f"{overlay}: without leader election the Deployment strategy must be Recreate, got {strategy}")
    for name, path in [("BENCHRUN_LEASE_NAMESPACE", "metadata.namespace"), ("POD_NAMESPACE", "metadata.namespace"),
                       ("POD_NAME", "metadata.name")]:
        got = env.get(name, {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        check(got == path, f"{overlay}: {name} is not from the downward API {path}")
    check(env.get("BENCHRUN_LEASE_NAME", {}).get("value") == dep["metadata"]["name"],
          f"{overlay}: BENCHRUN_LEASE_NAME is not the full name")
    # Probes use paths the operator serves.
    for probe in ("livenessProbe", "readinessProbe"):
        p = c.get(probe, {})
        path = p.get("httpGet", {}).get("path")
        check(p and (path is None or f'.route("{path}"' in src),
              f"{overlay}: {probe} path {path} is not served by operator/src/main.rs")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    check(ports.get("metrics") == 8080, f"{overlay}: no container port metrics=8080 (main.rs default --metrics-addr)")
    # The key file is inside a read-only mount of the key Secret.
    key_file = env.get("BENCHRUN_OPERATOR_KEY_FILE", {}).get("value", "")
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    key_mount = next((m for m in mounts.values() if key_file.startswith(m["mountPath"] + "/")), None)
    if check(key_mount, f"{overlay}: BENCHRUN_OPERATOR_KEY_FILE {key_file} is in no volume mount"):
        check(key_mount.get("readOnly") is True, f"{overlay}: the key mount is not read-only")
        secret = vols[key_mount["name"]].get("secret", {}).get("secretName")
        want = values.get("operator", {}).get("existingKeySecret") or f"{dep['metadata']['name']}-key"
        check(secret == want, f"{overlay}: the key volume uses Secret {secret}, want {want}")
    secrets = kinds(docs, "Secret")
    if values.get("operator", {}).get("existingKeySecret"):
        check(not secrets, f"{overlay}: a key Secret is rendered although existingKeySecret is set")
    elif check(len(secrets) == 1, f"{overlay}: expected the key Secret"):
        s = secrets[0]
        check("helm.sh/resource-policy" not in s["metadata"].get("annotations", {}),
              f"{overlay}: the key Secret must not be kept on uninstall")
        data = s.get("data", {})
        check(len(data) == 1 and len(base64.b64decode(next(iter(data.values()), ""))) >= 16,
              f"{overlay}: the key Secret does not hold one key of >= 16 bytes")
    sas = kinds(docs, "ServiceAccount")
    for sa in sas:
        check(sa.get("automountServiceAccountToken") is False,
              f"{overlay}: ServiceAccount must not automount its token (only the operator pod does)")


# ---------------------------------------------------------------- RBAC
def rules_of(docs, kind):
    out = []
    for r in kinds(docs, kind):
        out.extend((r["metadata"]["name"], rule) for rule in r.get("rules", []))
    return out


def check_rbac(docs, overlay, values, documented):
    all_rules = rules_of(docs, "Role") + rules_of(docs, "ClusterRole")
    for name, rule in all_rules:
        check("*" not in rule.get("verbs", []) and "*" not in rule.get("resources", [])
              and "*" not in rule.get("apiGroups", []), f"{overlay}: {name} has a wildcard rule {rule}")
        if "secrets" in rule.get("resources", []):
            bad = set(rule["verbs"]) & {"get", "list", "watch", "*"}
            check(not bad, f"{overlay}: {name} grants {sorted(bad)} on secrets")
    watch = values.get("watchNamespace", "")
    roles = kinds(docs, "Role")
    croles = kinds(docs, "ClusterRole")
    if watch:
        main = [r for r in roles if r["metadata"].get("namespace") == watch]
        check(len(main) == 1, f"{overlay}: expected a Role in the watched namespace {watch}")
        check(any(b["roleRef"]["kind"] == "Role" and b["metadata"].get("namespace") == watch
                  for b in kinds(docs, "RoleBinding")), f"{overlay}: no RoleBinding in {watch}")
        # Cluster-scoped reads only: list on nodes, and (control-plane runs) get/list/watch on
        # PersistentVolumes, get on StorageClasses and list/watch on VolumeAttachments.
        allowed = [
            {(("",), ("nodes",), ("list",))},
            {(("",), ("persistentvolumes",), ("get", "list", "watch")),
             (("storage.k8s.io",), ("storageclasses",), ("get",)),
             (("storage.k8s.io",), ("volumeattachments",), ("list", "watch"))},
        ]
        for cr in croles:
            res = {(tuple(r.get("apiGroups", [])), tuple(r["resources"]), tuple(r["verbs"])) for r in cr["rules"]}
            check(res in allowed,
                  f"{overlay}: with watchNamespace set, ClusterRole {cr['metadata']['name']} grants more than list on nodes or reads of PersistentVolumes, StorageClasses and VolumeAttachments: {cr['rules']}")
    else:
        check(len(croles) == 1, f"{overlay}: expected one ClusterRole without watchNamespace")
        check(all("leader-election" in r["metadata"]["name"] for r in roles),
              f"{overlay}: a Role other than leader election without watchNamespace")
    # Leases only in a Role of the release namespace, and only with leader election.
    lease_rules = [(n, r) for n, r in all_rules if "leases" in r.get("resources", [])]
    replicas = values.get("operator", {}).get("replicas", 1)
    le = replicas > 1 or values.get("leaderElection", {}).get("enabled", False)
    check(bool(lease_rules) == le, f"{overlay}: lease rules must exist exactly when leader election is on")
    for n, r in lease_rules:
        check(r.get("apiGroups") == ["coordination.k8s.io"], f"{overlay}: {n}: leases not in coordination.k8s.io")
        check(set(r["verbs"]) <= {"get", "create", "update"}, f"{overlay}: {n}: lease verbs {r['verbs']}")
        check(not any(n == cr["metadata"]["name"] for cr in croles), f"{overlay}: leases granted cluster-wide")
    # Exactly the RBAC documented in reconcile/mod.rs (plus leases for leader election).
    granted = {}
    for _, r in all_rules:
        for res in r["resources"]:
            # Core events are `events`, the events.k8s.io ones `events.k8s.io/events`.
            key = f"{r['apiGroups'][0]}/events" if res == "events" and r["apiGroups"][0] else res
            granted.setdefault(key, set()).update(r["verbs"])
    granted.pop("leases", None)
    if not values.get("rbac", {}).get("listNodes", True):
        documented = {k: v for k, v in documented.items() if k != "nodes"}
    if not values.get("rbac", {}).get("controlPlane", True):
        documented = {k: v for k, v in documented.items() if k not in ("persistentvolumes", "storageclasses", "volumeattachments")}
    if not values.get("workerNetworkPolicy", {}).get("enabled", True):
        documented = {k: v for k, v in documented.items() if k != "networkpolicies"}
    for res, verbs in documented.items():
        check(verbs <= granted.get(res, set()),
              f"{overlay}: reconcile/mod.rs needs {sorted(verbs)} on {res}, the chart grants {sorted(granted.get(res, set()))}")
    for res, verbs in granted.items():
        extra = verbs - documented.get(res, set())
        check(not extra, f"{overlay}: the chart grants {sorted(extra)} on {res}, which reconcile/mod.rs does not list")


# ---------------------------------------------------------------- monitoring
def check_monitoring(docs, overlay, values):
    for kind, key in [("ServiceMonitor", "serviceMonitor"), ("PodMonitor", "podMonitor"),
                      ("PrometheusRule", "prometheusRule")]:
        on = values.get(key, {}).get("enabled", False)
        n = len(kinds(docs, kind))
        check(n == (1 if on else 0), f"{overlay}: {n} {kind}(s) rendered with {key}.enabled={on}")
    svc = one(docs, "Service", overlay)
    if svc:
        check(any(p["name"] == "metrics" for p in svc["spec"]["ports"]), f"{overlay}: Service has no port named metrics")
    res = resources_rs()
    for pm in kinds(docs, "PodMonitor"):
        port = re.search(r'ContainerPort \{\s*name: Some\("([\w-]+)"\.into\(\)\)', res)
        ep = pm["spec"]["podMetricsEndpoints"][0]
        if check(port, "resources.rs: no named worker container port found"):
            check(ep["port"] == port.group(1), f"{overlay}: PodMonitor port {ep['port']}, the worker's is {port.group(1)}")
        consts = dict(re.findall(r'pub const (\w+_LABEL): &str = "([^"]+)";', res))
        meta = lambda lbl: "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", lbl)
        want = {"run": meta(consts.get("RUN_LABEL", "?")), "worker": meta(consts.get("WORKER_LABEL", "?")),
                "namespace": "__meta_kubernetes_namespace", "node": "__meta_kubernetes_pod_node_name"}
        got = {r["targetLabel"]: r["sourceLabels"] for r in ep.get("relabelings", [])}
        for target, source in want.items():
            check(got.get(target) == [source], f"{overlay}: PodMonitor does not relabel {source} into {target}")
        sel = pm["spec"]["selector"]
        check(sel.get("matchLabels", {}).get("app.kubernetes.io/managed-by") in res,
              f"{overlay}: PodMonitor selects a managed-by the operator does not set")
    rules = kinds(docs, "PrometheusRule")
    if rules:
        (RENDER / "rules.yaml").write_text(yaml.safe_dump({"groups": rules[0]["spec"]["groups"]}))
        alerts = {r.get("alert"): r["expr"] for g in rules[0]["spec"]["groups"] for r in g["rules"]}
        # For dashcheck, which parses them with Prometheus's own parser.
        (RENDER / "alerts.json").write_text(json.dumps(
            [{"where": f"{overlay}: alert {a}", "expr": e} for a, e in alerts.items()]))
        check({"BenchrunRunFailed", "BenchrunOperatorReconcileErrors"} <= set(alerts),
              f"{overlay}: PrometheusRule lacks the expected alerts: {sorted(alerts)}")
        for a, e in alerts.items():
            check_expr(e, f"{overlay}: alert {a}")


NAMES = metric_names()


def check_expr(expr, where):
    used = set(re.findall(r"\bbenchrun_[a-z0-9_]+", expr))
    check(used, f"{where}: expression reads no benchrun metric: {expr}")
    unknown = used - NAMES
    check(not unknown, f"{where}: metric(s) {sorted(unknown)} are not registered in operator/src/metrics.rs "
                       f"or worker/src/metrics.rs (known: {sorted(NAMES)})")


def check_dashboard(docs_with, docs_without):
    path = CHART / "dashboards/benchrun.json"
    try:
        dash = json.loads(path.read_text())
    except ValueError as e:
        check(False, f"{path}: not JSON: {e}")
        return
    var = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    check(var.get("datasource", {}).get("type") == "datasource", "dashboard: no datasource variable")
    for v in ("namespace", "run", "node"):
        if check(v in var, f"dashboard: no template variable {v}"):
            q = var[v]["query"]
            check_expr(q["query"] if isinstance(q, dict) else q, f"dashboard: variable {v}")
    exprs = []
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        check(targets, f"dashboard: panel '{p.get('title')}' has no targets")
        check(p.get("datasource", {}).get("uid") == "${datasource}",
              f"dashboard: panel '{p.get('title')}' does not use the datasource variable")
        for t in targets:
            e = t.get("expr", "")
            exprs.append(e)
            check_expr(e, f"dashboard: panel '{p.get('title')}'")
            for window in re.findall(r"\b(?:rate|irate|increase)\([^\[]*\[([^\]]+)\]", e):
                check(window == "$__rate_interval", f"dashboard: panel '{p.get('title')}' uses [{window}], not [$__rate_interval]")
            for hq in re.findall(r"histogram_quantile\(([^,]+),\s*(\w+)", e):
                check(hq[1] == "sum" and re.search(r"sum by \(le\b", e),
                      f"dashboard: panel '{p.get('title')}': histogram_quantile must sum buckets by (le, ...) across workers")
    joined = "\n".join(exprs)
    for needle in ["benchrun_bytes_total", "benchrun_ops_total", "benchrun_op_duration_seconds_bucket",
                   "benchrun_errors_total", "benchrun_inflight_ops", "benchrun_stage", "benchrun_operator_runs",
                   "benchrun_operator_run_p99_seconds", "benchrun_operator_run_ops_per_second",
                   "benchrun_ttfb_seconds_bucket", "sum by (node)", "histogram_quantile(0.5,",
                   "histogram_quantile(0.95,", "histogram_quantile(0.99,", "histogram_quantile(0.999,"]:
        check(needle in joined, f"dashboard: no panel uses {needle}")
    cms = [d for d in kinds(docs_with, "ConfigMap") if "benchrun.json" in d.get("data", {})]
    if check(len(cms) == 1, "dashboard: dashboards.enabled renders no dashboard ConfigMap"):
        check(json.loads(cms[0]["data"]["benchrun.json"]) == dash, "dashboard: the ConfigMap differs from dashboards/benchrun.json")
        check(cms[0]["metadata"]["labels"].get("grafana_dashboard") == "1", "dashboard: ConfigMap lacks grafana_dashboard: \"1\"")
    check(not [d for d in kinds(docs_without, "ConfigMap") if "benchrun.json" in d.get("data", {})],
          "dashboard: a dashboard ConfigMap is rendered with dashboards.enabled=false")


def main():
    check_values_documented()
    check_schema()
    documented = documented_rbac()
    rendered = {}
    for overlay in ["default", "namespaced", "monitoring"]:
        values = yaml.safe_load((CHART / f"ci/{overlay}-values.yaml").read_text()) or {}
        docs = load(overlay)
        rendered[overlay] = docs
        for d in docs:
            labels = d["metadata"].get("labels", {})
            check(labels.get("app.kubernetes.io/instance") and labels.get("app.kubernetes.io/name"),
                  f"{overlay}: {d['kind']} {d['metadata']['name']} lacks the app.kubernetes.io labels")
            check(len(d["metadata"]["name"]) <= 63, f"{overlay}: name longer than 63: {d['metadata']['name']}")
        check_deployment(docs, overlay, values)
        check_rbac(docs, overlay, values, documented)
        check_monitoring(docs, overlay, values)
    check_dashboard(rendered["monitoring"], rendered["namespaced"])
    check("benchrun_op_duration_seconds_bucket" in NAMES and "benchrun_operator_runs" in NAMES,
          f"metric extraction found too little: {sorted(NAMES)}")
    for f in FAILURES:
        print(f"FAIL: {f}")
    print(f"check.py: {PASSED[0]} checks passed, {len(FAILURES)} failed")
    return 1 if FAILURES else 0


sys.exit(main())
