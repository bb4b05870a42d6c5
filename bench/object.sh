#!/usr/bin/env bash
# Object storage benchmarks against MinIO on loopback (issue 3's performance checks).
#
#   bench/object.sh                 both parts;  REPS=3 RATE_MIB=16 PARTS=12 to change
#   bench/object.sh seed-gcs BUCKET PREFIX N SIZE   seed fake-gcs-server (for examples/gcs-*.yaml)
#
# 1. GET and PUT of 1 MiB objects, 16 streams, fixed work a round, rounds interleaved:
#    benchrun against peers doing the same work the same way (rclone, s3cmd when installed;
#    see "Part 1" below): ops/s and MiB/s from the wall time of each tool's processes, and
#    their client CPU-s/GiB (getrusage of the children); benchrun's own figures (ops/s of
#    its measured stage, CPU-s/GiB, p50/p99, requests/op) beside; MinIO's CPU seconds in each
#    round (a server-bound round shows as such) and the 1-minute load average before it.
#    STREAMS=16 PER_STREAM=256 PUT_OBJECTS=1024 change the work, S3CMD_ROUNDS how many
#    rounds s3cmd takes part in (it is slow).
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

PARTS=${PARTS:-12}
REPS=${REPS:-3}
RATE_MIB=${RATE_MIB:-16}
apt_install rclone s3cmd awscli python3 curl
"$REPO_ROOT/tests/storage/up.sh" > /dev/null
set -a; . "$STATE_DIR/storage.env"; set +a
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BR=$CARGO_TARGET_DIR/release/benchrun-worker
OUT=${OUT:-$STATE_DIR/bench-object}; rm -rf "$OUT"; mkdir -p "$OUT"
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
FMT='%-16s %5s %8s %8s %9s %8s %9s %7s %7s %6s %6s %8s %6s\n'
header() { printf "$FMT" tool round ops/s MiB/s cpu-s/GiB own-ops own-cpu p50ms p99ms req/op errors srv-cpu-s load1; }
# row TOOL ROUND CMD...: CMD prints the figures; adds MinIO's CPU seconds and the load before.
row() {
  local load s0 figs s1
  load=$(cut -d' ' -f1 /proc/loadavg); s0=$(server_cpu)
  figs=$("${@:3}"); s1=$(server_cpu)
  # shellcheck disable=SC2086
  printf "$FMT" "$1" "$2" $figs "$(awk -v a="$s0" -v b="$s1" 'BEGIN{printf "%.2f", b - a}')" "$load"
}

# Part 1 is fixed work, the same for every tool: STREAMS streams each read PER_STREAM objects
# of 1 MiB once (GET), or write PUT_OBJECTS objects (PUT). The dataset is split into one
# sub-prefix per stream, bench/peer/pNN/, because a peer such as `rclone cat` reads one
# prefix's objects one after another: one process per stream for the whole round, none per
# batch, everything read discarded (to /dev/null). benchrun reads the same keys, each once
# (`totalOps`, `access: sequential` over the listed prefix), with STREAMS tasks. Every
# tool is measured from outside the same way (bench/peer_round.py: wall time from spawn to
# exit, CPU of the child processes); benchrun's own figures for its measured stage beside.
STREAMS=${STREAMS:-16}
# s3cmd moves 10-30 MiB/s here (CPU-bound in Python): S3CMD_ROUNDS=1 runs it in round 1 only.
S3CMD_ROUNDS=${S3CMD_ROUNDS:-$REPS}
PER_STREAM=${PER_STREAM:-256}
PUT_OBJECTS=${PUT_OBJECTS:-1024}
GET_OBJECTS=$((STREAMS * PER_STREAM))
MIB=1048576
case $PARTS in *1*) ;; *) SKIP1=1 ;; esac
if [ -z "${SKIP1:-}" ]; then
echo "== 1. GET and PUT of 1 MiB objects on MinIO, $STREAMS streams, $GET_OBJECTS GETs and $PUT_OBJECTS PUTs a round, $REPS rounds"
for i in $(seq 0 $((STREAMS - 1))); do
  cat > "$OUT/prep-$i.yaml" <<Y
target: s3://$B/bench/
totalOps: 1
concurrency: $STREAMS
ops: [{ op: stat }]
dataset: { prefix: $(printf 'peer/p%02d/' "$i"), objects: $PER_STREAM, size: 1MiB, cleanup: false }
$STORAGE
Y
  "$BR" run "$OUT/prep-$i.yaml" --progress never > "$OUT/prep-$i.log" 2>&1
done
cat > "$OUT/get.yaml" <<Y
target: s3://$B/bench/
totalOps: $GET_OBJECTS
concurrency: $STREAMS
ops: [{ op: get }]
dataset: { prefix: peer/, prepare: false, cleanup: false, access: sequential }
$STORAGE
Y
# PUTs write PUT_OBJECTS new keys under bench/put/; signed: the SigV4 payload hash of every
# body (storage.signPayload).
for sign in false true; do
  cat > "$OUT/put-sign-$sign.yaml" <<Y
target: s3://$B/bench/put/
totalOps: $PUT_OBJECTS
concurrency: $STREAMS
objectSize: 1MiB
ops: [{ op: put }]
dataset: { prepare: false, cleanup: false }
storage: { endpoint: '$EP', allowHttp: true, signPayload: $sign }
Y
done
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Minio \
  RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  RCLONE_CONFIG_BENCH_ENDPOINT=$EP RCLONE_CONFIG_BENCH_REGION=us-east-1
# rclone 1.60 refuses AWS_CA_BUNDLE with its own transport ("LoadCustomCABundleError"); the
# endpoint is plain http anyway.
unset AWS_CA_BUNDLE
RC=(rclone --config /dev/null --s3-disable-checksum --ignore-checksum)
# s3cmd: one process per stream too (it has no concurrency of its own).
cat > "$OUT/s3cfg" <<C
[default]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
host_base = ${EP#http://}
host_bucket = ${EP#http://}
use_https = False
signature_v2 = False
check_ssl_certificate = False
C
S3CMD=()
if command -v s3cmd > /dev/null; then S3CMD=(s3cmd -c "$OUT/s3cfg" --no-progress --quiet); fi
# awscli (Debian's /usr/bin/aws; a pip-installed `aws` earlier in PATH is another version):
# PUT only, `aws s3 cp --recursive` from the same tmpfs files with 16 concurrent requests.
# Its GET to /dev/null is `aws s3 cp s3://.../KEY -`, one process per object (no recursive
# copy to standard output): not like for like, so left out.
AWS=()
if [ -x /usr/bin/aws ]; then
  printf '[default]\nregion = us-east-1\ns3 =\n  max_concurrent_requests = %s\n  multipart_threshold = 64MB\n' \
    "$STREAMS" > "$OUT/awsconfig"
  AWS=(env AWS_CONFIG_FILE="$OUT/awsconfig" /usr/bin/aws --endpoint-url "$EP" --no-cli-pager)
fi
# The PUT sources: PUT_OBJECTS files of 1 MiB in tmpfs, one directory per stream (rclone and
# s3cmd read local files; benchrun generates its bodies in memory).
SRC=/dev/shm/benchrun-peer-src
rm -rf "$SRC"
for f in $(seq 0 $((PUT_OBJECTS - 1))); do
  d=$SRC/$(printf 'p%02d' $((f % STREAMS))); mkdir -p "$d"
  head -c $MIB /dev/urandom > "$d/$(printf 'obj-%08d' "$f")"
done
trap 'rm -rf "$SRC"' EXIT
# cmds FILE ARGV-TEMPLATE...: a JSON list of argument vectors, one per stream, NN replaced by
# the stream's number.
cmds() {
  python3 - "$STREAMS" "${@:2}" > "$1" <<'P'
import json, sys
n, tmpl = int(sys.argv[1]), sys.argv[2:]
print(json.dumps([[a.replace("NN", f"{i:02d}") for a in tmpl] for i in range(n)]))
P
}
cmds "$OUT/rclone-get.json" "${RC[@]}" cat "bench:$B/bench/peer/pNN/"
# rclone's start-up and listing alone: the same 16 processes on empty prefixes (its part of
# rclone's CPU per GiB when each process reads few objects).
cmds "$OUT/rclone-empty.json" "${RC[@]}" cat "bench:$B/bench/peer-empty/pNN/"
python3 -c 'import json,sys; print(json.dumps([sys.argv[1:]]))' "${RC[@]}" copy "$SRC" \
  "bench:$B/bench/put-rclone/" --transfers "$STREAMS" --checkers "$STREAMS" --no-check-dest \
  --no-traverse --multi-thread-streams 0 > "$OUT/rclone-put.json"
if [ ${#S3CMD[@]} -gt 0 ]; then
  cmds "$OUT/s3cmd-get.json" "${S3CMD[@]}" get --recursive "s3://$B/bench/peer/pNN/" -
  cmds "$OUT/s3cmd-put.json" "${S3CMD[@]}" put --recursive "$SRC/pNN/" "s3://$B/bench/put-s3cmd/pNN/"
fi
if [ ${#AWS[@]} -gt 0 ]; then
  python3 -c 'import json,sys; print(json.dumps([sys.argv[1:]]))' "${AWS[@]}" s3 cp --recursive \
    --only-show-errors "$SRC" "s3://$B/bench/put-aws/" > "$OUT/aws-put.json"
fi
# Every tool reads what it should: the bytes of one stream's prefix, once, outside the rounds.
want=$((PER_STREAM * MIB))
got=$("${RC[@]}" cat "bench:$B/bench/peer/p00/" | wc -c)
[ "$got" = "$want" ] || { echo "rclone cat read $got bytes of p00/, want $want" >&2; exit 1; }
if [ ${#S3CMD[@]} -gt 0 ]; then
  got=$("${S3CMD[@]}" get --recursive "s3://$B/bench/peer/p00/" - | wc -c)
  [ "$got" = "$want" ] || { echo "s3cmd read $got bytes of p00/, want $want: left out" >&2; S3CMD=(); }
fi
peer() { python3 "$HERE/peer_round.py" "$@"; }
benchrun_cmd() { python3 -c 'import json,sys; print(json.dumps([sys.argv[1:]]))' "$BR" run "$1" --progress never --summary "$2" > "$OUT/br.json"; }
bench_round() { # yaml json objects
  benchrun_cmd "$1" "$2"; peer "$3" $MIB "$2" "$OUT/br.json"
}
for r in $(seq 1 "$REPS"); do
  [ "$r" != 1 ] || header
  row benchrun-get "$r" bench_round "$OUT/get.yaml" "$OUT/get-$r.json" "$GET_OBJECTS"
  row rclone-cat "$r" peer "$GET_OBJECTS" $MIB - "$OUT/rclone-get.json"
  row rclone-cat-empty "$r" peer 0 $MIB - "$OUT/rclone-empty.json"
  [ ${#S3CMD[@]} -eq 0 ] || [ "$r" -gt "$S3CMD_ROUNDS" ] || row s3cmd-get "$r" peer "$GET_OBJECTS" $MIB - "$OUT/s3cmd-get.json"
  row benchrun-put "$r" bench_round "$OUT/put-sign-false.yaml" "$OUT/put-$r.json" "$PUT_OBJECTS"
  row benchrun-put-sig "$r" bench_round "$OUT/put-sign-true.yaml" "$OUT/put-signed-$r.json" "$PUT_OBJECTS"
  row rclone-copy "$r" peer "$PUT_OBJECTS" $MIB - "$OUT/rclone-put.json"
  [ ${#S3CMD[@]} -eq 0 ] || [ "$r" -gt "$S3CMD_ROUNDS" ] || row s3cmd-put "$r" peer "$PUT_OBJECTS" $MIB - "$OUT/s3cmd-put.json"
  [ ${#AWS[@]} -eq 0 ] || row awscli-put "$r" peer "$PUT_OBJECTS" $MIB - "$OUT/aws-put.json"
done | tee "$OUT/part1.txt"
python3 - "$OUT/part1.txt" <<'P'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] != "tool" and f[2] != "-":
        rows.setdefault(f[0], []).append((float(f[2]), float(f[4])))
med = {t: (statistics.median(o for o, _ in v), statistics.median(c for _, c in v)) for t, v in rows.items()}
for base, peers in (("benchrun-get", ("rclone-cat", "s3cmd-get")), ("benchrun-put", ("rclone-copy", "s3cmd-put", "awscli-put"))):
    for p in peers:
        if p in med and base in med:
            (bo, bc), (po, pc) = med[base], med[p]
            print(f"median {base} vs {p}: {bo / po:.2f}x its ops/s (wall), {bc / pc:.2f}x its client CPU-s/GiB")
P
rm -rf "$SRC"
# What part 1 wrote to MinIO (4-7 GiB) is removed.
for p in peer put put-rclone put-aws put-s3cmd; do "${RC[@]}" purge "bench:$B/bench/$p/" 2> /dev/null || true; done
fi
case $PARTS in *2*) ;; *) exit 0 ;; esac

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
    # shellcheck disable=SC2046,SC2183  # summary prints the row's 7 fields, split on purpose
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
