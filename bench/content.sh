#!/usr/bin/env bash
# The data content check at its full size (20,000 x 1 MiB objects and a 256 MiB block file):
# what benchrun writes, read back and hashed.
#
#   bench/content.sh                    OBJECTS=20000 BLOCK_MIB=256 to change
#
# Runs worker/tests/data_content.rs's two content tests in a release build, one after the
# other, at OBJECTS x 1 MiB dataset objects (CI runs 1,000), 100 PUTs of 1 MiB and a
# BLOCK_MIB block file laid out and then overwritten by random 4 KiB..64 KiB writes, 4,000
# per 64 MiB (CI runs 64 MiB): once with the default data, where every 512 B sector and
# 4 KiB block must be distinct, and once with dedupRatio 2 and compressRatio 3, where the
# 4 KiB blocks' ratio and gzip's must be within 5% of what was asked. Prints, for each, the
# distinct and total 512 B sectors and 4 KiB blocks and the ratios measured; the tests'
# own asserts decide pass or fail. Needs the written bytes free where the tests write (the
# build's target directory, tmp/), once: each test removes its files when it ends. Nothing
# is timed: the machine may be busy.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
OBJECTS=${OBJECTS:-20000}
BLOCK_MIB=${BLOCK_MIB:-256}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
# Where the tests write (cargo's CARGO_TARGET_TMPDIR), and what one test needs there.
TMP=$CARGO_TARGET_DIR/tmp
mkdir -p "$TMP"
need=$(((OBJECTS + 100 + BLOCK_MIB) * 1024 * 1024))
free=$(df --output=avail -B1 "$TMP" | tail -1)
if [ "$free" -lt $((need + need / 10)) ]; then
  echo "$TMP has $((free >> 30)) GiB free; a test writes $((need >> 30)) GiB: free some, or lower OBJECTS" >&2
  exit 1
fi
echo "objects: $OBJECTS x 1 MiB + 100 PUTs of 1 MiB; block file: $BLOCK_MIB MiB; writing under $TMP ($((free >> 30)) GiB free)"
cd "$REPO_ROOT"
BENCHRUN_DATA_CONTENT_OBJECTS=$OBJECTS BENCHRUN_DATA_CONTENT_BLOCK_MIB=$BLOCK_MIB \
  cargo test --release -p benchrun-worker --test data_content -- --test-threads=1 --nocapture \
  by_default_no_sector_or_block_written_repeats the_asked_dedup_and_compression_ratios_are_measured 2>&1 |
  grep -E '^(defaults|dedupRatio)|^test |test result|panicked|assert'
