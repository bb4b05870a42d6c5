#!/usr/bin/env bash
# `make krew`: the krew archive of kubectl-benchrun (a static binary, kubectl_complete-benchrun
# and LICENSE) and its manifest with the archive's real sha256, both in target/krew/:
#   kubectl krew install --manifest=target/krew/benchrun.yaml --archive=target/krew/<archive>
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/target/krew"
version=$(cargo pkgid --manifest-path "$root/kubectl-benchrun/Cargo.toml" | sed 's/.*[#@]//')
[ "$(uname -m)" = x86_64 ] || { echo "the manifest names an x86_64 archive; this machine is $(uname -m)" >&2; exit 1; }
target=x86_64-unknown-linux-gnu
# Static, as the images' binaries (images/static-build.sh), so it runs on any Linux.
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --locked --release --target "$target" -p kubectl-benchrun
bin="${CARGO_TARGET_DIR:-$root/target}/$target/release/kubectl-benchrun"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/kubectl-benchrun"
install -m 0755 "$root/kubectl-benchrun/kubectl_complete-benchrun" "$stage/"
install -m 0644 "$root/LICENSE" "$stage/"
mkdir -p "$out"
archive="$out/kubectl-benchrun-$version-x86_64-linux.tar.gz"
# Reproducible: fixed order, owner and times.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -cf - . | gzip -n > "$archive"
sha=$(sha256sum "$archive" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@SHA256@/$sha/" \
  "$root/kubectl-benchrun/krew/benchrun.yaml.in" > "$out/benchrun.yaml"
echo "$archive"
echo "$out/benchrun.yaml (sha256 $sha)"
