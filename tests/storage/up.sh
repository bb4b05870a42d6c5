#!/usr/bin/env bash
# Start the storage servers the object-storage tests use, on loopback only:
#   MinIO (S3)            127.0.0.1:9000
#   versitygw (S3)        127.0.0.1:9100   (a second S3 implementation, POSIX backend)
#   Azurite (Azure Blob)  127.0.0.1:10000   (telemetry off)
#   fake-gcs-server (GCS) 127.0.0.1:4443
#   MinIO with TLS (S3)   127.0.0.1:9443   (its own data; a server certificate for 127.0.0.1
#                                           (and 10.88.0.1) signed by a private CA made here,
#                                           once, with openssl)
#   a second S3 gateway   127.0.0.1:9010   (a socat forward to :9000: two gateways, one store)
# create the `benchrun` bucket/container on each, and write endpoints and keys to
# tests/.state/storage.env (shell-sourceable KEY=VALUE), which the Rust tests read.
# Idempotent: servers already running are reused, so a second call takes a second.
#
# BENCHRUN_STORAGE_EXTRA_ADDR=10.88.0.1 also exposes the S3 servers on that address (socat
# forwards of :9000 and :9443; the TLS certificate then names that IP too), for pods behind
# a CNI bridge that cannot reach the host's 127.0.0.1.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib/cache.sh"
"$HERE/install.sh"

S=$STATE_DIR/storage
mkdir -p "$S/pids" "$S/logs" "$S/minio" "$S/minio-tls" "$S/versitygw" "$S/azurite" "$S/fakegcs"
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

# wait_http NAME URL [CURL ARGS...]: wait until URL answers any HTTP status (up to 60 s).
wait_http() {
  local name=$1 url=$2; shift 2
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null --max-time 2 "$@" "$url"; then return 0; fi
    if ! alive "$name"; then echo "$name exited; log:" >&2; tail -20 "$S/logs/$name.log" >&2; exit 1; fi
    sleep 0.5
  done
  echo "$name did not answer at $url within 60 s; log:" >&2; tail -20 "$S/logs/$name.log" >&2; exit 1
}

# tls_certs DIR: a private CA (ca.crt) and a server certificate of MinIO's names (public.crt,
# private.key) for 127.0.0.1, the test cluster's pod bridge 10.88.0.1 (tests/lib/cluster.sh;
# operator/tests/cluster_tls.rs forwards from there) and BENCHRUN_STORAGE_EXTRA_ADDR, made
# once; the server's is made again when the addresses change (MinIO reloads it).
tls_certs() {
  local d=$1 sans="IP:127.0.0.1,IP:10.88.0.1"
  [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ] && sans="$sans,IP:$BENCHRUN_STORAGE_EXTRA_ADDR"
  command -v openssl >/dev/null || apt_install openssl
  mkdir -p "$d"
  if [ ! -s "$d/ca.crt" ] || [ ! -s "$d/ca.key" ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$d/ca.key" -sha256 -days 3650 -subj "/CN=benchrun test CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$d/ca.crt"
    rm -f "$d/public.crt"
  fi
  if [ ! -s "$d/public.crt" ] || [ "$(cat "$d/sans" 2>/dev/null)" != "$sans" ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/private.key.tmp" 2>/dev/null
    openssl req -new -key "$d/private.key.tmp" -subj "/CN=127.0.0.1" -out "$d/server.csr"
    printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
      "$sans" > "$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -sha256 -days 825 -extfile "$d/server.ext" -out "$d/public.crt.tmp" 2>/dev/null
    mv "$d/private.key.tmp" "$d/private.key"
    mv "$d/public.crt.tmp" "$d/public.crt"
    echo "$sans" > "$d/sans"
  fi
}
TLS=$S/tls
tls_certs "$TLS"

MINIO_ROOT_USER=$S3_KEY MINIO_ROOT_PASSWORD=$S3_SECRET MINIO_BROWSER=off \
  MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
  start minio "$STORAGE_BIN/minio" server "$S/minio" --quiet \
    --address 127.0.0.1:9000 --console-address 127.0.0.1:9001
# The TLS server: its own MinIO (one MinIO cannot serve http and https), its own data.
MINIO_ROOT_USER=$S3_KEY MINIO_ROOT_PASSWORD=$S3_SECRET MINIO_BROWSER=off \
  MINIO_UPDATE=off MINIO_CALLHOME_ENABLE=off \
  start minio-tls "$STORAGE_BIN/minio" server "$S/minio-tls" --quiet --certs-dir "$TLS" \
    --address 127.0.0.1:9443 --console-address 127.0.0.1:9444
# A second gateway of the same store, as the nodes of a cluster are.
command -v socat >/dev/null || apt_install socat
start s3-gw2 socat "TCP-LISTEN:9010,bind=127.0.0.1,fork,reuseaddr,nodelay" TCP:127.0.0.1:9000,nodelay
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
  start s3-extra socat "TCP-LISTEN:9000,bind=$BENCHRUN_STORAGE_EXTRA_ADDR,fork,reuseaddr" TCP:127.0.0.1:9000
  start s3-tls-extra socat "TCP-LISTEN:9443,bind=$BENCHRUN_STORAGE_EXTRA_ADDR,fork,reuseaddr" TCP:127.0.0.1:9443
fi

wait_http minio http://127.0.0.1:9000/minio/health/live
wait_http versitygw http://127.0.0.1:9100/
wait_http azurite http://127.0.0.1:10000/
wait_http fakegcs http://127.0.0.1:4443/storage/v1/b
wait_http minio-tls https://127.0.0.1:9443/minio/health/live --cacert "$TLS/ca.crt"
wait_http s3-gw2 http://127.0.0.1:9010/minio/health/live
if [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ]; then
  # Fails (with socat's log) when the address does not exist on this host yet.
  wait_http s3-extra "http://$BENCHRUN_STORAGE_EXTRA_ADDR:9000/minio/health/live"
  wait_http s3-tls-extra "https://$BENCHRUN_STORAGE_EXTRA_ADDR:9443/minio/health/live" --cacert "$TLS/ca.crt"
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
code=$(curl -s -o "$S/logs/mkbucket.out" -w '%{http_code}' -X PUT --cacert "$TLS/ca.crt" \
  --aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_KEY:$S3_SECRET" "https://127.0.0.1:9443/$BUCKET")
case $code in 200|409) ;; *) echo "creating S3 bucket $BUCKET over TLS failed: HTTP $code" >&2; cat "$S/logs/mkbucket.out" >&2; exit 1;; esac
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
  echo "BENCHRUN_S3_TLS_ENDPOINT=https://127.0.0.1:9443"
  echo "BENCHRUN_S3_TLS_CA=$TLS/ca.crt"
  echo "BENCHRUN_S3_GATEWAY2_ENDPOINT=http://127.0.0.1:9010"
  if [ -n "${BENCHRUN_STORAGE_EXTRA_ADDR:-}" ]; then
    echo "BENCHRUN_S3_EXTRA_ENDPOINT=http://$BENCHRUN_STORAGE_EXTRA_ADDR:9000"
    echo "BENCHRUN_S3_TLS_EXTRA_ENDPOINT=https://$BENCHRUN_STORAGE_EXTRA_ADDR:9443"
  fi
} > "$STATE_DIR/storage.env.tmp"
mv "$STATE_DIR/storage.env.tmp" "$STATE_DIR/storage.env"
echo "storage servers up; settings in $STATE_DIR/storage.env"
