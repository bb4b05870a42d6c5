#!/usr/bin/env bash
# The images' executables: `cargo build --release` of the worker and the operator as static glibc
# executables into $IMAGES_TARGET_DIR (default ~/.cache/benchrun/target-static), the one build
# images/build.sh (OCI archives), tests/cluster/image.sh (the test cluster's images) and the
# background prefetch of `make test` share. Prints nothing but cargo's output.
# IMAGES_PROFILE picks another cargo profile (default release): the test cluster's images use
# `test-image` (Cargo.toml says why); the executables are then under .../<profile>/.
#
# Static glibc, not musl: the rustup musl target would have to be downloaded from
# static.rust-lang.org, which this machine (and CI) cannot reach; only package registries are
# reachable and Debian ships no Rust std for musl. `-C target-feature=+crt-static` with the gnu
# target gives a fully static executable. glibc >= 2.34 has its files and dns NSS backends inside
# libc itself, so hostname lookups (/etc/hosts, DNS) work in an image with no shared libraries.
# The explicit --target keeps RUSTFLAGS off build scripts and proc macros, which must stay
# dynamic, and the separate target dir keeps these flags from invalidating the dev build.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CARGO_TARGET_DIR=${IMAGES_TARGET_DIR:-${BENCHRUN_CACHE:-$HOME/.cache/benchrun}/target-static}
cd "$REPO_ROOT"
RUSTFLAGS='-C target-feature=+crt-static' \
  exec cargo build --profile "${IMAGES_PROFILE:-release}" --target x86_64-unknown-linux-gnu \
  -p benchrun-worker -p benchrun-operator
