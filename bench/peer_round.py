#!/usr/bin/env python3
"""One round of one tool in bench/object.sh's peer comparison, measured from outside.

    peer_round.py OBJECTS OBJECT_BYTES SUMMARY|- CMDS.json

CMDS.json is a list of argument vectors, started together (one per stream, or one process
for a tool that has its own concurrency) with standard output to /dev/null, so every tool
discards what it reads; the round ends when the last one exits. Every tool is measured the
same way: wall time from the first spawn to the last exit (start-up and listing included)
and the CPU of the children (getrusage RUSAGE_CHILDREN before and after). When SUMMARY is a
benchrun summary written by the round, its own figures for the measured stage are added.

Prints one line: wall-ops/s wall-MiB/s cpu-s/GiB own-ops/s own-cpu-s/GiB p50 p99 req/op
errors ("-" where a tool has no such figure). With OBJECTS 0 (a tool's start-up alone) the
third figure is the round's CPU seconds, marked "s". Exits non-zero when a command failed.
"""
import json
import resource
import subprocess
import sys
import time


def children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def own_figures(path):
    """benchrun's figures of its measured stage: ops/s, CPU-s/GiB, p50, p99, req/op, errors."""
    s = json.load(open(path))
    (op, r), = s["report"].items()
    gib = s["ops"][op]["bytes"] / 2**30
    p = s["process"]
    cpu = p["cpuUserSeconds"] + p["cpuSystemSeconds"]
    return [f'{r["opsPerSec"]:.0f}', f"{cpu / gib if gib else 0:.2f}", f'{r["p50Ms"]:.1f}',
            f'{r["p99Ms"]:.1f}', f'{r["requestsPerOp"]:.2f}', str(r["errors"])]


def main():
    objects, size, summary, cmds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    argvs = json.load(open(cmds))
    cpu0 = children_cpu()
    t0 = time.monotonic()
    procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for a in argvs]
    failed = []
    for a, p in zip(argvs, procs):
        _, err = p.communicate()
        if p.returncode != 0:
            failed.append(f"{a[0]} exited {p.returncode}: {err.decode(errors='replace')[-400:]}")
    wall = time.monotonic() - t0
    cpu = children_cpu() - cpu0
    if failed:
        sys.exit("\n".join(failed))
    if objects == 0:  # start-up alone: the CPU seconds of the round, not per GiB
        print(f"- - {cpu:.2f}s - - - - - 0")
        return
    gib = objects * size / 2**30
    row = [f"{objects / wall:.0f}", f"{objects * size / 2**20 / wall:.0f}", f"{cpu / gib:.2f}"]
    row += own_figures(summary) if summary != "-" else ["-", "-", "-", "-", "-", "0"]
    print(" ".join(row))


if __name__ == "__main__":
    main()
