#!/usr/bin/env bash
# Start the storage servers the object-storage tests use, on loopback only:
#   MinIO (S3)            127.0.0.1:9000
#   versitygw (S3)        127.0.0.1:9100   (a second S3 implementation, POSIX backend)
#   Azurite (Azure Blob)  127.0.0.1:10000   (telemetry off)
#   fake-gcs-server (GCS) 127.0.0.1:4443
# create the `benchrun` bucket/container on each, and write endpoints and keys to
# tests/.state/storage.env (shell-sourceable KEY=VALUE), which the Rust tests read.
# Idempotent: servers already running are reused, so a second call takes a second.
#
# BENCHRUN_STORAGE_EXTRA_ADDR=10.88.0.1 also exposes the S3 server on that address (a socat
# forward), for pods behind a CNI bridge that cannot reach the host's 127.0.0.1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cache.sh"
"$HERE/install.sh"

S=$STATE_DIR/storage
mkdir -p "$S/pids" "$S/logs" "$S/minio" "$S/versitygw" "$S/azurite" "$S/fakegcs"
AZ=$BENCHRUN_CACHE/storage/azurite-${AZURITE_VERSION:-3.35.0}
BUCKET=benchrun
S3_KEY=benchrun-admin
S3_SECRET=benchrun-secret-key-0123
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
# Azurite's well-known development account (public, documented by Microsoft).
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

alive() { [ -f "$S/pids/$1.pid" ] && kill -0 "$(cat "$S/pids/$1.pid")" 2>/dev/null; }

# start NAME CMD...: run CMD detached, logging to $S/logs/NAME.log, unless it already runs.
start() {
  local name=$1; shift
  if alive "$name"; then return 0; fi
  echo ">>> starting $name"
  setsid nohup "$@" > "$S/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$S/pids/$name.pid"
}

# wait_http NAME URL: wait until URL answers any HTTP status (up to 60 s).
wait_http() {
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null --max-time 2 "$2"; then return 0; fi
    if ! alive "$1"; then echo "$1 exited; log:" >&2; tail -20 "$S/logs/$1.log" >&2; exit 1; fi
    sleep 0.5
  done
  echo "$1 did not answer at $2 within 60 s; log:" >&2; tail -20 "$S/logs/$1.log" >&2; exit 1
}

MINIO_ROOT_USER=$S3_KEY MINIO_ROOT_PASSWORD=$S3_SECRET MINIO_BROWSER=off \
  MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
  start minio "$STORAGE_BIN/minio" server "$S/minio" --quiet \
    --address 127.0.0.1:9000 --console-address 127.0.0.1:9001
# versitygw's own defaults, except keep-alive (off by default: every response would close
# its connection, which no S3 deployment under load does).
ROOT_ACCESS_KEY_ID=$S3_KEY ROOT_SECRET_ACCESS_KEY=$S3_SECRET \
  start versitygw "$STORAGE_BIN/versitygw" --port 127.0.0.1:9100 --region us-east-1 \
    --keep-alive --quiet posix "$S/versitygw"
start azurite "$AZ/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort 10000 \
  --location "$S/azurite" --skipApiVersionCheck --loose --disableTelemetry
start fakegcs "$STORAGE_BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port 4443 \
  -public-host 127.0.0.1:4443 -external-url http://127.0.0.1:4443 \
  -backend filesystem -filesystem-root "$S/fakegcs" -log-level warn
if [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ]; then
  command -v socat >/dev/null || apt_install socat
  start s3-extra socat "TCP-LISTEN:9000,bind=$BENCHRUN_STORAGE_EXTRA_ADDR,fork,reuseaddr" TCP:127.0.0.1:9000
fi

wait_http minio http://127.0.0.1:9000/minio/health/live
wait_http versitygw http://127.0.0.1:9100/
wait_http azurite http://127.0.0.1:10000/
wait_http fakegcs http://127.0.0.1:4443/storage/v1/b
if [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ]; then
  # Fails (with socat's log) when the address does not exist on this host yet.
  wait_http s3-extra "http://$BENCHRUN_STORAGE_EXTRA_ADDR:9000/minio/health/live"
fi

# Buckets. Each create accepts "already exists", so reruns are harmless.
# The tests' bucket, and the one examples/benchmarkrun-*.yaml name (they run as written).
for b in "$BUCKET" benchrun-bucket; do
  code=$(curl -s -o "$S/logs/mkbucket.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_KEY:$S3_SECRET" "http://127.0.0.1:9000/$b")
  case $code in 200|409) ;; *) echo "creating S3 bucket $b failed: HTTP $code" >&2; cat "$S/logs/mkbucket.out" >&2; exit 1;; esac
  # versitygw, as AWS, requires the payload's hash header (here: of the empty body).
  code=$(curl -s -o "$S/logs/mkbucket.out" -w '%{http_code}' -X PUT \
    -H "x-amz-content-sha256: $EMPTY_SHA256" \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_KEY:$S3_SECRET" "http://127.0.0.1:9100/$b")
  case $code in 200|409) ;; *) echo "creating versitygw bucket $b failed: HTTP $code" >&2; cat "$S/logs/mkbucket.out" >&2; exit 1;; esac
  code=$(curl -s -o "$S/logs/mkbucket.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data "{\"name\":\"$b\"}" http://127.0.0.1:4443/storage/v1/b)
  case $code in 200|409) ;; *) echo "creating GCS bucket $b failed: HTTP $code" >&2; cat "$S/logs/mkbucket.out" >&2; exit 1;; esac
done
python3 "$HERE/azure_container.py" http://127.0.0.1:10000 "$AZ_ACCOUNT" "$AZ_KEY" "$BUCKET"

{
  echo "# Written by tests/storage/up.sh. Loopback test servers only."
  echo "BENCHRUN_S3_ENDPOINT=http://127.0.0.1:9000"
  echo "BENCHRUN_S3_BUCKET=$BUCKET"
  echo "AWS_ACCESS_KEY_ID=$S3_KEY"
  echo "AWS_SECRET_ACCESS_KEY=$S3_SECRET"
  echo "AWS_REGION=us-east-1"
  echo "BENCHRUN_S3B_NAME=versitygw"
  echo "BENCHRUN_S3B_ENDPOINT=http://127.0.0.1:9100"
  echo "BENCHRUN_S3B_BUCKET=$BUCKET"
  echo "BENCHRUN_AZURE_ENDPOINT=http://127.0.0.1:10000/$AZ_ACCOUNT"
  echo "BENCHRUN_AZURE_CONTAINER=$BUCKET"
  echo "AZURE_STORAGE_ACCOUNT_NAME=$AZ_ACCOUNT"
  echo "AZURE_STORAGE_ACCOUNT_KEY=$AZ_KEY"
  echo "BENCHRUN_GCS_ENDPOINT=http://127.0.0.1:4443"
  echo "BENCHRUN_GCS_BUCKET=$BUCKET"
  echo "BENCHRUN_MINIO_BIN=$STORAGE_BIN/minio"
  if [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ]; then
    echo "BENCHRUN_S3_EXTRA_ENDPOINT=http://$BENCHRUN_STORAGE_EXTRA_ADDR:9000"
  fi
} > "$STATE_DIR/storage.env.tmp"
# Keep the settings this script does not write (servers that other checkouts sharing this
# state directory started): running it must never take a server away from their tests.
if [ -f "$STATE_DIR/storage.env" ]; then
  while IFS= read -r line; do
    case $line in '#'*|'') continue ;; esac
    grep -q "^${line%%=*}=" "$STATE_DIR/storage.env.tmp" || printf '%s\n' "$line" >> "$STATE_DIR/storage.env.tmp"
  done < "$STATE_DIR/storage.env"
fi
mv "$STATE_DIR/storage.env.tmp" "$STATE_DIR/storage.env"
echo "storage servers up; settings in $STATE_DIR/storage.env"
