#!/usr/bin/env bash
# benchrun vs fio on the same file and the same loop device, in the same run (issue 18 §5).
#
#   bench/volume.sh [DIR]               DIR on a disk-backed file system (default /var/tmp)
#   SECS=10 REPS=3 bench/volume.sh      seconds per run, interleaved rounds
#
# Like for like: O_DIRECT for both; the same engine class (benchrun io_uring vs fio
# ioengine=io_uring, benchrun sync vs fio psync); the same depth, block size and access; one
# task / one fio job; the same 1 GiB file (laid out by benchrun, kept with dataset.cleanup:
# false, given to fio with --filename) and the same loop device (over a second 1 GiB file,
# losetup --direct-io=on). Written data: fio gets --refill_buffers, because its default
# buffers compress about 45:1 (8 MiB of fio's default writes gzip to 180 KB) and this
# machine's virtual disk is faster for compressible data (fio's random 4 KiB writes at depth
# 32 on a file: 176K IOPS with its default data, 72K with --refill_buffers); benchrun writes
# random data with every 4 KiB block stamped per write (incompressible, never a repeat), the
# same as the device sees from fio with --refill_buffers (which costs fio a refill per write:
# in its CPU figure). fio keeps its defaults otherwise (no registered files or fixed buffers,
# no SQ polling: benchrun uses none of them either). The tools' order alternates from
# round to round. The table shows medians of IOPS, completion latency p50/p99 (fio clat_ns,
# benchrun's latency from submission to completion) and CPU microseconds per I/O (fio's
# usr+sys over its runtime; getrusage for benchrun); ratios are benchrun / fio.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
BASE=${1:-/var/tmp}/benchrun-volume-bench
# Every run's JSON (benchrun summaries, fio output) stays here for a second look.
OUT=${OUT:-/tmp/benchrun-volume-results}
SECS=${SECS:-10}
REPS=${REPS:-3}
apt_install fio python3 util-linux
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
cargo build --release -q -p benchrun-worker
BIN=$CARGO_TARGET_DIR/release/benchrun-worker
rm -rf "$BASE" "$OUT"; mkdir -p "$BASE/files" "$OUT"
truncate -s 1G "$BASE/dev.img"
DEV=$(losetup --find --show --direct-io=on "$BASE/dev.img")
trap 'losetup -d "$DEV"; rm -rf "$BASE"' EXIT
# Real data everywhere before anything is read: the file by benchrun's layout, the device by
# one sequential pass.
dd if=/dev/urandom of="$DEV" bs=4M count=256 oflag=direct status=none
FILE=$BASE/files/benchrun/block-f0

# name  rw(fio)  access  op  bs  depth  engine(benchrun)  ioengine(fio)
CASES="randread-4k-qd1 randread random read 4KiB 1 ioUring io_uring
randread-4k-qd32 randread random read 4KiB 32 ioUring io_uring
randwrite-4k-qd1 randwrite random write 4KiB 1 ioUring io_uring
randwrite-4k-qd32 randwrite random write 4KiB 32 ioUring io_uring
read-1m-qd4 read sequential read 1MiB 4 ioUring io_uring
write-1m-qd4 write sequential write 1MiB 4 ioUring io_uring
randread-4k-sync randread random read 4KiB 1 sync psync"

run_benchrun() { # target name access op bs depth engine out
  local target=$1 access=$3 op=$4 bs=$5 depth=$6 engine=$7 out=$8 size=""
  [ -d "${target#direct://}" ] && size="fileSize: 1GiB, "
  cat > "$BASE/w.yaml" <<YAML
target: $target
duration: ${SECS}s
concurrency: 1
ops: [{op: $op}]
dataset: {cleanup: false, prepare: $([ -n "$size" ] && echo true || echo false)}
block: {${size}blockSize: $bs, queueDepth: $depth, access: $access, engine: $engine, dropCache: true}
YAML
  "$BIN" run "$BASE/w.yaml" --progress=never --summary "$out" >/dev/null 2>&1
}
run_fio() { # filename rw bs depth ioengine out
  local bs=${3/iB/}; bs=${bs,,}
  fio --name=j --filename="$1" --size=1g --rw="$2" --bs="$bs" --iodepth="$4" --ioengine="$5" \
    --direct=1 --refill_buffers --time_based --runtime="$SECS" --numjobs=1 --output-format=json > "$6" 2>/dev/null
}

# The file exists (laid out by benchrun) before fio ever sees it.
run_benchrun "direct://$BASE/files" x random read 4KiB 1 sync "$BASE/warm.json"
for r in $(seq 1 "$REPS"); do
  echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  while read -r name rw access op bs depth engine ioengine; do
    for where in file dev; do
      if [ $where = file ]; then t="direct://$BASE/files"; f=$FILE; else t="direct://$DEV"; f=$DEV; fi
      b="$OUT/r$r-$where-$name-benchrun.json"; o="$OUT/r$r-$where-$name-fio.json"
      if [ $((r % 2)) = 1 ]; then
        run_benchrun "$t" "$name" "$access" "$op" "$bs" "$depth" "$engine" "$b"; run_fio "$f" "$rw" "$bs" "$depth" "$ioengine" "$o"
      else
        run_fio "$f" "$rw" "$bs" "$depth" "$ioengine" "$o"; run_benchrun "$t" "$name" "$access" "$op" "$bs" "$depth" "$engine" "$b"
      fi
    done
  done <<< "$CASES"
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics as st, sys, glob, re
base, reps = sys.argv[1], int(sys.argv[2])
def br(path):
    s = json.load(open(path)); op = next(iter(s["report"])); r = s["report"][op]
    cpu = s["process"]["cpuUserSeconds"] + s["process"]["cpuSystemSeconds"]
    return r["opsPerSec"], r["p50Ms"] * 1000, r["p99Ms"] * 1000, cpu / max(r["count"], 1) * 1e6, s["volume"]["engines"]
def fio(path):
    j = json.load(open(path))["jobs"][0]; d = j["read"] if j["read"]["total_ios"] else j["write"]
    p = d["clat_ns"]["percentile"]; rt = j["job_runtime"] / 1000
    cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * rt
    return d["iops"], p["50.000000"] / 1000, p["99.000000"] / 1000, cpu / max(d["total_ios"], 1) * 1e6
names = sorted({re.sub(r"^r\d+-", "", p.split("/")[-1]).rsplit("-", 1)[0] for p in glob.glob(f"{base}/r1-*-benchrun.json")})
print("| target | case | benchrun IOPS | fio IOPS | ratio | p50 us (b / f) | p99 us (b / f) | CPU us/IO (b / f) |")
print("|---|---|---|---|---|---|---|---|")
for n in names:
    b = [br(f"{base}/r{r}-{n}-benchrun.json") for r in range(1, reps + 1)]
    f = [fio(f"{base}/r{r}-{n}-fio.json") for r in range(1, reps + 1)]
    m = lambda xs, i: st.median(x[i] for x in xs)
    ratio = st.median(x[0] / y[0] for x, y in zip(b, f))
    where, case = n.split("-", 1)
    print(f"| {where} | {case} ({','.join(b[0][4])}) | {m(b,0):.0f} | {m(f,0):.0f} | {ratio:.2f} | {m(b,1):.0f} / {m(f,1):.0f} | {m(b,2):.0f} / {m(f,2):.0f} | {m(b,3):.1f} / {m(f,3):.1f} |")
PY
