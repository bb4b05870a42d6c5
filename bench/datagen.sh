#!/usr/bin/env bash
# The data generator (issue 28, item 1): its speed on one core, and what it costs a PUT.
#
#   bench/datagen.sh            REPS=3 PUT_OBJECTS=1024 STREAMS=16 to change
#   BR_BEFORE=/path/to/benchrun-worker bench/datagen.sh   adds the PUT rows of another build
#                                (e.g. one before the keyed generator) to the same rounds, and
#                                its generator speed beside this build's
#
# 1. `benchrun-worker datagen-speed` (hidden): GiB/s generated into a 4 MiB buffer on one
#    thread, and GiB/s verified (every sector regenerated and compared), for the default data
#    and for dedupRatio 2 / compressRatio 3.
# 2. PUT of PUT_OBJECTS x 1 MiB to MinIO on 127.0.0.1 with STREAMS streams, rounds
#    interleaved: benchrun (this build, and BR_BEFORE when given) beside `rclone copy` of the
#    same number of 1 MiB files from tmpfs, each measured from outside the same way
#    (bench/peer_round.py: wall time, CPU of the child processes per GiB), benchrun's own
#    CPU-s/GiB of its measured stage beside.
# Figures go to stdout; BENCHMARKS.md records them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tests/lib/cache.sh"

REPS=${REPS:-3}
STREAMS=${STREAMS:-16}
PUT_OBJECTS=${PUT_OBJECTS:-1024}
MIB=1048576
apt_install rclone python3
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BR=$CARGO_TARGET_DIR/release/benchrun-worker
OUT=${OUT:-$STATE_DIR/bench-datagen}; rm -rf "$OUT"; mkdir -p "$OUT"

echo "== 1. generator, one thread ($(nproc) cores here, load $(cut -d' ' -f1 /proc/loadavg))"
for args in "--dedup-ratio 1 --compress-ratio 1" "--dedup-ratio 2 --compress-ratio 3"; do
  # shellcheck disable=SC2086
  echo "$args: $("$BR" datagen-speed --seconds 3 $args | tr '\n' ' ')"
  if [ -n "${BR_BEFORE:-}" ]; then
    # shellcheck disable=SC2086
    echo "  before: $("$BR_BEFORE" datagen-speed --seconds 3 $args | tr '\n' ' ')"
  fi
done

echo
echo "== 2. PUT of $PUT_OBJECTS x 1 MiB to MinIO, $STREAMS streams, $REPS rounds"
"$REPO_ROOT/tests/storage/up.sh" > /dev/null
set -a; . "$STATE_DIR/storage.env"; set +a
EP=$BENCHRUN_S3_ENDPOINT B=$BENCHRUN_S3_BUCKET
cat > "$OUT/put.yaml" <<Y
target: s3://$B/bench-datagen/put/
totalOps: $PUT_OBJECTS
concurrency: $STREAMS
objectSize: 1MiB
ops: [{ op: put }]
dataset: { prepare: false, cleanup: false }
storage: { endpoint: '$EP', allowHttp: true }
Y
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Minio \
  RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY \
  RCLONE_CONFIG_BENCH_ENDPOINT=$EP RCLONE_CONFIG_BENCH_REGION=us-east-1
unset AWS_CA_BUNDLE
RC=(rclone --config /dev/null --s3-disable-checksum --ignore-checksum)
SRC=/dev/shm/benchrun-datagen-src
rm -rf "$SRC"; mkdir -p "$SRC"
trap 'rm -rf "$SRC"' EXIT
for f in $(seq 0 $((PUT_OBJECTS - 1))); do
  head -c $MIB /dev/urandom > "$SRC/$(printf 'obj-%08d' "$f")"
done
python3 -c 'import json,sys; print(json.dumps([sys.argv[1:]]))' "${RC[@]}" copy "$SRC" \
  "bench:$B/bench-datagen/put-rclone/" --transfers "$STREAMS" --checkers "$STREAMS" --no-check-dest \
  --no-traverse --multi-thread-streams 0 > "$OUT/rclone-put.json"
FMT='%-16s %5s %8s %8s %9s %8s %9s %7s %7s %6s %6s\n'
printf "$FMT" tool round ops/s MiB/s cpu-s/GiB own-ops own-cpu p50ms p99ms req/op errors
bench_round() { # binary summary
  python3 -c 'import json,sys; print(json.dumps([sys.argv[1:]]))' "$1" run "$OUT/put.yaml" \
    --progress never --summary "$2" > "$OUT/br.json"
  python3 "$HERE/peer_round.py" "$PUT_OBJECTS" $MIB "$2" "$OUT/br.json"
}
for r in $(seq 1 "$REPS"); do
  # shellcheck disable=SC2046
  printf "$FMT" benchrun-put "$r" $(bench_round "$BR" "$OUT/put-$r.json")
  if [ -n "${BR_BEFORE:-}" ]; then
    # shellcheck disable=SC2046
    printf "$FMT" before-put "$r" $(bench_round "$BR_BEFORE" "$OUT/put-before-$r.json")
  fi
  # shellcheck disable=SC2046
  printf "$FMT" rclone-copy "$r" $(python3 "$HERE/peer_round.py" "$PUT_OBJECTS" $MIB - "$OUT/rclone-put.json")
done | tee "$OUT/put.txt"
python3 - "$OUT/put.txt" <<'P'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] != "tool":
        rows.setdefault(f[0], []).append((float(f[2]), float(f[4])))
med = {t: (statistics.median(o for o, _ in v), statistics.median(c for _, c in v)) for t, v in rows.items()}
for t in ("benchrun-put", "before-put"):
    if t in med:
        (bo, bc), (po, pc) = med[t], med["rclone-copy"]
        print(f"median {t} vs rclone-copy: {bo / po:.2f}x its ops/s (wall), {bc / pc:.2f}x its client CPU-s/GiB ({bc:.3f} vs {pc:.3f})")
P
for p in put put-rclone; do "${RC[@]}" purge "bench:$B/bench-datagen/$p/" 2> /dev/null || true; done
