#!/usr/bin/env bash
# Stop the storage servers tests/storage/up.sh started, by the PIDs it recorded (nothing else).
# Their data stays in tests/.state/storage; pass --wipe to delete it too.
set -euo pipefail
. "$(dirname "$0")/../lib/cache.sh"
S=$STATE_DIR/storage
for f in "$S"/pids/*.pid; do
  [ -e "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    echo ">>> stopping $(basename "$f" .pid) ($pid)"
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$f"
done
rm -f "$STATE_DIR/storage.env"
if [ "${1:-}" = "--wipe" ]; then rm -rf "$S"; fi
