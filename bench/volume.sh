#!/usr/bin/env bash
# benchrun vs fio on the same file and the same loop device, in the same run (issue 18 §5).
#
#   bench/volume.sh [DIR]               DIR on a disk-backed file system (default /var/tmp)
#   SECS=10 REPS=3 bench/volume.sh      seconds per run, interleaved rounds
#   CASES_ONLY=randrw bench/volume.sh   only the cases whose name contains this
#   TARGETS=file,memfile bench/volume.sh only these targets (default: all of a case's)
#   FIO_EXTRA="--iodepth_batch_submit=32" bench/volume.sh   options added to every fio run
#                                       (for an experiment; the table's figures are without)
#   BLOCK_EXTRA="submitBatch: 32" bench/volume.sh   keys added to benchrun's io_uring runs'
#                                       block section (benchrun's batched submission, the
#                                       default before submitBatch; fio's default is 1)
#   BR=.../release/benchrun-worker bench/volume.sh   this release binary, not a build of its own
#
# Targets: file (a 1 GiB file on DIR's file system, on its disk), dev (a loop device over a
# file on DIR), mem (a loop device over a file on /dev/shm: no disk), memfile (the file case
# again, on an ext4 file system made on a loop device over a file on /dev/shm: the file
# system's O_DIRECT path without the disk, as mem is the device's).
#
# Like for like: O_DIRECT for both; the same engine class (benchrun io_uring vs fio
# ioengine=io_uring, benchrun sync vs fio psync); the same depth, block size, access and
# number of jobs (benchrun tasks); the same 1 GiB file (laid out by benchrun as
# files/benchrun/block-t0-f0, its one task's file with shared: false, kept with
# dataset.cleanup: false, given to fio with --filename; the script checks it exists, so fio
# never lays out a file of its own), the same loop device (over a second 1 GiB file,
# losetup --direct-io=on) and the same memory-backed loop device (over a 1 GiB file on
# /dev/shm, tmpfs: no disk, so the CPU each tool spends per I/O decides). Both read O_DIRECT,
# so neither depends on the page cache; benchrun's dropCache and fio's invalidate (its
# default) leave the same state. Written data: fio gets --refill_buffers, because its default
# buffers compress about 45:1 (8 MiB of fio's default writes gzip to 180 KB) and this
# machine's virtual disk is faster for compressible data (fio's random 4 KiB writes at depth
# 32 on a file: 176K IOPS with its default data, 72K with --refill_buffers); benchrun writes
# random data with every 4 KiB block stamped per write (incompressible, never a repeat), the
# same as the device sees from fio with --refill_buffers (which costs fio a refill per write:
# in its CPU figure). fio keeps its defaults otherwise (no registered files or fixed buffers,
# no SQ polling: benchrun uses none of them either); its jobs are threads (--thread), and a
# case of several jobs is reported as one group. The tools' order alternates from round to
# round. The table shows medians of IOPS (reads and writes), latency p50/p99 of reads (of
# writes when a case has none) from submission to completion (fio lat_ns: benchrun's
# latency is the same span; fio's clat_ns leaves out the submission), and CPU microseconds
# per I/O, taken the same way for both tools: the user+system CPU of the whole process
# (wait4's rusage, threads included) over all its I/Os; ratios are benchrun / fio.
# Beside them, what the block device under the target saw during each tool's run (the
# difference of its /sys/class/block/*/stat before and after: vda under file, the loop
# device for the others): its mean time per request, and the requests in flight there that
# this makes at the tool's IOPS (Little's law: IOPS x time per request); a tool that keeps
# fewer of its I/Os at the device, or whose requests the device serves slower, shows here.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
BASE=${1:-/var/tmp}/benchrun-volume-bench
# Every run's JSON (benchrun summaries, fio output) stays here for a second look.
OUT=${OUT:-/tmp/benchrun-volume-results}
SECS=${SECS:-10}
REPS=${REPS:-3}
apt_install fio python3 util-linux e2fsprogs mount
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
# BR=path/to/benchrun-worker measures a build of one's own (a release build: the images' static
# one, images/static-build.sh, is one) instead of building here.
if [ -n "${BR:-}" ]; then
  BIN=$BR
else
  cargo build --release -q -p benchrun-worker
  BIN=$CARGO_TARGET_DIR/release/benchrun-worker
fi
SHM=/dev/shm/benchrun-volume-bench-mem.img
SHMFS=/dev/shm/benchrun-volume-bench-memfs.img
DEV="" MEM="" MEMFS="" MNT=""
cleanup() {
  if [ -n "$MNT" ]; then umount "$MNT" && rmdir "$MNT"; fi
  for d in "$DEV" "$MEM" "$MEMFS"; do [ -z "$d" ] || losetup -d "$d"; done
  rm -rf "$BASE" "$SHM" "$SHMFS"
}
trap cleanup EXIT
rm -rf "$BASE" "$OUT" "$SHM" "$SHMFS"; mkdir -p "$BASE/files" "$OUT"
truncate -s 1G "$BASE/dev.img"
DEV=$(losetup --find --show --direct-io=on "$BASE/dev.img")
# tmpfs has no direct I/O for the loop driver to use: the device's reads and writes are
# memory copies.
truncate -s 1G "$SHM"
MEM=$(losetup --find --show "$SHM")
# memfile: ext4 (mkfs.ext4's defaults, as DIR's) on a loop device over tmpfs, room for the
# 1 GiB file and the file system's own blocks.
truncate -s 1280M "$SHMFS"
MEMFS=$(losetup --find --show "$SHMFS")
mkfs.ext4 -q -F "$MEMFS"
MNT=$(mktemp -d /tmp/benchrun-volume-memfs.XXXXXX)
mount "$MEMFS" "$MNT"
mkdir -p "$MNT/files"
# Real data everywhere before anything is read: the file by benchrun's layout, the devices by
# one sequential pass.
dd if=/dev/urandom of="$DEV" bs=4M count=256 oflag=direct status=none
dd if=/dev/urandom of="$MEM" bs=4M count=256 oflag=direct status=none
# The file benchrun's one task reads and writes (shared: false): fio is given this one.
FILE=$BASE/files/benchrun/block-t0-f0
MFILE=$MNT/files/benchrun/block-t0-f0

# name  rw(fio)  access  op(s)  bs  depth  engine(benchrun)  ioengine(fio)  jobs  targets
# op "mix70": 70% reads, 30% writes (fio randrw, rwmixread=70).
CASES="randread-4k-qd1 randread random read 4KiB 1 ioUring io_uring 1 file,memfile,dev
randread-4k-qd32 randread random read 4KiB 32 ioUring io_uring 1 file,memfile,dev,mem
randwrite-4k-qd1 randwrite random write 4KiB 1 ioUring io_uring 1 file,memfile,dev
randwrite-4k-qd32 randwrite random write 4KiB 32 ioUring io_uring 1 file,memfile,dev
read-1m-qd4 read sequential read 1MiB 4 ioUring io_uring 1 file,memfile,dev
write-1m-qd4 write sequential write 1MiB 4 ioUring io_uring 1 file,memfile,dev
randread-4k-sync randread random read 4KiB 1 sync psync 1 file,memfile,dev
randrw70-4k-4jx8 randrw random mix70 4KiB 8 ioUring io_uring 4 mem,dev"

# The stat file of the block device under PATH: the device itself, or the one its file
# system is on (none for a file system on no block device, e.g. tmpfs: nan in the table).
devstat() {
  local d=$1
  [ -b "$d" ] || d=$(findmnt -no SOURCE --target "$d")
  echo "/sys/class/block/$(basename "$(readlink -f "$d")")/stat"
}
# rusage OUT STAT CMD...: run CMD, write its whole process's user and system CPU seconds to
# OUT.cpu, and to OUT.dev the block device's counters (the STAT file) after minus before.
rusage() {
  python3 - "$@" <<'PY'
import os, subprocess, sys
out, stat = sys.argv[1], sys.argv[2]
read = lambda: [int(x) for x in open(stat).read().split()] if os.path.exists(stat) else []
before = read()
p = subprocess.Popen(sys.argv[3:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, ru = os.wait4(p.pid, 0)
after = read()
open(out + ".cpu", "w").write(f"{ru.ru_utime} {ru.ru_stime}\n")
open(out + ".dev", "w").write(" ".join(str(a - b) for a, b in zip(after, before)) + "\n")
sys.exit(os.waitstatus_to_exitcode(status))
PY
}
run_benchrun() { # target name access op bs depth engine jobs out
  local target=$1 access=$3 op=$4 bs=$5 depth=$6 engine=$7 jobs=$8 out=$9 size="" ops extra=""
  [ -d "${target#direct://}" ] && size="fileSize: 1GiB, "
  # submitBatch is io_uring's only (a sync run refuses it).
  [ -n "${BLOCK_EXTRA:-}" ] && [ "$engine" != sync ] && extra=", $BLOCK_EXTRA"
  ops="[{op: $op}]"
  [ "$op" = mix70 ] && ops="[{op: read, weight: 70}, {op: write, weight: 30}]"
  cat > "$BASE/w.yaml" <<YAML
target: $target
duration: ${SECS}s
concurrency: $jobs
ops: $ops
dataset: {cleanup: false, prepare: $([ -n "$size" ] && echo true || echo false)}
block: {${size}blockSize: $bs, queueDepth: $depth, access: $access, engine: $engine, dropCache: true$extra}
YAML
  rusage "$out" "$(devstat "${target#direct://}")" "$BIN" run "$BASE/w.yaml" --progress=never --summary "$out"
}
run_fio() { # filename rw bs depth ioengine jobs out
  local bs=${3/iB/} extra; bs=${bs,,}
  read -ra extra <<< "${FIO_EXTRA:-}"
  rusage "$7" "$(devstat "$1")" fio --name=j --filename="$1" --size=1g --rw="$2" --rwmixread=70 --bs="$bs" --iodepth="$4" \
    --ioengine="$5" --direct=1 --refill_buffers --lat_percentiles=1 --time_based --runtime="$SECS" --numjobs="$6" --thread \
    --group_reporting --output-format=json --output="$7" "${extra[@]}"
}

# The files exist (laid out by benchrun) before fio ever sees them.
for d in "$BASE/files" "$MNT/files"; do
  run_benchrun "direct://$d" x random read 4KiB 1 sync 1 "$BASE/warm.json"
done
for f in "$FILE" "$MFILE"; do
  [ -f "$f" ] || { echo "benchrun laid out no $f: the script gives fio the wrong file" >&2; exit 1; }
done
for r in $(seq 1 "$REPS"); do
  echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  while read -r name rw access op bs depth engine ioengine jobs targets; do
    [[ $name == *"${CASES_ONLY:-}"* ]] || continue
    for where in ${targets//,/ }; do
      [[ ,${TARGETS:-$targets}, == *",$where,"* ]] || continue
      case $where in
        file) t="direct://$BASE/files"; f=$FILE ;;
        memfile) t="direct://$MNT/files"; f=$MFILE ;;
        dev) t="direct://$DEV"; f=$DEV ;;
        mem) t="direct://$MEM"; f=$MEM ;;
      esac
      b="$OUT/r$r-$where-$name-benchrun.json"; o="$OUT/r$r-$where-$name-fio.json"
      if [ $((r % 2)) = 1 ]; then
        run_benchrun "$t" "$name" "$access" "$op" "$bs" "$depth" "$engine" "$jobs" "$b"; run_fio "$f" "$rw" "$bs" "$depth" "$ioengine" "$jobs" "$o"
      else
        run_fio "$f" "$rw" "$bs" "$depth" "$ioengine" "$jobs" "$o"; run_benchrun "$t" "$name" "$access" "$op" "$bs" "$depth" "$engine" "$jobs" "$b"
      fi
    done
  done <<< "$CASES"
done
# fio used the file it was given, not one of its own (beside it: only benchrun's layout marker).
others=$(find "$BASE/files" "$MNT/files" -type f ! -path "$FILE" ! -path "$MFILE" ! -name ".$(basename "$FILE").layout")
[ -z "$others" ] || { echo "data files other than $FILE and $MFILE: $others" >&2; exit 1; }
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics as st, sys, glob, re
base, reps = sys.argv[1], int(sys.argv[2])
def cpu(path):
    u, s_ = map(float, open(path + ".cpu").read().split()); return u + s_
def dev(path, ios, iops):
    # /sys/class/block/*/stat, after minus before: requests done (reads, writes) and the ms
    # they took (summed over requests). The device's mean time per request in us, and the
    # requests in flight there on average over the tool's measured window (ios / iops).
    d = list(map(int, open(path + ".dev").read().split()))
    if len(d) < 8:
        return float("nan"), float("nan")
    reqs, ms = d[0] + d[4], d[3] + d[7]
    return ms * 1000 / max(reqs, 1), ms / 1000 / max(ios / max(iops, 1e-9), 1e-9)
def br(path):
    s = json.load(open(path)); r = s["report"]
    ops = sum(v["count"] for v in r.values()); iops = sum(v["opsPerSec"] for v in r.values())
    lat = r.get("read") or next(iter(r.values()))
    return (iops, lat["p50Ms"] * 1000, lat["p99Ms"] * 1000, cpu(path) / max(ops, 1) * 1e6,
            *dev(path, ops, iops), s["volume"]["engines"])
def fio(path):
    j = json.load(open(path))["jobs"][0]; rd, wr = j["read"], j["write"]
    d = rd if rd["total_ios"] else wr
    p = d["lat_ns"]["percentile"]
    ios = rd["total_ios"] + wr["total_ios"]; iops = rd["iops"] + wr["iops"]
    return (iops, p["50.000000"] / 1000, p["99.000000"] / 1000, cpu(path) / max(ios, 1) * 1e6,
            *dev(path, ios, iops))
names = sorted({re.sub(r"^r\d+-", "", p.split("/")[-1]).rsplit("-", 1)[0] for p in glob.glob(f"{base}/r1-*-benchrun.json")})
print("| target | case | benchrun IOPS | fio IOPS | ratio | p50 us (b / f) | p99 us (b / f) | CPU us/IO (b / f) | device us/req (b / f) | in flight at device (b / f) |")
print("|---|---|---|---|---|---|---|---|---|---|")
rounds = []
for n in names:
    b = [br(f"{base}/r{r}-{n}-benchrun.json") for r in range(1, reps + 1)]
    f = [fio(f"{base}/r{r}-{n}-fio.json") for r in range(1, reps + 1)]
    m = lambda xs, i: st.median(x[i] for x in xs)
    ratio = st.median(x[0] / y[0] for x, y in zip(b, f))
    where, case = n.split("-", 1)
    print(f"| {where} | {case} ({','.join(b[0][6])}) | {m(b,0):.0f} | {m(f,0):.0f} | {ratio:.2f} | {m(b,1):.0f} / {m(f,1):.0f} | {m(b,2):.0f} / {m(f,2):.0f} | {m(b,3):.1f} / {m(f,3):.1f} | {m(b,4):.0f} / {m(f,4):.0f} | {m(b,5):.1f} / {m(f,5):.1f} |")
    # Every round's IOPS, so the spread behind a median is in the output (after the table).
    rounds.append(f"- {where} {case}: benchrun {' '.join(f'{x[0]:.0f}' for x in b)}; fio {' '.join(f'{y[0]:.0f}' for y in f)}; ratios {' '.join(f'{x[0] / y[0]:.2f}' for x, y in zip(b, f))}")
print()
print("IOPS per round:")
print("\n".join(rounds))
PY
