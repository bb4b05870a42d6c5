#!/usr/bin/env python3
"""Evaluate every PromQL expression of the Grafana dashboard against a real Prometheus.

Each panel target and each template variable query must return data for the given run: a
panel that would show "No data" fails the check. Grafana's variables are substituted as the
dashboard would with that run selected ($namespace, $run, $node = all, $__rate_interval).

Panels that only another kind of run can feed (NOT_FED_BY_AN_OBJECT_RUN: training runs, scheduled
runs, control-plane runs) are reported as skipped with the reason, never passed silently; their queries are still
parsed and their metric names checked offline (tests/helm/dashcheck), and a prefix that matches
no panel fails the check, so the list cannot hide a renamed panel.

usage: check_dashboard.py PROM_URL DASHBOARD_JSON NAMESPACE RUN START END
       (START/END: unix seconds bracketing the run)
"""
import json
import math
import re
import sys
import urllib.parse
import urllib.request


# Panel title prefix -> what feeds it (the run checked here is the quick start's object run).
NOT_FED_BY_AN_OBJECT_RUN = {
    "Training:": "a training workload's worker metrics",
    "Schedules:": "a BenchmarkSchedule's runs (operator metrics per schedule)",
    "Control plane:": "a control-plane run (operator metrics per operation and StorageClass)",
}


def get(prom, path, params):
    url = f"{prom}{path}?{urllib.parse.urlencode(params, doseq=True)}"
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{path}: {body}")
    return body["data"]


def main():
    prom, dash_path, ns, run, start, end = sys.argv[1:7]
    dash = json.load(open(dash_path))
    subst = {
        "$namespace": ns,
        "$run": run,
        "$node": ".*",
        "$__rate_interval": "10s",
    }

    def fill(expr):
        for k in sorted(subst, key=len, reverse=True):
            expr = expr.replace(k, subst[k])
        if "$" in expr:
            raise ValueError(f"unsubstituted variable in {expr}")
        return expr

    failures, checked = [], 0
    # Template variables: label_values(METRIC{sel}, LABEL) must list something (the run, for run).
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q or "")
        if not m:
            continue
        checked += 1
        values = get(prom, f"/api/v1/label/{m.group(2)}/values",
                     {"match[]": fill(m.group(1)), "start": start, "end": end})
        want = {"namespace": ns, "run": run}.get(var["name"])
        if not values or (want and want not in values):
            failures.append(f"variable {var['name']}: {q} -> {values}")
        else:
            print(f"ok: variable {var['name']} -> {values}")
    skipped = {prefix: 0 for prefix in NOT_FED_BY_AN_OBJECT_RUN}
    for panel in dash["panels"]:
        prefix = next((p for p in NOT_FED_BY_AN_OBJECT_RUN if panel["title"].startswith(p)), None)
        if prefix:
            skipped[prefix] += 1
            print(f"SKIPPED: {panel['title']!r}: only {NOT_FED_BY_AN_OBJECT_RUN[prefix]} "
                  f"feed it, not the run {run}")
            continue
        for t in panel.get("targets", []):
            checked += 1
            expr = fill(t["expr"])
            data = get(prom, "/api/v1/query_range",
                       {"query": expr, "start": start, "end": end, "step": "1"})
            points = [float(v) for s in data["result"] for _, v in s["values"]]
            finite = [p for p in points if math.isfinite(p)]
            if not finite:
                failures.append(f"panel {panel['title']!r}: no data for {expr}")
            else:
                print(f"ok: {panel['title']!r}: {len(data['result'])} series, "
                      f"max {max(finite):.4g}: {t['expr'][:70]}")
    for prefix, n in skipped.items():
        if n == 0:
            failures.append(f"no panel title starts with {prefix!r} (NOT_FED_BY_AN_OBJECT_RUN is stale)")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    print(f"dashboard: {checked - len(failures)} of {checked} queries returned data; "
          f"{sum(skipped.values())} panels skipped (see SKIPPED above)")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
