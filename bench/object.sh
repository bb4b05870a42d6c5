#!/usr/bin/env bash
# Object storage benchmarks against MinIO on loopback (issue 3's performance checks).
#
#   bench/object.sh                 both parts;  SECS=10 REPS=3 RATE_MIB=16 to change
#   bench/object.sh seed-gcs BUCKET PREFIX N SIZE   seed fake-gcs-server (for examples/gcs-*.yaml)
#
# 1. GET and PUT of 1 MiB objects, concurrency 16, rounds interleaved: benchrun (ops/s, MiB/s,
#    p50/p99, client CPU-s/GiB, requests/op) vs rclone moving the same objects with 16
#    transfers, with MinIO's CPU seconds in each round (a server-bound round shows as such)
#    and the 1-minute load average before it (the machine's idle state).
# 2. Range engine on one 256 MiB object: single GET vs 8 MiB ranges x 8 in flight,
#    (a) behind bench/bwproxy.py limiting each connection to RATE_MIB MiB/s, (b) direct.
# Figures go to stdout; BENCHMARKS.md records them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/lib/cache.sh"

if [ "${1:-}" = seed-gcs ]; then
  bucket=$2 prefix=$3 n=$4 size=$5
  for i in $(seq 0 $((n - 1))); do
    name=$(printf '%sbenchrun/obj-%08d' "$prefix" "$i")
    head -c "$size" /dev/urandom | curl -sf -o /dev/null -X POST --data-binary @- \
      -H 'Content-Type: application/octet-stream' \
      "http://127.0.0.1:4443/upload/storage/v1/b/$bucket/o?uploadType=media&name=${name//\//%2F}"
  done
  exit 0
fi

SECS=${SECS:-10}
REPS=${REPS:-3}
RATE_MIB=${RATE_MIB:-16}
apt_install rclone python3 curl
"$REPO_ROOT/tests/storage/up.sh" > /dev/null
set -a; . "$STATE_DIR/storage.env"; set +a
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BR=$CARGO_TARGET_DIR/release/benchrun-worker
OUT=$STATE_DIR/bench-object; rm -rf "$OUT"; mkdir -p "$OUT"
EP=$BENCHRUN_S3_ENDPOINT B=$BENCHRUN_S3_BUCKET
STORAGE="storage: { endpoint: '$EP', allowHttp: true }"

summary() { # json [op] -> "ops/s MiB/s p50 p99 cpu-s/GiB requests/op errors"
  python3 - "$1" "${2:-get}" <<'P'
import json,sys; s=json.load(open(sys.argv[1])); op=sys.argv[2]; r=s["report"][op]; p=s["process"]; o=s["ops"][op]
gib=o["bytes"]/2**30; cpu=p["cpuUserSeconds"]+p["cpuSystemSeconds"]
print(f'{r["opsPerSec"]:.0f} {r["mibPerSec"]:.0f} {r["p50Ms"]:.1f} {r["p99Ms"]:.1f} {cpu/gib if gib else 0:.2f} {r["requestsPerOp"]:.1f} {r["errors"]}')
P
}

MINIO_PID=$(cat "$STATE_DIR/storage/pids/minio.pid")
TCK=$(getconf CLK_TCK)
server_cpu() { awk -v t="$TCK" '{printf "%.2f", ($14 + $15) / t}' "/proc/$MINIO_PID/stat"; }
FMT='%-16s %5s %8s %8s %8s %8s %10s %7s %6s %8s %6s\n'
header() { printf "$FMT" tool round ops/s MiB/s p50ms p99ms cpu-s/GiB req/op errors srv-cpu-s load1; }
# row TOOL ROUND CMD...: CMD prints the figures; adds MinIO's CPU seconds and the load before.
row() {
  local load s0 figs s1
  load=$(cut -d' ' -f1 /proc/loadavg); s0=$(server_cpu)
  figs=$("${@:3}"); s1=$(server_cpu)
  # shellcheck disable=SC2086
  printf "$FMT" "$1" "$2" $figs "$(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b - a}')" "$load"
}
bench_round() { # yaml json op
  "$BR" run "$1" --progress never --summary "$2" > /dev/null 2>&1
  summary "$2" "$3"
}

echo "== 1. GET and PUT of 1 MiB objects on MinIO, concurrency 16, ${SECS}s, $REPS rounds"
cat > "$OUT/prep-get.yaml" <<Y
target: s3://$B/bench/get/
totalOps: 1
ops: [{ op: stat }]
dataset: { objects: 512, size: 1MiB, cleanup: false }
$STORAGE
Y
"$BR" run "$OUT/prep-get.yaml" --progress never > /dev/null 2>&1
cat > "$OUT/get.yaml" <<Y
target: s3://$B/bench/get/
duration: ${SECS}s
concurrency: 16
ops: [{ op: get }]
dataset: { prepare: false, cleanup: false }
$STORAGE
Y
# PUTs overwrite 512 keys; signed: the SigV4 payload hash of every body (storage.signPayload).
for sign in false true; do
  cat > "$OUT/put-sign-$sign.yaml" <<Y
target: s3://$B/bench/put/
duration: ${SECS}s
concurrency: 16
objectSize: 1MiB
ops: [{ op: put }]
write: { maxObjects: 512 }
dataset: { prepare: false, cleanup: false }
storage: { endpoint: '$EP', allowHttp: true, signPayload: $sign }
Y
done
# rclone moves the same 512 objects with 16 transfers between MinIO and tmpfs, repeatedly for
# SECS seconds, with its checksums off (--ignore-checksum, --s3-disable-checksum).
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Minio \
  RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  RCLONE_CONFIG_BENCH_ENDPOINT=$EP RCLONE_CONFIG_BENCH_REGION=us-east-1
# rclone 1.60 refuses AWS_CA_BUNDLE with its own transport ("LoadCustomCABundleError"); the
# endpoint is plain http anyway.
unset AWS_CA_BUNDLE
rclone_round() { # get|put
  python3 - "$SECS" "$1" <<'P'
import os, resource, shutil, subprocess, sys, time
secs, mode = float(sys.argv[1]), sys.argv[2]
shm = "/dev/shm/benchrun-rclone"; src = shm + "-src"; n = files = 0
flags = ["--transfers", "16", "--checkers", "16", "--no-check-dest", "--ignore-checksum",
         "--no-traverse", "--s3-disable-checksum", "--multi-thread-streams", "0", "--config", "/dev/null"]
if mode == "put":
    os.makedirs(src, exist_ok=True)
    for i in range(512):
        with open(f"{src}/obj-{i:08d}", "wb") as f:
            f.write(os.urandom(1 << 20))
t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    if mode == "get":
        shutil.rmtree(shm, ignore_errors=True)
        subprocess.run(["rclone", "copy", "bench:benchrun/bench/get/", shm] + flags, check=True)
    else:
        subprocess.run(["rclone", "copy", src, "bench:benchrun/bench/put-rclone/"] + flags, check=True)
    files += 512; n += 1
el = time.monotonic() - t0
shutil.rmtree(shm, ignore_errors=True); shutil.rmtree(src, ignore_errors=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = ru.ru_utime + ru.ru_stime
print(f"{files/el:.0f} {files/el:.0f} - - {cpu/(files/1024):.2f} - 0")
P
}
header
for r in $(seq 1 "$REPS"); do
  row benchrun-get "$r" bench_round "$OUT/get.yaml" "$OUT/get-$r.json" get
  row rclone-get "$r" rclone_round get
  row benchrun-put "$r" bench_round "$OUT/put-sign-false.yaml" "$OUT/put-$r.json" put
  row benchrun-put-sig "$r" bench_round "$OUT/put-sign-true.yaml" "$OUT/put-signed-$r.json" put
  row rclone-put "$r" rclone_round put
done

echo
echo "== 2. range engine, one 256 MiB object (8 MiB ranges, 8 in flight) vs one GET"
cat > "$OUT/prep-range.yaml" <<Y
target: s3://$B/bench/range/
totalOps: 1
ops: [{ op: stat }]
dataset: { objects: 1, size: 256MiB, cleanup: false }
$STORAGE
Y
"$BR" run "$OUT/prep-range.yaml" --progress never > /dev/null 2>&1
PORT=19000
python3 "$HERE/bwproxy.py" $PORT "${EP#http://}" $((RATE_MIB * 1048576)) &
PROXY=$!
trap 'kill $PROXY 2>/dev/null || true' EXIT
sleep 0.5
range_yaml() { # file endpoint ops enabled [read]
  cat > "$1" <<Y
target: s3://$B/bench/range/
totalOps: $3
concurrency: 1
ops: [{ op: get }]
dataset: { prepare: false, cleanup: false }
rangeEngine: { enabled: $4, minSplitSize: 64MiB, chunkSize: 8MiB, maxConcurrentRanges: 8 }
read: ${5:-{\}}
storage: { endpoint: '$2', allowHttp: true }
Y
}
range_yaml "$OUT/lim-single.yaml" "http://127.0.0.1:$PORT" 1 false
range_yaml "$OUT/lim-range.yaml" "http://127.0.0.1:$PORT" 2 true
range_yaml "$OUT/direct-single.yaml" "$EP" 10 false
range_yaml "$OUT/direct-range.yaml" "$EP" 10 true
# Like for like: a single GET that also lands the whole object in one buffer.
range_yaml "$OUT/direct-whole.yaml" "$EP" 10 false "{ wholeObject: true }"
printf '%-28s %5s %8s %8s %8s %8s %10s %7s %6s\n' case round ops/s MiB/s p50ms p99ms cpu-s/GiB req/op errors
for r in $(seq 1 "$REPS"); do
  for c in lim-single lim-range direct-single direct-whole direct-range; do
    "$BR" run "$OUT/$c.yaml" --progress never --summary "$OUT/$c-$r.json" > /dev/null 2>&1
    printf '%-28s %5s %8s %8s %8s %8s %10s %7s %6s\n' "$c" "$r" $(summary "$OUT/$c-$r.json")
  done
done
python3 - "$OUT" "$REPS" "$RATE_MIB" <<'P'
import json, statistics, sys
out, reps, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
med = lambda c: statistics.median(json.load(open(f"{out}/{c}-{r}.json"))["report"]["get"]["mibPerSec"] for r in range(1, reps + 1))
ls, lr, ds, dw, dr = (med(c) for c in ("lim-single", "lim-range", "direct-single", "direct-whole", "direct-range"))
print(f"\nmedian MiB/s: limited {rate} MiB/s/conn: single {ls:.0f}, ranged {lr:.0f} -> {lr/ls:.1f}x (target >= 3x)")
print(f"median MiB/s: unlimited: single streaming GET {ds:.0f}, ranged {dr:.0f} -> {100*(dr/ds-1):+.1f}% (target >= -5%)")
print(f"median MiB/s: unlimited: single GET into one buffer {dw:.0f}, ranged {dr:.0f} -> {100*(dr/dw-1):+.1f}%")
P
