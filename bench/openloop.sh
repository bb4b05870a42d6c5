#!/usr/bin/env bash
# rateLimit true to the microsecond (issue 28 §4): the p50 of an open-loop run against the same
# run closed loop, and against fio at the same rate.
#
#   bench/openloop.sh                   SECS=8 REPS=3 by default (~4 min)
#
# Two targets, both in memory so the I/O takes tens of microseconds and any lag of the limiter
# shows: a loop device over a 256 MiB file on /dev/shm (4 KiB random reads, O_DIRECT,
# io_uring), and file:// over 2,000 objects of 4 KiB on /dev/shm (GETs). Per round and target:
#   closed d1   closed loop, depth 1 (block: queueDepth 1; file: concurrency 1): its IOPS, R,
#               and the p50 to reach;
#   open R/2    rateLimit R/2, depth 4 (file: concurrency 4): latency from each op's due time
#               (lag included);
#   open 2000   rateLimit 2000, depth 4: the rate of issue 28's measurement (p50 682 us before);
#   fio         (block only) the same device and runs (--rate_iops), latency lat_ns: from
#               submission (fio does not measure from a due time, so its lag is in none of it).
# Goal: the open runs' p50 within 20 us of closed d1's. The machine is shared (2 cores, other
# engineers' builds): runs are interleaved, rounds repeated, medians shown, and each round's
# load average printed; the lag bands (share of ops started within 10 / 100 us of due) say how
# much of any gap is the scheduler's.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
SECS=${SECS:-8}
REPS=${REPS:-3}
BASE=/dev/shm/benchrun-openloop-bench
OUT=${OUT:-/tmp/benchrun-openloop-results}
apt_install fio python3 util-linux
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BIN=$CARGO_TARGET_DIR/release/benchrun-worker
rm -rf "$BASE" "$OUT"; mkdir -p "$BASE/objects" "$OUT"
truncate -s 256M "$BASE/dev.img"
DEV=$(losetup --find --show "$BASE/dev.img")
trap 'losetup -d "$DEV"; rm -rf "$BASE"' EXIT
dd if=/dev/urandom of="$DEV" bs=4M count=64 oflag=direct status=none

run() { # name target depth rate
  local name=$1 target=$2 depth=$3 rate=$4 shape
  if [ "$target" = block ]; then
    shape="target: direct://$DEV
concurrency: 1
ops: [{op: read}]
block: {blockSize: 4KiB, queueDepth: $depth, access: random, engine: ioUring}"
  else
    shape="target: file://$BASE/objects
concurrency: $depth
ops: [{op: get}]
dataset: {objects: 2000, size: 4KiB, prepare: false, cleanup: false}"
  fi
  printf '%s\nduration: %ss\n%s\n' "$shape" "$SECS" "$([ "$rate" = 0 ] || echo "rateLimit: $rate")" > "$OUT/w.yaml"
  "$BIN" run "$OUT/w.yaml" --progress=never --summary "$OUT/$name.json" >/dev/null 2>&1
}
fio_run() { # name depth rate
  local rate_opt=()
  [ "$3" = 0 ] || rate_opt=("--rate_iops=$3")
  fio --name=j --filename="$DEV" --rw=randread --bs=4k --iodepth="$2" --ioengine=io_uring --direct=1 \
    "${rate_opt[@]}" --lat_percentiles=1 --time_based --runtime="$SECS" \
    --output-format=json --output="$OUT/$1.json"
}
iops() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(int(sum(v["opsPerSec"] for v in s["report"].values())))' "$1"; }

# The objects, once (file:// keeps them: cleanup false).
printf 'target: file://%s/objects\ntotalOps: 1\nops: [{op: stat}]\ndataset: {objects: 2000, size: 4KiB, cleanup: false}\n' "$BASE" > "$OUT/prep.yaml"
"$BIN" run "$OUT/prep.yaml" --progress=never >/dev/null 2>&1
for r in $(seq 1 "$REPS"); do
  echo "round $r: load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine" >&2
  for t in block file; do
    run "r$r-$t-closed1" $t 1 0
    half=$(( $(iops "$OUT/r$r-$t-closed1.json") / 2 ))
    echo "$half" > "$OUT/r$r-$t-rate"
    # The tools' and the rates' order alternates from round to round.
    if [ $((r % 2)) = 1 ]; then
      run "r$r-$t-openhalf" $t 4 "$half"; run "r$r-$t-open2000" $t 4 2000
      [ $t = block ] && { fio_run "r$r-fio-closed1" 1 0; fio_run "r$r-fio-openhalf" 4 "$half"; fio_run "r$r-fio-open2000" 4 2000; }
    else
      [ $t = block ] && { fio_run "r$r-fio-open2000" 4 2000; fio_run "r$r-fio-openhalf" 4 "$half"; fio_run "r$r-fio-closed1" 1 0; }
      run "r$r-$t-open2000" $t 4 2000; run "r$r-$t-openhalf" $t 4 "$half"
    fi
  done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics as st, sys
base, reps = sys.argv[1], int(sys.argv[2])
R = range(1, reps + 1)
def br(name):
    s = json.load(open(f"{base}/{name}.json")); r = next(iter(s["report"].values()))
    o = s.get("openLoop") or {}
    n = max(o.get("started", 0), 1); w = o.get("lagWithin", {})
    return r["p50Ms"] * 1000, r["p99Ms"] * 1000, 100 * w.get("us10", 0) / n, 100 * w.get("us100", 0) / n
def fio(name):
    j = json.load(open(f"{base}/{name}.json"))["jobs"][0]["read"]; p = j["lat_ns"]["percentile"]
    return p["50.000000"] / 1000, p["99.000000"] / 1000
med = st.median
print("| target | run (rate ops/s) | benchrun p50 / p99 us | p50 - closed d1 p50 us (per round) | started within 10 / 100 us of due | fio p50 / p99 us |")
print("|---|---|---|---|---|---|")
for t in ["block", "file"]:
    c = [br(f"r{r}-{t}-closed1") for r in R]
    half = med([int(open(f"{base}/r{r}-{t}-rate").read()) for r in R])
    for run, rate in [("closed1", "closed, depth 1"), ("openhalf", f"{half:.0f} (half of closed d1)"), ("open2000", "2000")]:
        b = [br(f"r{r}-{t}-{run}") for r in R]
        gap = [x[0] - y[0] for x, y in zip(b, c)]
        f = "-"
        if t == "block":
            fs = [fio(f"r{r}-fio-{run}") for r in R]
            f = f"{med([x[0] for x in fs]):.0f} / {med([x[1] for x in fs]):.0f}"
        lag = "-" if run == "closed1" else f"{med([x[2] for x in b]):.1f}% / {med([x[3] for x in b]):.1f}%"
        d = "-" if run == "closed1" else f"{med(gap):+.0f} ({', '.join(f'{g:+.0f}' for g in gap)})"
        depth = "" if run == "closed1" else ", depth 4"
        print(f"| {t} | {rate}{depth} | {med([x[0] for x in b]):.0f} / {med([x[1] for x in b]):.0f} | {d} | {lag} | {f} |")
PY
