#!/usr/bin/env bash
# AU behind a bandwidth limit: a training workload reads from MinIO through bench/bwproxy.py,
# which caps each connection's download at RATE_MIB MiB/s. Each reader has a client (and so
# a connection) of its own, so the accelerator is fed at most READERS x RATE_MIB MiB/s, and
# AU = compute time / wall time is predicted as
#     computeTime x READERS x RATE / (batchSize x sampleSize)      (when below 100%)
# The script prints measured and predicted AU and their ratio (the issue asks within 5%).
#
#   BENCHRUN_STATE=/work/main/tests/.state tests/storage/up.sh
#   BR=target/release/benchrun-worker bench/training_bwproxy.sh
# Env: BR (worker binary), RATE_MIB (10), READERS (2), PORT (19010).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
STATE="${BENCHRUN_STATE:-$HERE/../tests/.state}"
set -a
. "$STATE/storage.env"
set +a
BR="${BR:-$HERE/../target/release/benchrun-worker}"
RATE_MIB="${RATE_MIB:-10}"
READERS="${READERS:-2}"
PORT="${PORT:-19010}"
EP="$BENCHRUN_S3_ENDPOINT"
OUT="$(mktemp -d)"
python3 "$HERE/bwproxy.py" "$PORT" "${EP#http://}" $((RATE_MIB * 1048576)) &
PROXY=$!
trap 'kill $PROXY 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 50); do
  (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
  sleep 0.1
done
SAMPLES=320 SIZE_MIB=1 BATCH=4 COMPUTE_MS=50
cat > "$OUT/w.yaml" <<Y
target: s3://$BENCHRUN_S3_BUCKET/bench/training-bw/
ops: [{op: get}]
concurrency: 8
storage: { endpoint: 'http://127.0.0.1:$PORT', allowHttp: true, region: us-east-1 }
training:
  samples: $SAMPLES
  sampleSize: ${SIZE_MIB}MiB
  batchSize: $BATCH
  readers: $READERS
  prefetch: 2
  acceleratorsPerWorker: 1
  computeTime: ${COMPUTE_MS}ms
  epochs: 1
Y
"$BR" run "$OUT/w.yaml" --summary "$OUT/s.json" --progress never > "$OUT/table.txt"
python3 - "$OUT/s.json" "$RATE_MIB" "$READERS" "$BATCH" "$SIZE_MIB" "$COMPUTE_MS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
rate, readers, batch, size, compute = (float(x) for x in sys.argv[2:])
e = s["training"]["epochs"][0]
au = 100.0 * e["au"]["computeUs"] / e["au"]["wallUs"]
step = batch * size / (readers * rate)  # seconds per batch the readers can supply
pred = min(100.0, 100.0 * compute / 1000 / step)
mib_s = e["bytes"] / 2**20 / (e["elapsedUs"] / 1e6)
print(f"rate {rate:g} MiB/s per connection x {readers:g} readers, batch {batch:g} x {size:g} MiB, compute {compute:g} ms")
print(f"AU measured {au:.2f}%  predicted {pred:.2f}%  ratio {au / pred:.3f}  ({e['steps']} steps, {mib_s:.1f} MiB/s, {e['elapsedUs'] / 1e6:.1f} s)")
PY
