#!/usr/bin/env python3
"""table.md of one reproduction (bench/reproductions.sh): medians over the repeats, with the
change against the study's baseline and whether `benchrun-worker compare` finds it significant.

    reproductions_table.py BENCHRUN_WORKER DIR LABELS TITLE SWEEP_FILE

DIR holds sweep.json (`run --summary` of a matrix) and run.json (how and when it was
measured, written by the run); LABELS is a comma-separated short name per combination, in
sweep order; `NAME>REF` compares that combination with the one labelled REF instead of the
sweep's baseline (range engine on against off at the same size, say). Prints Markdown. Deterministic: the same sweep.json gives the same bytes.

Significance: for every repeat i, `compare --format json` of the baseline's repeat i (A)
against the combination's repeat i (B). A change is claimed only when every pair is
significant at compare's strong level (p < 0.01) in the same direction, and that direction
is the medians' own: ops/s by compare's rank-sum test on per-second throughput (all ops),
latency by its Kolmogorov-Smirnov test on the op's latency histogram.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

STRONG = 0.01  # worker/src/compare.rs STRONG


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(a, b):
    return "-" if not a else f"{100 * (b - a) / a:+.1f}%"


def verdict(tests, median_up):
    """tests: (p, up) per repeat pair, up = B higher (faster / slower latency); None when a
    pair had no test. Returns the cell's text."""
    if not tests or any(t is None for t in tests):
        return "no test"
    worst = max(p for p, _ in tests)
    ups = {up for _, up in tests}
    if worst < STRONG and len(ups) == 1 and ups == {median_up}:
        return f"**yes** ({pv(worst)})"
    if worst < STRONG:
        return f"no: directions differ ({pv(worst)})"
    return f"no (p up to {worst:.2g})"


def pv(p):
    return "p < 1e-300" if p == 0 else f"p ≤ {p:.2g}"


def compare(br, a, b):
    out = subprocess.run([br, "compare", a, b, "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    return {r["op"]: r for r in json.loads(out)["rows"]}


def main():
    br, d, labels, title, sweep_file = sys.argv[1:6]
    sweep = json.load(open(os.path.join(d, "sweep.json")))
    run = json.load(open(os.path.join(d, "run.json")))
    combos = sweep["combinations"]
    names = [x.split(">")[0] for x in labels.split(",")]
    if len(names) != len(combos):
        sys.exit(f"{d}: {len(names)} labels for {len(combos)} combinations")
    base = sweep["baseline"]
    # The combination each one is compared with.
    ref = [names.index(x.split(">")[1]) if ">" in x else base for x in labels.split(",")]
    labels = names
    ops = sorted({op for c in combos for s in c["runs"] for op in s["report"]})
    repeats = min(len(c["runs"]) for c in combos)
    # compare's verdicts, per combination and repeat pair.
    cmp = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for ci, c in enumerate(combos):
            for ri, s in enumerate(c["runs"]):
                p = os.path.join(tmp, f"{ci}-{ri}.json")
                json.dump(s, open(p, "w"))
                paths[ci, ri] = p
        for ci in range(len(combos)):
            if ci != ref[ci]:
                cmp[ci] = [compare(br, paths[ref[ci], ri], paths[ci, ri]) for ri in range(repeats)]

    def fig(ci, op, key):
        return median([s["report"][op][key] for s in combos[ci]["runs"] if op in s["report"]])

    def all_ops(ci, key):
        return median([sum(r[key] for r in s["report"].values()) for s in combos[ci]["runs"]])

    def throughput(ci):
        tests = []
        for rows in cmp[ci]:
            t = rows.get("all", {}).get("throughputTest")
            tests.append(None if t is None else (t["pValue"], t["u"] < t["n"] * t["m"] / 2))
        return verdict(tests, all_ops(ci, "opsPerSec") > all_ops(ref[ci], "opsPerSec"))

    def latency(ci, op):
        tests = []
        for rows in cmp[ci]:
            t = rows.get(op, {}).get("latencyTest")
            tests.append(None if t is None else (t["pValue"], t["secondSlower"]))
        return verdict(tests, fig(ci, op, "p50Ms") > fig(ref[ci], op, "p50Ms"))

    w = print
    w(f"# {title}\n")
    w(f"[examples/{sweep_file}.yaml](../../../examples/{sweep_file}.yaml) with "
      f"`matrix.repeats: {run['repeats']}`{run.get('overrides', '')}; measured "
      f"{run['date']} with commit {run['commit']}, load average {run['loadavg']} at the start "
      f"({run['cores']} cores, shared). Rerun: `bench/reproductions.sh {run['study']}`; "
      f"this table from sweep.json alone: `bench/reproductions.sh render {run['study']}`.\n")
    w(f"Medians over the {repeats} repeats of each combination; Δ against the combination "
      f"named in `against` (the sweep's baseline is `{labels[base]}`). A change is significant only when `benchrun-worker compare` calls "
      "every repeat pair (repeat i against repeat i of the other) significant (p < 0.01) in "
      "the medians' direction: ops/s by its rank-sum test on the per-second throughput of all "
      "ops, latency by its Kolmogorov-Smirnov test on the op's latency histogram.\n")
    single = len(ops) == 1
    if not single:
        w("## all ops\n")
        w("| combination | ops/s | MiB/s | against | Δ ops/s | ops/s change significant |")
        w("|---|---:|---:|---|---:|---|")
        for ci, label in enumerate(labels):
            o, m = all_ops(ci, "opsPerSec"), all_ops(ci, "mibPerSec")
            if ci == ref[ci]:
                w(f"| {label} | {o:.1f} | {m:.1f} | - | base | base |")
            else:
                w(f"| {label} | {o:.1f} | {m:.1f} | {labels[ref[ci]]} "
                  f"| {pct(all_ops(ref[ci], 'opsPerSec'), o)} | {throughput(ci)} |")
        w("")
    for op in ops:
        w(f"## {op}\n")
        head = "| combination | ops/s | MiB/s | p50 ms | p99 ms | req/op | against | Δ ops/s |"
        rule = "|---|---:|---:|---:|---:|---:|---|---:|"
        if single:
            head += " ops/s change significant |"
            rule += "---|"
        w(head + " Δ p50 | Δ p99 | latency change significant |")
        w(rule + "---:|---:|---|")
        for ci, label in enumerate(labels):
            f = {k: fig(ci, op, k) for k in ("opsPerSec", "mibPerSec", "p50Ms", "p99Ms", "requestsPerOp")}
            cells = [label, f"{f['opsPerSec']:.1f}", f"{f['mibPerSec']:.1f}", f"{f['p50Ms']:.3f}",
                     f"{f['p99Ms']:.3f}", f"{f['requestsPerOp']:.2f}"]
            r = ref[ci]
            if ci == r:
                cells += ["-", "base"] + (["base"] if single else []) + ["base", "base", "base"]
            else:
                cells += [labels[r], pct(fig(r, op, "opsPerSec"), f["opsPerSec"])]
                if single:
                    cells.append(throughput(ci))
                cells += [pct(fig(r, op, "p50Ms"), f["p50Ms"]),
                          pct(fig(r, op, "p99Ms"), f["p99Ms"]), latency(ci, op)]
            w("| " + " | ".join(cells) + " |")
        w("")


if __name__ == "__main__":
    main()
