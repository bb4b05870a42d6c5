"""Control-plane figures of the test cluster's provisioners (bench/controlplane.sh runs this).

For each StorageClass and each concurrency: one control-plane run of COUNT claims (provision,
attach, firstIO, delete, and with OPERATIONS also snapshot, clone and expand: a second table
gives their figures; with IN_USE=busy a third gives the I/O the pods kept running meanwhile), run by the operator binary on the host watching one namespace. Prints
a Markdown table: provision-to-first-I/O p50/p99 (status.controlPlane.provisionToFirstIO), the
operations' p50/p99, and the API server's requests per lifecycle: the increase of the API
server's apiserver_request_total over the run (read with `kubectl get --raw /metrics` before
and after; every client: the operator, the provisioners, the kubelets, the controllers, the
scheduler), less the idle rate measured before for as long, split by verb and by resource,
and the operator's own requests (its benchrun_operator_api_requests_total). A WATCH is
counted when it ends, so long watches opened during a run are mostly not in its figures.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

KUBECTL = os.environ["KUBECTL"]
OPERATOR = os.environ["OPERATOR_BIN"]
WORKER_IMAGE = os.environ["WORKER_IMAGE"]
CLASSES = os.environ.get("CLASSES", "benchrun-hostpath local-path").split()
CONCURRENCIES = [int(c) for c in sys.argv[1:]] or [1, 5, 20]
COUNT = int(os.environ.get("COUNT", "20"))
OPERATIONS = os.environ.get("OPERATIONS", "provision attach firstIO delete").split()
CSI_OPS = [o for o in ("snapshot", "clone", "expand") if o in OPERATIONS]
# IN_USE=mounted: snapshot, clone and expand while the pod has the volume mounted (inUse);
# IN_USE=busy: and while it keeps 4 KiB O_DIRECT I/O running on it (busy; not with firstIO).
IN_USE = os.environ.get("IN_USE", "")
if IN_USE not in ("", "mounted", "busy"):
    sys.exit(f"IN_USE must be mounted or busy, not {IN_USE!r}")
if IN_USE == "busy" and "firstIO" in OPERATIONS:
    sys.exit("IN_USE=busy: leave firstIO out of OPERATIONS (it would be timed beside the pod's own I/O)")
if not {"provision", "attach", "delete"} <= set(OPERATIONS):
    sys.exit("OPERATIONS must include provision attach delete (the first table's columns)")
NS = "benchrun-cp-bench"
METRICS_PORT = 18391
KEY = b"benchrun-controlplane-bench-operator-key"
IDLE_SECS = 20


def kubectl(*args, stdin=None, check=True):
    r = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def label(labels, name):
    key = f'{name}="'
    return labels.split(key, 1)[1].split('"', 1)[0] if key in labels else ""


def apiserver_requests():
    """{(verb, resource): requests} from the API server's own apiserver_request_total (every
    client, every response code)."""
    out = {}
    for line in kubectl("get", "--raw", "/metrics").splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        key = (label(labels, "verb"), label(labels, "resource"))
        out[key] = out.get(key, 0) + float(value)
    return out


def grouped(counts, at):
    """Sum {(verb, resource): n} by the key's element `at` (0 verb, 1 resource)."""
    out = {}
    for k, v in counts.items():
        out[k[at]] = out.get(k[at], 0) + v
    return out


def operator_requests():
    """Requests the operator sent (all verbs), from its /metrics."""
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("benchrun_operator_api_requests_total{"))


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def top(per_lifecycle, n):
    """The n largest of {name: requests per lifecycle} at 0.5 or more, as 'name x.y, ...'."""
    items = sorted(((v, k) for k, v in per_lifecycle.items() if v >= 0.5), reverse=True)[:n]
    return ", ".join(f"{k or '-'} {v:.1f}" for v, k in items)


def wait_metrics():
    end = time.time() + 60
    while time.time() < end:
        try:
            operator_requests()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit("the operator's /metrics did not answer within 60 s")


def run_one(cls, conc):
    name = f"cp-{cls}-c{conc}"[:50]
    spec = {
        "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"controlPlane": {"operations": OPERATIONS,
                                  "count": COUNT, "concurrency": conc, "storageClassName": cls,
                                  "size": "16Mi", "timeout": "2m"}},
    }
    if "expand" in OPERATIONS:
        spec["spec"]["controlPlane"]["expandedSize"] = "32Mi"
    if IN_USE:
        spec["spec"]["controlPlane"]["inUse"] = True
        spec["spec"]["controlPlane"]["busy"] = IN_USE == "busy"
    kubectl("delete", "benchmarkrun", name, "-n", NS, "--ignore-not-found", "--wait=true")
    a0, o0, t0 = apiserver_requests(), operator_requests(), time.time()
    kubectl("apply", "-f", "-", stdin=json.dumps(spec))
    kubectl("wait", f"benchmarkrun/{name}", "-n", NS, "--for=jsonpath={.status.finishTime}", "--timeout=30m")
    a1, o1, t1 = apiserver_requests(), operator_requests(), time.time()
    run = json.loads(kubectl("get", "benchmarkrun", name, "-n", NS, "-o", "json"))
    st = run["status"]
    if st.get("phase") != "Succeeded":
        sys.exit(f"{name}: {st.get('phase')}: {json.dumps(st.get('conditions'))}")
    return run, diff(a1, a0), o1 - o0, t1 - t0


def main():
    # A previous invocation deletes its namespace without waiting: let it go before making it anew.
    kubectl("wait", "--for=delete", f"namespace/{NS}", "--timeout=180s", check=False)
    kubectl("create", "namespace", NS)
    crd = subprocess.run([OPERATOR, "crd"], check=True, capture_output=True, text=True).stdout
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=crd)
    work = tempfile.mkdtemp(prefix="benchrun-cp-bench-")
    keyfile = os.path.join(work, "key")
    with open(keyfile, "wb") as f:
        f.write(KEY)
    log = open(os.path.join(work, "operator.log"), "w")
    op = subprocess.Popen([OPERATOR, "run", "--worker-image", WORKER_IMAGE, "--key-file", keyfile,
                           "--namespace", NS, "--metrics-addr", f"127.0.0.1:{METRICS_PORT}"],
                          stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "BENCHRUN_LOG": "info,kube=warn"})
    try:
        wait_metrics()
        # The cluster's own request rate with nothing of ours running (leases, node status).
        i0 = apiserver_requests()
        time.sleep(IDLE_SECS)
        idle_by_key = {k: v / IDLE_SECS for k, v in diff(apiserver_requests(), i0).items()}
        idle = sum(idle_by_key.values())
        rows = []
        for cls in CLASSES:
            for conc in CONCURRENCIES:
                run, api, own, secs = run_one(cls, conc)
                cp = run["status"]["controlPlane"]
                e2e = cp.get("provisionToFirstIO")
                ops = cp["operations"]
                # The run's own requests: the increase less the idle rate over as long.
                net = {k: v - idle_by_key.get(k, 0) * secs for k, v in api.items()}
                total = sum(net.values())
                per = {k: v / COUNT for k, v in net.items()}
                rows.append((cls, conc, e2e, ops, total / COUNT, own / COUNT, cp["elapsedMs"] / 1000,
                             top(grouped(per, 0), 6), top(grouped(per, 1), 4), cp.get("busy")))
                # Each row as soon as it is measured: a run cut short keeps what it has.
                first = f"claim->firstIO p50/p99 {e2e['p50Ms']:.0f}/{e2e['p99Ms']:.0f} ms; " if e2e else ""
                print(f"# {cls} c={conc}: {cp['completed']}/{cp['requested']} in {cp['elapsedMs'] / 1000:.1f}s; "
                      f"{first}API requests/lifecycle {total / COUNT:.1f} (operator {own / COUNT:.1f}; {rows[-1][7]})",
                      file=sys.stderr)
                kubectl("delete", "benchmarkrun", run["metadata"]["name"], "-n", NS, "--wait=true")
        mode = {"": "", "mounted": "; inUse (snapshot, clone, expand with the volume mounted)",
                "busy": "; inUse and busy (and with 4 KiB O_DIRECT I/O running on it)"}[IN_USE]
        print(f"{COUNT} claims per row{mode}; idle API server rate {idle:.1f} requests/s (subtracted)\n")
        print("| class | concurrency | claim -> first I/O p50 / p99 | provision p50 / p99 | attach p50 / p99 | firstIO p50 / p99 | delete p50 / p99 | wall | API requests / lifecycle (all clients, idle subtracted) | of them the operator's | by verb / lifecycle | top resources / lifecycle |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        for cls, conc, e2e, ops, per, own, wall, verbs, resources, _ in rows:
            def pp(r):
                return f"{r['p50Ms'] / 1000:.2f} / {r['p99Ms'] / 1000:.2f} s" if r else "-"
            io = ops.get("firstIO")
            io = f"{io['p50Ms']:.1f} / {io['p99Ms']:.1f} ms" if io else "-"
            print(f"| {cls} | {conc} | {pp(e2e)} | {pp(ops['provision'])} | {pp(ops['attach'])} | "
                  f"{io} | {pp(ops['delete'])} | "
                  f"{wall:.1f} s | {per:.1f} | {own:.1f} | {verbs} | {resources} |")
        # Each operation with its phases (scheduled, vaCreated, attached, bound, pvCreated,
        # pvResized, claimGone, pvGone, detached: those Kubernetes showed), p50 / p99 in ms.
        print()
        phased = ["attach", "delete"] + CSI_OPS
        print("| class | concurrency | " + " | ".join(f"{o} p50 / p99 (phases)" for o in phased) + " |")
        print("| --- | ---: | " + " | ".join("---:" for _ in phased) + " |")
        for cls, conc, e2e, ops, *_ in rows:
            cells = []
            for o in phased:
                r = ops[o]
                phases = "; ".join(f"{k} {p['p50Ms']:.0f} / {p['p99Ms']:.0f}"
                                   for k, p in sorted(r.get("phases", {}).items()))
                cells.append(f"{r['p50Ms']:.0f} / {r['p99Ms']:.0f} ms ({phases})")
            print(f"| {cls} | {conc} | " + " | ".join(cells) + " |")
        if IN_USE == "busy":
            # The I/O the pods kept running through the operations (status.controlPlane.busy).
            print()
            print("| class | concurrency | busy I/O: reads / writes / errors | IOPS per volume | p50 / p99 / max |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for cls, conc, *_, b in rows:
                left = f" ({b['latencyLeftOut']} histograms left out)" if b.get("latencyLeftOut") else ""
                print(f"| {cls} | {conc} | {b['reads']} / {b['writes']} / {b['errors']} | {b['iopsPerVolume']:.0f} | "
                      f"{b['p50Ms']:.2f} / {b['p99Ms']:.2f} / {b['maxMs']:.1f} ms{left} |")
    finally:
        op.terminate()
        op.wait(timeout=30)
        kubectl("delete", "namespace", NS, "--wait=false", check=False)


main()
