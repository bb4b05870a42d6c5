#!/usr/bin/env python3
"""Tests that need the test cluster or the storage servers are `#[ignore]`d with the command that
starts them, so a Rust user's plain `cargo test` passes and lists them as ignored with the reason
instead of failing far from the cause; `make storage` and `make cluster` run them with
`--include-ignored` after starting the servers.

usage: tests/lint/server_tests.py REPO_ROOT          check (make lint): exit 1 naming each test
                                                     without its ignore
       tests/lint/server_tests.py REPO_ROOT --fix    add the missing attributes
"""
import glob
import os
import re
import sys

# Test files by what they need, and the ignore reason each gets.
NEEDS = [
    ("worker/tests/object_*.rs",
     'needs the storage servers: `make storage`, or tests/storage/up.sh then `cargo test -- --include-ignored`'),
    ("operator/tests/cluster*.rs",
     'needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`'),
    ("kubectl-benchrun/tests/cluster*.rs",
     'needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`'),
    ("tests/support/tests/cluster*.rs",
     'needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`'),
]
TEST_ATTR = re.compile(r"^(\s*)#\[(tokio::)?test(\(.*\))?\]\s*$")


def process(path, reason, fix):
    lines = open(path).read().split("\n")
    out, missing = [], []
    for i, line in enumerate(lines):
        m = TEST_ATTR.match(line)
        if m:
            # The attributes between this one and the fn.
            j, attrs = i + 1, []
            while j < len(lines) and lines[j].strip().startswith("#["):
                attrs.append(lines[j]); j += 1
            prev = [l for l in out[-3:] if l.strip().startswith("#[")]
            if not any("#[ignore" in a for a in attrs + prev):
                missing.append(i + 1)
                if fix:
                    out.append(f'{m.group(1)}#[ignore = "{reason}"]')
        out.append(line)
    if fix and missing:
        open(path, "w").write("\n".join(out))
    return missing


def main():
    root, fix = sys.argv[1], "--fix" in sys.argv
    bad = 0
    for pattern, reason in NEEDS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            for n in process(path, reason, fix):
                bad += 1
                if not fix:
                    print(f"{os.path.relpath(path, root)}:{n}: a test that needs servers without "
                          f"#[ignore = \"{reason}\"] (tests/lint/server_tests.py --fix adds it)")
    if bad and not fix:
        sys.exit(1)
    if fix:
        print(f"added {bad} ignore attributes")


if __name__ == "__main__":
    main()
