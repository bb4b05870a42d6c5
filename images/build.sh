#!/usr/bin/env bash
# Build the worker and operator images as OCI image archives, without Docker or any image tool:
#   images/build.sh [OUT_DIR]          (default: target/images)
# writes OUT_DIR/benchrun-worker-<version>.oci.tar and OUT_DIR/benchrun-operator-<version>.oci.tar
# and prints how to load them.
#
# Same build and layer as the test cluster's images (tests/cluster/image.sh): static glibc
# executables (`-C target-feature=+crt-static`, see image.sh for why not musl), debug info
# stripped, one reproducible uncompressed layer from make_image in tests/lib/cluster.sh (the
# binary, /etc/passwd+group with the distroless nonroot user 65532, /tmp, the CA bundle), which
# is then repackaged as an OCI image layout (oci-layout, index.json, blobs/sha256/...).
# images/Dockerfile.{worker,operator} build the same images with Docker.
#
# Environment:
#   IMAGE_REGISTRY   repository prefix of the image names (default: localhost)
#   IMAGE_TAG        tag (default: the crate version)
#   IMAGES_TARGET_DIR where the static build goes (default: ~/.cache/benchrun/target-static, the
#                    directory image.sh uses, so either script reuses the other's build; not
#                    $CARGO_TARGET_DIR, which the Makefile sets for the ordinary dev build)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# Only helpers and paths: sourcing starts nothing and needs no cluster.
# shellcheck source-path=SCRIPTDIR source=../tests/lib/cluster.sh
. "$HERE/../tests/lib/cluster.sh"

OUT=${1:-$REPO_ROOT/target/images}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REGISTRY=${IMAGE_REGISTRY:-localhost}
TARGET=x86_64-unknown-linux-gnu
export CARGO_TARGET_DIR=${IMAGES_TARGET_DIR:-$BENCHRUN_CACHE/target-static}
BINS=(benchrun-worker benchrun-operator)
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

for tool in file strip tar sha256sum; do
  command -v "$tool" >/dev/null || die "$tool is missing (Debian: apt-get install file binutils tar coreutils)"
done
[ -f "$CA_BUNDLE" ] || die "$CA_BUNDLE is missing (Debian: apt-get install ca-certificates)"

log "cargo build --release (static) ${BINS[*]} into $CARGO_TARGET_DIR"
IMAGES_TARGET_DIR=$CARGO_TARGET_DIR "$HERE/static-build.sh" || die "static cargo build failed"

# blob FILE DIR: store FILE as DIR/blobs/sha256/<digest>; prints "<digest> <size>".
blob() {
  local digest size
  digest=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mkdir -p "$2/blobs/sha256"
  cp "$1" "$2/blobs/sha256/$digest"
  echo "$digest $size"
}

# oci_from_docker_archive DOCKER_TAR OCI_TAR NAME TAG: repackage make_image's docker-archive
# (manifest.json, <config>.json, <layer>/layer.tar) as an OCI image layout archive.
oci_from_docker_archive() {
  local src=$1 dst=$2 name=$3 tag=$4
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/benchrun-oci.XXXXXX")
  mkdir -p "$work/in" "$work/oci"
  tar -C "$work/in" -xf "$src"
  # make_image writes exactly one image with one layer, in this fixed form.
  local cfg layer
  cfg=$(sed -n 's/.*"Config":"\([^"]*\)".*/\1/p' "$work/in/manifest.json")
  layer=$(sed -n 's/.*"Layers":\["\([^"]*\)"\].*/\1/p' "$work/in/manifest.json")
  if [ ! -f "$work/in/$cfg" ] || [ ! -f "$work/in/$layer" ]; then
    die "unexpected docker-archive layout in $src"
  fi
  local c l m
  read -r -a c <<< "$(blob "$work/in/$cfg" "$work/oci")"
  read -r -a l <<< "$(blob "$work/in/$layer" "$work/oci")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "${c[0]}" "${c[1]}" "${l[0]}" "${l[1]}" > "$work/manifest.json"
  read -r -a m <<< "$(blob "$work/manifest.json" "$work/oci")"
  # ref.name is the tag (OCI convention, what `skopeo copy oci-archive:FILE:TAG` selects);
  # io.containerd.image.name is the full name `ctr images import` gives the image.
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s:%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "${m[0]}" "${m[1]}" "$name" "$tag" "$tag" > "$work/oci/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci/oci-layout"
  (cd "$work/oci" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' --no-recursion -cf "$dst.$$.tmp" -T -)
  mv "$dst.$$.tmp" "$dst"
  rm -rf "$work"
}

refs=()
for b in "${BINS[@]}"; do
  bin=$CARGO_TARGET_DIR/$TARGET/release/$b
  [ -x "$bin" ] || die "$bin was not built"
  kind=$(file -L "$bin")
  grep -Eq 'static(ally|-pie) linked' <<< "$kind" || die "$bin is not statically linked: $kind"
  version=$(cd "$REPO_ROOT" && cargo pkgid -p "$b" | sed 's/.*[#@]//')
  tag=${IMAGE_TAG:-$version}
  name=$REGISTRY/$b
  work=$(mktemp -d "${TMPDIR:-/tmp}/benchrun-img.XXXXXX")
  # Copy at once: the shared target directory may be rebuilt by another checkout's image.sh.
  strip --strip-debug -o "$work/$b" "$bin"
  make_image "$work/docker.tar" "$name:$tag" "$work/$b" "/$b" "$CA_BUNDLE:$CA_BUNDLE"
  oci_from_docker_archive "$work/docker.tar" "$OUT/$b-$tag.oci.tar" "$name" "$tag"
  rm -rf "$work"
  log "$OUT/$b-$tag.oci.tar: $name:$tag ($(du -h "$OUT/$b-$tag.oci.tar" | cut -f1))"
  refs+=("$b-$tag.oci.tar=$name:$tag")
done

cat <<EOF

Load an archive (image names above) with one of:
  containerd:  ctr -n k8s.io images import FILE.oci.tar
  kind:        kind load image-archive FILE.oci.tar
  a registry:  skopeo copy oci-archive:FILE.oci.tar docker://REGISTRY/NAME:TAG
  podman:      podman load -i FILE.oci.tar
Pods then use the image name with imagePullPolicy: IfNotPresent (or Never).
Archives:
EOF
for r in "${refs[@]}"; do echo "  $OUT/${r%%=*}  ->  ${r#*=}"; done
