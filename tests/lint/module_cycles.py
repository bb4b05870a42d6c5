#!/usr/bin/env python3
"""Fail when the top-level modules of a crate depend on each other in a cycle.

A module is `src/X.rs` or `src/X/` (with its submodules); it depends on `Y` when any of its
files names `crate::Y` (in a `use` or a path). `lib.rs` and `main.rs` (the crate roots, which
name every module) are left out. Prints every cycle found, as `a -> b -> a`, and exits 1.

    tests/lint/module_cycles.py api/src worker/src operator/src
"""
import re
import sys
from pathlib import Path

REF = re.compile(r"\bcrate::(?:\{([^}]*)\}|(\w+))")


def modules(src: Path) -> dict:
    mods = {}
    for p in sorted(src.iterdir()):
        if p.is_file() and p.suffix == ".rs" and p.stem not in ("lib", "main"):
            mods[p.stem] = [p]
        elif p.is_dir():
            mods[p.name] = sorted(p.rglob("*.rs"))
    return mods


def deps(files, names) -> set:
    out = set()
    for f in files:
        text = f.read_text()
        # Strip comments, so a doc link or a mention in prose is not a dependency.
        text = re.sub(r"//[^\n]*", "", text)
        for group, single in REF.findall(text):
            for name in ([single] if single else re.findall(r"\b(\w+)\b", group)):
                if name in names:
                    out.add(name)
    return out


def cycles(graph: dict) -> list:
    found, seen = [], set()

    def walk(node, path):
        for nxt in sorted(graph[node]):
            if nxt == node:
                continue
            if nxt in path:
                cyc = path[path.index(nxt):] + [nxt]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc)
            elif len(path) < len(graph):
                walk(nxt, path + [nxt])

    for n in sorted(graph):
        walk(n, [n])
    return found


def main() -> int:
    bad = 0
    for src in map(Path, sys.argv[1:] or ["worker/src", "operator/src"]):
        mods = modules(src)
        graph = {m: deps(files, set(mods)) - {m} for m, files in mods.items()}
        for c in cycles(graph):
            print(f"FAIL: {src}: module cycle {' -> '.join(c)}")
            bad += 1
        if not bad:
            print(f"ok: {src}: {len(mods)} modules, no cycles")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
