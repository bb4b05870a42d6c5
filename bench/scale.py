#!/usr/bin/env python3
"""Driver of bench/scale.sh (see there): one simulated fleet per N, figures on stdout."""

import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime

KUBECTL = os.environ["KUBECTL"]
OPERATOR = os.environ["OPERATOR_BIN"]
WORKER = os.environ["WORKER_BIN"]
NS = "benchrun-scale"
FLEET = "benchrun.dev/fleet"
KEY = b"benchrun-scale-bench-operator-key"
# Workload length of each run (BENCH_DURATION seconds; issue 22 measures 60 s runs).
DURATION = int(os.environ.get("BENCH_DURATION", "5"))
HZ = os.sysconf("SC_CLK_TCK")


def kubectl(*args, stdin=None, check=True):
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def getj(*args):
    return json.loads(kubectl(*args, "-o", "json"))


def node_cidr(i):
    return f"127.{100 + i // 250}.{i % 250}.0/24"


def make_nodes(n):
    docs = []
    for i in range(n):
        name = f"scale-n{i}"
        docs.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "labels": {"type": "kwok", FLEET: "bench", "kubernetes.io/hostname": name},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"podCIDR": node_cidr(i), "podCIDRs": [node_cidr(i)],
                     "taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]},
        })
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    t0 = time.time()
    while True:
        items = getj("get", "nodes", "-l", f"{FLEET}=bench")["items"]
        ok = sum(1 for it in items if settled(it))
        if ok == n:
            return time.time() - t0
        if time.time() - t0 > 300:
            sys.exit(f"{ok}/{n} fake nodes settled after 300 s")
        time.sleep(1)


def settled(node):
    ready = any(c["type"] == "Ready" and c["status"] == "True"
                for c in node.get("status", {}).get("conditions", []))
    taints = node.get("spec", {}).get("taints", [])
    return ready and not any(t["key"].startswith("node.kubernetes.io/") for t in taints)


def delete_nodes():
    kubectl("delete", "nodes", "-l", f"{FLEET}=bench", "--wait=true", check=False)


def proc_figures(pid):
    with open(f"/proc/{pid}/status") as f:
        hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / HZ
    return hwm / 1024, cpu


# The operator's /metrics (a fresh process per N, so its counters cover that run alone).
METRICS_PORT = 18089


def scrape():
    """The operator's /metrics text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as r:
        return r.read().decode()


def reconciles():
    """benchrun_operator_reconciles_total from the operator's /metrics."""
    for line in scrape().splitlines():
        if line.startswith("benchrun_operator_reconciles_total "):
            return int(float(line.split()[1]))
    return 0


def api_requests():
    """{verb: count} of benchrun_operator_api_requests_total from the operator's /metrics."""
    out = {}
    for line in scrape().splitlines():
        if line.startswith("benchrun_operator_api_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            verb = labels.split('verb="', 1)[1].split('"', 1)[0]
            out[verb] = int(float(value))
    return out


def run_one(n, work):
    run = f"scale-{n}"
    node_secs = make_nodes(n)
    keyfile = os.path.join(work, "key")
    with open(keyfile, "wb") as f:
        f.write(KEY)
    oplog = open(os.path.join(work, f"operator-{n}.log"), "w")
    op = subprocess.Popen([OPERATOR, "run", "--worker-image", "localhost/none:bench", "--key-file", keyfile,
                           "--namespace", NS, "--metrics-addr", f"127.0.0.1:{METRICS_PORT}"],
                          stdout=oplog, stderr=subprocess.STDOUT, env={**os.environ, "BENCHRUN_LOG": "info,kube=warn"})
    spec = {
        "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": run, "namespace": NS},
        "spec": {
            "workload": {"target": "file:///data/bench", "duration": f"{DURATION}s", "concurrency": 1,
                         "ops": [{"op": "get", "weight": 3}, {"op": "put", "weight": 1}],
                         "objectSize": "4KiB", "dataset": {"objects": 8}},
            "workers": {"perNode": True, "nodeSelector": {FLEET: "bench"},
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]},
            "volume": {"emptyDir": {}}, "timeout": "10m", "cleanup": "Always",
        },
    }
    agents = {}
    try:
        t_apply = time.time()
        kubectl("apply", "-f", "-", stdin=json.dumps(spec))
        uid = getj("get", "benchmarkrun", "-n", NS, run)["metadata"]["uid"]
        token = hmac.new(KEY, uid.encode(), hashlib.sha256).hexdigest()
        t_ready = t_running = t_done = None
        while True:
            pods = getj("get", "pods", "-n", NS, "-l", f"benchrun.dev/run={run}")["items"]
            for p in pods:
                w = p["metadata"]["labels"].get("benchrun.dev/worker")
                ip = p.get("status", {}).get("podIP")
                if w and ip and w not in agents:
                    agents[w] = start_agent(work, w, ip, token)
            st = getj("get", "benchmarkrun", "-n", NS, run).get("status", {})
            now = time.time()
            phases = st.get("workerPhases", {})
            # All Ready: the operator has chosen the start time (and sent it).
            if t_ready is None and st.get("startTime"):
                t_ready = now
            if t_running is None and st.get("startTime") and \
                    sum(phases.get(p, 0) for p in ("Running", "Done", "Collected")) == n:
                t_running = now
            if st.get("phase") in ("Succeeded", "Failed"):
                t_done = now
                break
            if now - t_apply > 600:
                sys.exit(f"N={n}: not finished after 600 s: {json.dumps(st)[:2000]}")
            time.sleep(0.2)
        rss, cpu = proc_figures(op.pid)
        api = api_requests()
        passes = reconciles()
        if st["phase"] != "Succeeded":
            sys.exit(f"N={n}: run {st['phase']}: {json.dumps(st.get('conditions'))}")
        start = datetime.fromisoformat(st["startTime"]).timestamp()
        end_workload = start + DURATION
        objs = getj("get", "configmaps,benchmarkruns", "-n", NS)["items"]
        largest = max(objs, key=lambda o: len(json.dumps(o)))
        cond = {c["type"]: c for c in st.get("conditions", [])}
        return {
            "n": n, "nodes_s": node_secs,
            "ready_s": t_ready - t_apply, "start_s": start - t_apply,
            "running_s": t_running - t_apply if t_running else None,
            "collect_s": t_done - end_workload, "skew_ms": st.get("startSkewMs"),
            "rss_mib": rss, "cpu_s": cpu,
            "largest": f"{largest['kind']} {largest['metadata']['name']} {len(json.dumps(largest))} B",
            "on_time": cond.get("StartRequestsOnTime", {}).get("message", "?"),
            "api": api, "api_per_worker": sum(api.values()) / n, "reconciles": passes,
        }
    finally:
        kubectl("delete", "benchmarkrun", "-n", NS, run, "--wait=true", "--timeout=300s", check=False)
        op.send_signal(signal.SIGTERM)
        op.wait(timeout=30)
        for a in agents.values():
            a.kill()
            a.wait()
        kubectl("delete", "pods", "-n", NS, "--all", "--wait=true", "--timeout=300s", check=False)
        delete_nodes()


def start_agent(work, w, ip, token):
    d = os.path.join(work, w)
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    with open(os.path.join(d, "workload.yaml"), "w") as f:
        f.write(f"target: file://{d}/data\nduration: {DURATION}s\nconcurrency: 1\n"
                "ops: [{op: get, weight: 3}, {op: put, weight: 1}]\nobjectSize: 4KiB\ndataset: {objects: 8}\n")
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token)
    log = open(os.path.join(d, "agent.log"), "w")
    return subprocess.Popen([WORKER, "agent", "--workload", os.path.join(d, "workload.yaml"),
                             "--listen", f"{ip}:8080", "--token-file", os.path.join(d, "token"),
                             "--linger", "120s"],
                            stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "BENCHRUN_WORKER_ID": w, "BENCHRUN_LOG": "warn"})


def main():
    sizes = [int(x) for a in sys.argv[1:] for x in a.split()]
    # A namespace left terminating by an earlier invocation (deleted with --wait=false) must be
    # gone before it is created again, or the first apply finds no namespace.
    kubectl("wait", "--for=delete", f"namespace/{NS}", "--timeout=300s", check=False)
    kubectl("create", "namespace", NS, check=False)
    subprocess.run([OPERATOR, "crd"], check=True, stdout=open("/tmp/benchrun-scale-crd.yaml", "w"))
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "/tmp/benchrun-scale-crd.yaml")
    delete_nodes()
    rows = []
    for n in sizes:
        work = tempfile.mkdtemp(prefix=f"benchrun-scale-{n}-")
        try:
            r = run_one(n, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(r), flush=True)
        rows.append(r)
    kubectl("delete", "namespace", NS, "--wait=false", check=False)
    print()
    print("| N | fake nodes Ready | apply -> all Ready | -> common start (Running) | workload end -> Succeeded | start skew | operator peak RSS | operator CPU | reconciles | API requests per worker | largest object |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        verbs = ", ".join(f"{v} {c}" for v, c in sorted(r["api"].items()))
        print(f"| {r['n']} | {r['nodes_s']:.1f} s | {r['ready_s']:.1f} s | {r['start_s']:.1f} s | {r['collect_s']:.1f} s "
              f"| {r['skew_ms']} ms | {r['rss_mib']:.0f} MiB | {r['cpu_s']:.1f} s | {r['reconciles']} | {r['api_per_worker']:.1f} ({verbs}) | {r['largest']} |")


if __name__ == "__main__":
    main()
