#!/usr/bin/env python3
"""Fail when a test stage calls a tool that no script installs.

`make test` must pass on a fresh Debian 12 machine with nothing installed by hand, so every
external command the stages run (from shell scripts, the Makefile and Rust tests'
`Command::new("...")`) must be either
  - listed in tests/deps.txt with the Debian package that provides it (tests/lib/deps.sh
    installs the packages of a stage before it runs),
  - built by the project's own scripts into the cache (BUILT below), or
  - part of a Debian 12 base system or of this machine kind's toolchains (BASE below).

The shell parsing is deliberately simple (first word of each simple command, quoted text and
here-documents removed), so it reads the scripts as they are written here; a new construct it
misreads shows up as an unknown tool, which is the safe direction.

usage: tests/lint/tools.py REPO_ROOT        (exit 1 and one line per unknown tool)
       tests/lint/tools.py REPO_ROOT --list (every tool found, with where)
"""
import os
import re
import sys

# Essential and required packages of a Debian 12 base system (coreutils, bash, dash, grep, sed,
# findutils, tar, gzip, mawk, util-linux's essential part, procps, hostname...) and the
# toolchains this machine kind is given before a session starts (Rust by rustup, Go, Python).
BASE = set("""
bash sh env cat cp mv rm ln mkdir rmdir touch chmod chown ls head tail wc sort uniq cut tr tee
date sleep true false echo printf test expr seq basename dirname readlink realpath mktemp stat
du df id whoami uname nproc timeout kill xargs find grep egrep sed awk tar gzip gunzip zcat
sha256sum md5sum cmp diff od dd sync yes nohup nice setsid flock pgrep pkill ps sum comm
fold split truncate renice logger hostname getent install paste tac rev numfmt fallocate mountpoint mount umount
losetup blockdev findmnt lsblk wipefs
cargo rustc go python3 pip3 git make node npm base64 apt-get dpkg
""".split())

# Built from package registries by the project's own scripts into the cache.
BUILT = set("""
kubectl kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy etcd coredns
helm minio mc versitygw azurite fake-gcs-server kwok kwokctl benchrun-worker benchrun-operator
kubectl-benchrun
""".split())

SHELL_WORDS = set("""
if then else elif fi for while until do done case esac in function select time
{ } [ [[ ]] ] ! ( ) ;; : . source export local declare readonly typeset unset set shift return
exit break continue trap wait eval exec cd pwd pushd popd read let shopt alias type hash command
builtin getopts umask ulimit printf echo test true false jobs disown bg fg caller mapfile times
readarray compgen complete
""".split())


def strip_quotes(line):
    out, i, q = [], 0, None
    while i < len(line):
        c = line[i]
        if q:
            if c == "\\" and q == '"':
                i += 2
                continue
            if c == q:
                q = None
                out.append("Q")
        elif c in "'\"":
            q = c
        elif c == "\\":
            out.append(line[i:i + 2])
            i += 1
        elif c == "#" and (not out or out[-1][-1:] in " \t;"):
            break
        else:
            out.append(c)
        i += 1
    return "".join(out), q


def shell_commands(text):
    """(line number, command word) for each simple command of a shell script."""
    # Continuation lines are one command.
    lines = re.sub(r"\\\n", " ", text).split("\n")
    heredoc = None
    quote = None
    for n, raw in enumerate(lines, 1):
        if heredoc:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        if quote:  # inside a multi-line quoted string: skip until it closes
            if quote in raw:
                raw = raw[raw.index(quote) + 1:]
                quote = None
            else:
                continue
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]+)['\"]?", raw)
        line, quote = strip_quotes(raw)
        # Parameter expansions and arithmetic are not commands; nor is a `case` pattern.
        line = re.sub(r"\$\{[^}]*\}", "V", line)
        line = re.sub(r"\{[A-Za-z_]+\}[<>]", "V>", line)  # exec {fd}>file
        while re.search(r"\$?\(\([^()]*\)\)", line):
            line = re.sub(r"\$?\(\([^()]*\)\)", "V", line)
        line = re.sub(r"^\s*[^\s()$]+\)(\s|$)", " ", line)
        if m and "<<<" not in raw:
            heredoc = m.group(1)
        # Split into simple commands.
        for part in re.split(r"\|\||&&|[;|&(){}`]|\$\(|\bthen\b|\bdo\b|\belse\b", line):
            words = part.split()
            while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", words[0])
                             or words[0] in ("sudo", "nice", "nohup", "setsid", "time",
                                             "exec", "command", "builtin", "timeout", "env",
                                             "!", "if", "elif", "while", "until", "then", "do", "else")
                             or re.match(r"^-", words[0]) or re.match(r"^\d+[smh]?$", words[0])):
                words = words[1:]
            if words:
                yield n, words[0]


def functions(text):
    return set(re.findall(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*\(\)", text, re.M))


def main():
    root = sys.argv[1]
    listing = "--list" in sys.argv
    declared = {}
    for line in open(os.path.join(root, "tests/deps.txt")):
        line = line.split("#", 1)[0].split()
        if line:
            declared[line[0]] = line[1]
    scripts = []
    for d in ("tests", "images", ".ci"):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            if ".state" in dirpath:
                continue
            for f in files:
                p = os.path.join(dirpath, f)
                if f.endswith(".sh") or f == "run":
                    scripts.append(p)
    texts = {p: open(p).read() for p in scripts}
    funcs = set().union(*(functions(t) for t in texts.values()))
    found = {}
    for p, t in texts.items():
        for n, word in shell_commands(t):
            if "$" in word or "/" in word or word in SHELL_WORDS or word in funcs or word in "QV":
                continue
            if not re.match(r"^[A-Za-z][A-Za-z0-9_.+-]*$", word):
                continue
            found.setdefault(word, []).append(f"{os.path.relpath(p, root)}:{n}")
    # The Makefile's recipes are shell too.
    mk = open(os.path.join(root, "Makefile")).read()
    for n, line in enumerate(mk.split("\n"), 1):
        if line.startswith("\t"):
            line = line[1:]
            while re.search(r"\$\([^()]*\)", line):  # make's variables and functions
                line = re.sub(r"\$\([^()]*\)", "V", line)
            for _, word in shell_commands(line):
                if "$" in word or "/" in word or word in SHELL_WORDS or word in funcs or word in "QV":
                    continue
                if re.match(r"^[A-Za-z][A-Za-z0-9_.+-]*$", word):
                    found.setdefault(word, []).append(f"Makefile:{n}")
    for dirpath, _, files in os.walk(root):
        if "/target" in dirpath or "/.git" in dirpath or ".state" in dirpath:
            continue
        for f in files:
            if f.endswith(".rs"):
                p = os.path.join(dirpath, f)
                for n, line in enumerate(open(p), 1):
                    for word in re.findall(r'Command::new\("([^"]+)"\)', line):
                        found.setdefault(word, []).append(f"{os.path.relpath(p, root)}:{n}")
    unknown = 0
    for word in sorted(found):
        where = found[word]
        if listing:
            kind = ("deps.txt" if word in declared else "base" if word in BASE
                    else "built" if word in BUILT else "UNKNOWN")
            print(f"{word:28} {kind:9} {where[0]} (+{len(where) - 1})")
            continue
        if word in declared or word in BASE or word in BUILT:
            continue
        unknown += 1
        print(f"{where[0]}: `{word}` is called but no script installs it: add it to tests/deps.txt "
              f"with its Debian package (or to BASE/BUILT in {sys.argv[0]} if it truly is)")
    if not listing and unknown:
        sys.exit(1)


if __name__ == "__main__":
    main()
