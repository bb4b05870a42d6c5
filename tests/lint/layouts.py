#!/usr/bin/env python3
"""Every crate's map is true: the `# Layout` section of each crate root's docs names only
modules that exist (or that the root re-exports), and every module the root declares is named
there, so a reader who starts from the map finds every module and no ghost.

    python3 tests/lint/layouts.py ROOT.rs ...

Test-only modules (`#[cfg(test)] mod x;`) are left out. Exits 1 naming each mismatch."""
import re
import sys


def layout_entries(text):
    """The module names the `# Layout` section lists (`- [`name`]...` lines)."""
    entries, inside = [], False
    for line in text.splitlines():
        if not line.startswith("//!"):
            continue
        if line.strip() == "//! # Layout":
            inside = True
            continue
        if inside and line.startswith("//! #"):
            break
        if inside and line.startswith("//! - ["):
            # Every module a line links (`[`metrics`] and [`server`]: ...`).
            entries += re.findall(r"\[`([a-z_][a-z0-9_]*)`\]", line)
    return entries


def declared_modules(text):
    """Modules the root declares, without the test-only ones."""
    mods, test_only = [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#[cfg(test)]"):
            test_only = True
            continue
        m = re.match(r"(?:pub(?:\([a-z]+\))? )?mod ([a-z_][a-z0-9_]*);", s)
        if m and not test_only:
            mods.append(m.group(1))
        test_only = False
    return mods


def reexported(text):
    """Names the root re-exports as modules (`pub use other::{a, b};`)."""
    names = set()
    for m in re.finditer(r"^pub use [a-z_:]+::\{([^}]*)\};", text, re.M):
        names.update(n.strip() for n in m.group(1).split(","))
    return names


def check(path):
    text = open(path, encoding="utf-8").read()
    listed, mods = layout_entries(text), declared_modules(text)
    if not listed:
        return [f"{path}: no `# Layout` section with `- [`module`]: ...` lines"]
    known = set(mods) | reexported(text)
    errs = [f"{path}: the Layout names `{n}`, which is no module of the crate" for n in listed if n not in known]
    errs += [f"{path}: module `{m}` is missing from the Layout" for m in mods if m not in listed]
    return errs


def self_test():
    text = "//! # Layout\n//! - [`a`] and [`c`]: x\n//! - [`ghost`]: y\n\npub mod a;\nmod b;\n#[cfg(test)]\nmod t;\n"
    assert layout_entries(text) == ["a", "c", "ghost"], layout_entries(text)
    assert declared_modules(text) == ["a", "b"], declared_modules(text)


if __name__ == "__main__":
    self_test()
    problems = [e for p in sys.argv[1:] for e in check(p)]
    for e in problems:
        print(f"FAIL: {e}")
    if problems:
        sys.exit(1)
    print(f"ok: {len(sys.argv) - 1} crate maps name every module and no other")
