#!/usr/bin/env bash
# The read buffer pool on and off (`read.bufferPool`; design report 004's "allocation per
# read", issue 19 section 5): what a fresh buffer per GET costs benchrun's hot path.
#
#   bench/bufpool.sh [DIR]          DIR on a disk-backed filesystem (default /var/tmp: ext4;
#                                   direct:// refuses tmpfs)
#   SECS=6 REPS=3 bench/bufpool.sh  seconds per run, interleaved rounds
#
# Cases, each run with the pool on and off in the same round (the order alternates by round):
#   file1m    file:// 1 MiB objects, one 1 MiB read each, from the page cache (warmed by `cat`)
#   file8m    file:// 8 MiB objects, one 8 MiB read each (chunkSize 8MiB), page cache
#   direct4m  direct:// 8 MiB objects in 4 MiB chunks (O_DIRECT; one 4 MiB buffer per GET)
#   s3whole   S3 GETs of 1 MiB objects read whole into a buffer (`read.wholeObject`), concurrency
#             4, on the S3 server of $BENCHRUN_STATE/storage.env (skipped, and said so, when
#             that file is missing or its server does not answer). Streamed and ranged GETs
#             read into no buffer of benchrun's, so the switch cannot apply to them.
# Local cases run at concurrency 1. Off means every GET allocates, zeroes (faulting its pages
# in) and frees an aligned buffer of its read's size: AlignedBuf::new, as a client without a
# pool would with vec![0; n].
# Per run: ops/s, MiB/s, p99, client CPU-s/GiB, minor faults per GiB (getrusage over the
# measured stage), the buffers the GETs allocated (the summary's ops.get.buffersAllocated) and
# the 1-minute load average before it. Then medians per case and mode, and the off/on ratios
# (median of the per-round ratios).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
BASE=${1:-/var/tmp}/benchrun-bufpool
SECS=${SECS:-6}
REPS=${REPS:-3}
apt_install python3 curl
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BR=$CARGO_TARGET_DIR/release/benchrun-worker
OUT=$BASE/out; rm -rf "$BASE"; mkdir -p "$OUT"

# The S3 server, if there is one: the shared test servers' settings (never started here).
S3=""
if [ -f "$STATE_DIR/storage.env" ]; then
  set -a
  # shellcheck disable=SC1091  # written by tests/storage/up.sh
  . "$STATE_DIR/storage.env"
  set +a
  if curl -sf -o /dev/null "$BENCHRUN_S3_ENDPOINT/minio/health/live"; then
    S3=$BENCHRUN_S3_ENDPOINT
  else
    echo "S3 case skipped: $BENCHRUN_S3_ENDPOINT (from $STATE_DIR/storage.env) does not answer"
  fi
else
  echo "S3 case skipped: no $STATE_DIR/storage.env (start the test servers, or set BENCHRUN_STATE)"
fi

# workload NAME TARGET CONCURRENCY OBJECTS SIZE READ-YAML [STORAGE-YAML]: one per mode.
workload() {
  for pool in true false; do
    cat > "$OUT/$1-$pool.yaml" <<Y
target: $2
duration: ${SECS}s
concurrency: $3
ops: [{ op: get }]
dataset: { objects: $4, size: $5, prefix: $1/, prepare: false, cleanup: false }
read: { $6, bufferPool: $pool }
${7:-}
Y
  done
  # The dataset, written once: a run of one STAT that prepares it and keeps it.
  cat > "$OUT/$1-prep.yaml" <<Y
target: $2
totalOps: 1
ops: [{ op: stat }]
dataset: { objects: $4, size: $5, prefix: $1/, cleanup: false }
${7:-}
Y
  "$BR" run "$OUT/$1-prep.yaml" --progress never > /dev/null
}
workload file1m "file://$BASE/data" 1 256 1MiB "chunkSize: 1MiB"
workload file8m "file://$BASE/data" 1 32 8MiB "chunkSize: 8MiB"
workload direct4m "direct://$BASE/data" 1 32 8MiB "chunkSize: 4MiB"
CASES="file1m file8m direct4m"
if [ -n "$S3" ]; then
  workload s3whole "s3://$BENCHRUN_S3_BUCKET/bufpool-bench/" 4 256 1MiB "wholeObject: true" \
    "storage: { endpoint: '$S3', allowHttp: true }"
  CASES="$CASES s3whole"
fi
warm() { case $1 in file*) cat "$BASE/data/$1/"* > /dev/null;; esac; }

# run CASE POOL: one measured run; appends "round case pool figures..." to $OUT/rows.
run() {
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  warm "$1"
  "$BR" run "$OUT/$1-$2.yaml" --progress never --summary "$OUT/$1-$2-$ROUND.json" > /dev/null
  python3 - "$OUT/$1-$2-$ROUND.json" "$ROUND" "$1" "$2" "$load" <<'P' | tee -a "$OUT/rows"
import json, sys
s = json.load(open(sys.argv[1])); r = s["report"]["get"]; o = s["ops"]["get"]; p = s["process"]
gib = o["bytes"] / 2**30
cpu = p["cpuUserSeconds"] + p["cpuSystemSeconds"]
print(sys.argv[2], sys.argv[3], "on" if sys.argv[4] == "true" else "off",
      f'{r["opsPerSec"]:.1f} {r["mibPerSec"]:.1f} {r["p99Ms"]:.3f} {cpu / gib:.4f} '
      f'{p["minorFaults"] / gib:.0f} {o.get("buffersAllocated", 0)} {o["count"]} {o["errors"]} {sys.argv[5]}')
P
}

echo "round case pool ops/s MiB/s p99ms cpu-s/GiB minflt/GiB buffers gets errors load1"
: > "$OUT/rows"
for ROUND in $(seq "$REPS"); do
  for c in $CASES; do
    if (( ROUND % 2 )); then run "$c" true; run "$c" false; else run "$c" false; run "$c" true; fi
  done
done

echo
python3 - "$OUT/rows" <<'P'
import collections, statistics as st, sys
rows = collections.defaultdict(dict)  # (case, pool) -> round -> figures
for line in open(sys.argv[1]):
    rnd, case, pool, *v = line.split()
    rows[(case, pool)][int(rnd)] = list(map(float, v))
names = {"file1m": "file:// 1 MiB, page cache", "file8m": "file:// 8 MiB (one 8 MiB read), page cache",
         "direct4m": "direct:// 8 MiB in 4 MiB chunks", "s3whole": "S3 1 MiB whole-object GETs, c=4"}
cases = [c for c in names if (c, "on") in rows]
print("| case | pool | ops/s | MiB/s | p99 ms | CPU-s/GiB | minor faults/GiB | buffers allocated / GETs | load1 |")
print("|---|---|---|---|---|---|---|---|---|")
for c in cases:
    for pool in ("on", "off"):
        r = rows[(c, pool)]
        m = [st.median(x) for x in zip(*r.values())]
        loads = "-".join(f"{v[8]:.1f}" for _, v in sorted(r.items()))
        print(f"| {names[c]} | {pool} | {m[0]:.1f} | {m[1]:.1f} | {m[2]:.3f} | {m[3]:.4f} | {m[4]:.0f} "
              f"| {m[5]:.0f} / {m[6]:.0f} | {loads} |")
print()
print("off/on, median of the per-round ratios (rounds in brackets):")
for c in cases:
    on, off = rows[(c, "on")], rows[(c, "off")]
    rounds = sorted(set(on) & set(off))
    def ratio(i):
        per = [off[k][i] / on[k][i] if on[k][i] else float("nan") for k in rounds]
        return f"{st.median(per):.3f} [{' '.join(f'{x:.3f}' for x in per)}]"
    print(f"  {names[c]}: ops/s {ratio(0)}, CPU-s/GiB {ratio(3)}, minor faults/GiB {ratio(4)}, p99 {ratio(2)}")
P
# The S3 dataset goes as it came: the prepare run again, this time deleting its prefix after.
if [ -n "$S3" ]; then
  sed 's/cleanup: false/cleanup: true/' "$OUT/s3whole-prep.yaml" > "$OUT/s3whole-clean.yaml"
  "$BR" run "$OUT/s3whole-clean.yaml" --progress never > /dev/null
fi
rm -rf "$BASE/data"
