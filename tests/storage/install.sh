#!/usr/bin/env bash
# Install the storage servers the tests use, from package registries, cached under
# $BENCHRUN_CACHE: MinIO, versitygw (a second S3 implementation) and fake-gcs-server (Go
# module proxy), Azurite (npm).
# A warm cache returns at once.
set -euo pipefail
. "$(dirname "$0")/../lib/cache.sh"
MINIO_VERSION=${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
FAKEGCS_VERSION=${FAKEGCS_VERSION:-v1.56.1}
AZURITE_VERSION=${AZURITE_VERSION:-3.35.0}
VERSITYGW_VERSION=${VERSITYGW_VERSION:-v1.8.0}
mkdir -p "$STORAGE_BIN"
cache_lock storage-install
export CGO_ENABLED=0

if [ ! -x "$STORAGE_BIN/fake-gcs-server" ]; then
  echo ">>> go install fake-gcs-server@$FAKEGCS_VERSION"
  GOBIN=$STORAGE_BIN go install -trimpath -ldflags "-s -w" "github.com/fsouza/fake-gcs-server@$FAKEGCS_VERSION"
fi
if [ ! -x "$STORAGE_BIN/minio" ]; then
  echo ">>> go install minio@$MINIO_VERSION (first time only; ~7 min on 2 cores)"
  GOBIN=$STORAGE_BIN go install -trimpath -ldflags "-s -w" "github.com/minio/minio@$MINIO_VERSION"
fi
if [ ! -x "$STORAGE_BIN/versitygw" ]; then
  echo ">>> go install versitygw@$VERSITYGW_VERSION (first time only; ~2 min on 2 cores)"
  GOBIN=$STORAGE_BIN go install -trimpath -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi
AZ=$BENCHRUN_CACHE/storage/azurite-$AZURITE_VERSION
if [ ! -x "$AZ/node_modules/.bin/azurite-blob" ]; then
  echo ">>> npm install azurite@$AZURITE_VERSION"
  mkdir -p "$AZ"
  (cd "$AZ" && npm install --no-audit --no-fund --silent "azurite@$AZURITE_VERSION")
fi
