#!/usr/bin/env bash
# The worker's peak RSS with a dataset of N objects: what holding the dataset costs per object
# (docs/ARCHITECTURE.md, "Memory"). Not part of `make test`: it writes N files.
#
#   bench/dataset_memory.sh N [WORKER]     N objects (e.g. 10000000); WORKER defaults to the
#                                          release build of this checkout
#   FS=tmpfs bench/dataset_memory.sh N     the objects on a tmpfs instead (creating 10 million
#                                          files on ext4 takes this VM most of an hour; a
#                                          tmpfs holds their inodes in about 1 KB of RAM each)
#
# The dataset is N empty files written by the prepare stage (`dataset.prepare: true`, size 0,
# so the cost measured is the engine's, not the data's) on a scratch ext4 image with an inode
# per object, loop-mounted (needs root), then a 2 s GET run over it; the same with 1,000
# objects gives the baseline. Peak RSS is the kernel's (wait4's ru_maxrss of the worker
# process). Prints both peaks and (peak(N) - peak(1000)) / N bytes per object.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
N=${1:?usage: bench/dataset_memory.sh N [WORKER]}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
if [ -n "${2:-}" ]; then BIN=$2; else
  cargo build --release -q -p benchrun-worker
  BIN=$CARGO_TARGET_DIR/release/benchrun-worker
fi
[ "$(id -u)" = 0 ] || { echo "needs root (loop mount of a scratch ext4 image)" >&2; exit 1; }
apt_install e2fsprogs util-linux python3
BASE=${BASE:-/var/tmp/benchrun-dataset-memory}
mkdir -p "$BASE/mnt"
# Stopped early: the worker first (it would go on writing under the unmounted directory).
cleanup() {
  pkill -P $$ 2>/dev/null || true
  while pgrep -f "run $BASE/w.yaml" >/dev/null; do sleep 0.2; done
  umount "$BASE/mnt" 2>/dev/null || true
  rm -rf "$BASE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# peak N: lay out N empty objects on a fresh file system, GET for 2 s, print the peak RSS in KiB.
peak() {
  umount "$BASE/mnt" 2>/dev/null || true
  rm -f "$BASE/fs.img"
  if [ "${FS:-ext4}" = tmpfs ]; then
    mount -t tmpfs -o size=64M,nr_inodes=$(( $1 + 10000 )) benchrun-dataset-memory "$BASE/mnt"
  else
    # An inode per object and room for the directory's entries (~50 bytes each).
    truncate -s $(( (1 + $1 / 1000000) * 1024 ))M "$BASE/fs.img"
    mkfs.ext4 -q -F -N $(( $1 + 10000 )) -O large_dir "$BASE/fs.img"
    mount -o loop "$BASE/fs.img" "$BASE/mnt"
  fi
  cat > "$BASE/w.yaml" <<YAML
target: file://$BASE/mnt
duration: 2s
concurrency: 16
ops: [{op: get}]
objectSize: 0
dataset: {objects: $1, prepare: true, cleanup: false}
YAML
  python3 - "$BIN" "$BASE/w.yaml" "$BASE/summary-$1.json" <<'PY'
import ctypes, os, signal, subprocess, sys
# Each process dies with its parent (PR_SET_PDEATHSIG): the script stopped, nothing goes on
# writing under an unmounted directory.
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, signal.SIGTERM)
p = subprocess.Popen([sys.argv[1], "run", sys.argv[2], "--summary", sys.argv[3]],
                     stdout=subprocess.DEVNULL,
                     preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))
# Stopped: stop the worker too, and wait for it (it must not outlive the mount).
def stop(*_):
    p.kill(); p.wait(); sys.exit(130)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
_, status, ru = os.wait4(p.pid, 0)
if status != 0:
    sys.exit(f"the worker failed: wait status {status}")
print(ru.ru_maxrss)
PY
}

base=$(peak 1000)
big=$(peak "$N")
python3 - "$N" "$base" "$big" <<'PY'
import sys
n, base, big = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print(f"peak RSS: 1,000 objects {base / 1024:.1f} MiB; {n:,} objects {big / 1024:.1f} MiB")
print(f"per object: {(big - base) * 1024 / n:.1f} bytes")
PY
