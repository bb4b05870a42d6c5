#!/usr/bin/env python3
"""Pod discovery for the test Prometheus, through the test cluster's API server.

Debian's Prometheus is built without `kubernetes_sd_configs`, so this loop does what it and
the chart's PodMonitor would: every second, list the pods through the API and write
file_sd target files (written atomically; Prometheus watches them):
  workers.json   benchrun worker pods (label benchrun.dev/worker), port "http", with the
                 PodMonitor's target labels run, worker, namespace, node
  operator.json  operator pods (app.kubernetes.io/name=benchrun), port "metrics", label pod

usage: discover.py API_URL CA CERT KEY OUT_DIR
"""
import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request


def pods(api, ctx, selector):
    url = f"{api}/api/v1/pods?labelSelector={urllib.parse.quote(selector)}"
    with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
        return json.load(r)["items"]


def port(pod, name):
    for c in pod["spec"]["containers"]:
        for p in c.get("ports", []):
            if p.get("name") == name:
                return p["containerPort"]
    return None


def targets(items, port_name, labels):
    out = []
    for p in items:
        ip, n = p.get("status", {}).get("podIP"), port(p, port_name)
        if ip and n and p["status"].get("phase") == "Running":
            out.append({"targets": [f"{ip}:{n}"], "labels": labels(p)})
    return out


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def main():
    api, ca, cert, key, out = sys.argv[1:6]
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    while True:
        try:
            w = pods(api, ctx, "benchrun.dev/worker")
            write(os.path.join(out, "workers.json"), targets(w, "http", lambda p: {
                "run": p["metadata"]["labels"].get("benchrun.dev/run", ""),
                "worker": p["metadata"]["labels"]["benchrun.dev/worker"],
                "namespace": p["metadata"]["namespace"],
                "node": p["spec"].get("nodeName", ""),
            }))
            o = pods(api, ctx, "app.kubernetes.io/name=benchrun")
            write(os.path.join(out, "operator.json"), targets(o, "metrics", lambda p: {
                "pod": p["metadata"]["name"],
            }))
        except Exception as e:  # the API server restarting, a pod going away: try again
            print(f"discovery: {e}", file=sys.stderr, flush=True)
        time.sleep(1)


if __name__ == "__main__":
    main()
