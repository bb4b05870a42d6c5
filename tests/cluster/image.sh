#!/usr/bin/env bash
# Build the workspace binaries as static executables, turn each into a one-layer image and import
# it into the containerd of BOTH test nodes (no registry, no Docker), then write the tags to
# tests/.state/images.env (WORKER_IMAGE=..., OPERATOR_IMAGE=...). Pods use them with
# imagePullPolicy: Never. Needs a running cluster (tests/cluster/up.sh).
#
# Tag: localhost/benchrun-<bin>:<crate version>-<first 12 hex of the binary's sha256>. The
# content hash changes whenever the code does, so a pod can never run a stale image under a
# reused tag (the kubelet never re-pulls with Never).
#
# The executables are static glibc builds from images/static-build.sh (why static, why not musl:
# see there), shared with images/build.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cluster.sh"
mkdir -p "$LOG_DIR" "$IMAGE_CACHE" "$STATE_DIR/images"
cluster_lock
apt_install file binutils ca-certificates >> "$LOG_DIR/apt.log" 2>&1 || die "apt-get install failed" apt
for n in $NODES; do
  alive "containerd-$n" || die "containerd of node $n is not running; run tests/cluster/up.sh first"
done

TARGET=x86_64-unknown-linux-gnu
export CARGO_TARGET_DIR=$BENCHRUN_CACHE/target-static
# The release profile at opt-level 1 (Cargo.toml's `test-image`: why), as the prefetch builds it.
export IMAGES_PROFILE=test-image
BINS=(benchrun-worker benchrun-operator)

log "cargo build --profile $IMAGES_PROFILE (static) of ${BINS[*]}; log $LOG_DIR/image-build.log"
if ! IMAGES_TARGET_DIR=$CARGO_TARGET_DIR "$REPO_ROOT/images/static-build.sh" > "$LOG_DIR/image-build.log" 2>&1; then
  die "static cargo build failed" image-build
fi

: > "$IMAGES_ENV.tmp"
for b in "${BINS[@]}"; do
  bin=$CARGO_TARGET_DIR/$TARGET/$IMAGES_PROFILE/$b
  [ -x "$bin" ] || die "$bin was not built"
  # A dynamic executable would fail in the image with a bare "no such file or directory".
  kind=$(file -L "$bin")
  grep -Eq 'static(ally|-pie) linked' <<< "$kind" || die "$bin is not statically linked: $kind"
  # The release profile keeps line tables for backtraces; in the image they would only triple
  # its size and the import time. Symbols stay, so panics still name functions.
  stripped=$STATE_DIR/images/$b
  strip --strip-debug -o "$stripped.tmp" "$bin" && mv "$stripped.tmp" "$stripped"
  bin=$stripped
  version=$(cd "$REPO_ROOT" && cargo pkgid -p "$b" | sed 's/.*[#@]//')
  ref=localhost/$b:$version-$(sha256sum "$bin" | cut -c1-12)
  tar=$IMAGE_CACHE/${b}_${ref##*:}.tar
  # CA bundle for https object-store endpoints (what distroless/static ships as well).
  [ -f "$tar" ] || make_image "$tar" "$ref" "$bin" "/$b" /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt
  for n in $NODES; do
    import_image "$n" "$tar" "$ref"
    # Older builds of this binary are never used again; drop their names so containerd can
    # collect them (a running container keeps its snapshot regardless).
    for old in $(ctr_ "$n" images ls -q | grep "^localhost/$b:" | grep -vxF "$ref"); do
      ctr_ "$n" images rm "$old" >/dev/null 2>&1 || true
    done
  done
  log "$ref ($(du -h "$tar" | cut -f1)) imported on: $NODES"
  var=$(echo "${b#benchrun-}" | tr a-z A-Z)_IMAGE
  echo "$var=$ref" >> "$IMAGES_ENV.tmp"
done
# Older tarballs are not needed by this checkout; the age limit spares another checkout that
# may be importing its own build right now (the cache is shared).
for b in "${BINS[@]}"; do
  cur=$(grep -i "^$(echo "${b#benchrun-}" | tr a-z A-Z)_IMAGE=" "$IMAGES_ENV.tmp" | sed 's/.*://')
  find "$IMAGE_CACHE" -maxdepth 1 -name "${b}_*.tar" ! -name "${b}_${cur}.tar" -mmin +60 -delete
done
# The CRI plugin also names every image by its ID ("sha256:..."); once the tag is gone that
# name is all that keeps an old build's content alive.
for n in $NODES; do
  ctr_ "$n" images ls | awk 'NR>1 && $1 !~ /^sha256:/ {print $3}' | sort -u > "$STATE_DIR/.named-digests"
  ctr_ "$n" images ls | awk 'NR>1 && $1 ~ /^sha256:/ {print $1, $3}' | while read -r id digest; do
    grep -qxF "$digest" "$STATE_DIR/.named-digests" || ctr_ "$n" images rm "$id" >/dev/null 2>&1 || true
  done
done
rm -f "$STATE_DIR/.named-digests"
mv "$IMAGES_ENV.tmp" "$IMAGES_ENV"
cat "$IMAGES_ENV"
