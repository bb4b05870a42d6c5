#!/usr/bin/env python3
"""Every link and file reference of the README and docs resolves inside the repository.

usage: links.py REPO_ROOT

Checks README.md, BENCHMARKS.md and every Markdown file under docs/ (generated reports
included), and the chart's values.yaml and NOTES.txt:
- each Markdown link `[text](target)` to a file: the file exists inside the repository, and a
  `#fragment` names a heading of the target Markdown file;
- each code span naming a repository path (`docs/X.md`, `operator/src/reconcile/mod.rs`,
  `examples/sweep-*.yaml`, `images/Dockerfile.{worker,operator}`): it exists;
- no reference a reader of the repository cannot follow: "issue 12", "design report(s)
  000-004", the shared folder beside a checkout.
Links to web pages are not fetched (the check needs no network). Exits 1 listing each problem.
"""

import glob
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]\n]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*(```|~~~)")
# Words a reader outside the project cannot follow.
UNFOLLOWABLE = [
    (re.compile(r"\bissues? #?\d+", re.I), "an issue number (say the thing itself)"),
    (re.compile(r"\bdesign reports?\b", re.I), "the design reports (not in the repository)"),
    (re.compile(r"\b(?<!study )reports? \d{3}\b", re.I), "a design report by number (not in the repository)"),
    (re.compile(r"shared/design\.md|\.\./shared/"), "the shared folder beside a checkout"),
]


def slug(heading):
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    out, seen = set(), {}
    in_fence = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m and not in_fence:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
            for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                out.add(a)
    return out


def expand(ref):
    """`a/{b,c}.md` -> [`a/b.md`, `a/c.md`]."""
    m = re.search(r"\{([^{}]*)\}", ref)
    if not m:
        return [ref]
    return [x for alt in m.group(1).split(",") for x in expand(ref[: m.start()] + alt + ref[m.end():])]


def looks_like_path(span, tops):
    if " " in span or "://" in span or span.startswith(("-", "$", "~")) or "<" in span:
        return False
    if "=" in span or ":" in span or ".." in span or "/.state" in span or "NN" in span:
        return False  # an assignment, a URI, or a path made at run time (tests/.state)
    first = span.split("/", 1)[0]
    return "/" in span and first in tops


def exists(root, ref):
    paths = expand(ref)
    for p in paths:
        full = os.path.join(root, p)
        if any(c in p for c in "*?["):
            if not glob.glob(full):
                return False
        elif not os.path.exists(full):
            return False
    return True


def check_file(root, path, tops, problems):
    rel = os.path.relpath(path, root)
    base = os.path.dirname(path)
    in_fence = False
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for no, line in enumerate(lines, 1):
        where = f"{rel}:{no}"
        for rx, why in UNFOLLOWABLE:
            if rx.search(line):
                problems.append(f"{where}: refers to {why}: {line.strip()[:100]}")
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not path.endswith(".md"):
            continue
        if not in_fence:
            for m in LINK.finditer(line):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # a web page or mail address: not fetched
                file_part, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
                if os.path.relpath(dest, root).startswith(".."):
                    problems.append(f"{where}: link leaves the repository: {target}")
                    continue
                if not os.path.exists(dest):
                    problems.append(f"{where}: link to a missing file: {target}")
                    continue
                if frag and dest.endswith(".md") and frag not in anchors(dest):
                    problems.append(f"{where}: no heading #{frag} in {os.path.relpath(dest, root)}")
        for m in CODE.finditer(line):
            span = m.group(1).strip().rstrip(".,;")
            if looks_like_path(span, tops) and not exists(root, span):
                problems.append(f"{where}: names a path that does not exist: {span}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    # Top-level directories of the repository: a code span starting with one is a path. Build
    # output (target/) is left out: it exists only after a build.
    tops = {e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e))}
    tops -= {"target", ".git"}
    files = [os.path.join(root, "README.md"), os.path.join(root, "BENCHMARKS.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    files += [
        os.path.join(root, "charts", "benchrun", "values.yaml"),
        os.path.join(root, "charts", "benchrun", "templates", "NOTES.txt"),
    ]
    problems = []
    for f in files:
        if os.path.exists(f):
            check_file(root, f, tops, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} references do not resolve inside the repository", file=sys.stderr)
        return 1
    print(f"links: {len(files)} files, every link and path reference resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
