#!/usr/bin/env python3
"""Fail when the operator sends a delete anywhere but its one deletion module.

The operator deletes only what it has read and found owned by the run (or the schedule), by
that object's UID: `operator/src/children.rs` does it (`delete_owned`, `delete_if_ours`,
`delete_itself`), and nothing else in `operator/src` may call kube's `delete` or
`delete_collection` (nor kube's raw `Request::delete`). Comments are left out; a string that
contains such a call counts (the safe direction).

Each run first checks its own patterns on examples (a call it must find, one it must not), so
a pattern broken by an edit fails here rather than letting every call through.

usage: tests/lint/deletes.py REPO_ROOT   (exit 1 and one `file:line: ...` per call)
"""
import re
import sys
from pathlib import Path

SRC = "operator/src"
# The one module allowed to send deletes.
ALLOWED = {"operator/src/children.rs"}

# `.delete(`, `::delete(` (also `::<K>` turbofish forms: `Api::delete`, kube's raw
# `Request::delete`), `delete_collection` in any form. A method of the operator's own named
# `delete` would match too: name it for what it deletes.
CALL = re.compile(
    r"(?:\.|::)\s*delete\s*(?:::\s*<[^>]*>\s*)?\("
    r"|\bdelete_collection\b"
)

MUST_FIND = [
    "let _ = pods.delete(&name, &dp).await;",
    "api.delete_collection(&dp, &lp).await?;",
    "Api::<Pod>::delete(&api, name, &dp)",
    ".delete ( name, &dp)",
    "Request::new(url).delete(name, &dp)",
    "let req = Request::delete(&url);",
    "let call = Api::delete_collection;",
]
MUST_PASS = [
    "// pods.delete(&name, &dp) in a comment",
    "delete_owned(&pods, p, run, dp).await",
    "self.delete_pod(pod, timeout).await?;",
    "fn deleted(&self) -> bool {",
    "map.remove(&name);",
    "Method::DELETE => \"delete\",",
]


def code(line):
    """The line without its `//` comment (not inside a string)."""
    out, quoted, i = [], False, 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quoted:
            out.append(line[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            break
        out.append(c)
        i += 1
    return "".join(out)


def calls(text):
    """(line number, line) of each delete call in Rust source `text`."""
    return [(n, line.strip()) for n, line in enumerate(text.split("\n"), 1)
            if CALL.search(code(line))]


def self_check():
    wrong = [s for s in MUST_FIND if not calls(s)] + [s for s in MUST_PASS if calls(s)]
    for s in wrong:
        print(f"tests/lint/deletes.py: its pattern misreads: {s}")
    return not wrong


def main():
    root = Path(sys.argv[1])
    if not self_check():
        sys.exit(1)
    bad = 0
    for path in sorted((root / SRC).rglob("*.rs")):
        rel = path.relative_to(root).as_posix()
        if rel in ALLOWED:
            continue
        for n, line in calls(path.read_text()):
            bad += 1
            print(f"{rel}:{n}: a delete outside {', '.join(sorted(ALLOWED))}: {line}\n"
                  f"    delete through children::delete_owned (an object read, owned by the "
                  f"run's or schedule's UID, deleted by its own UID)")
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
