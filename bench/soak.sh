#!/usr/bin/env bash
# Soak of the standalone worker (issue 9 §4): a mixed GET/PUT/STAT/LIST workload on a local
# directory for SOAK_SECONDS (default 600) with /metrics scraped every second throughout.
# Checks: no operation errors, every scrape answered, memory flat (RSS at the end of the run
# within SOAK_RSS_SLACK, default 20%, of RSS 30 s in), the summary's counts equal the final
# scrape's counters, the timeline exact and bounded (past an hour: 5-minute entries). Prints
# the figures for docs/RELIABILITY.md.
#
#   make soak          or    SOAK_SECONDS=60 bench/soak.sh [DIR]
#   SOAK_SECONDS=4500 bench/soak.sh     a run past the first hour (its timeline compacted)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
SECS=${SOAK_SECONDS:-600}
SLACK=${SOAK_RSS_SLACK:-20}
DIR=${1:-/var/tmp}/benchrun-soak
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BIN=$CARGO_TARGET_DIR/release/benchrun-worker
rm -rf "$DIR"; mkdir -p "$DIR"
cat > "$DIR/workload.yaml" <<YML
target: file://$DIR/data
duration: ${SECS}s
concurrency: 8
rateLimit: 2000
ops:
  - { op: get, weight: 60 }
  - { op: put, weight: 30 }
  - { op: stat, weight: 9 }
  - { op: list, weight: 1 }
objectSize: { uniform: { min: 4KiB, max: 256KiB } }
dataset: { objects: 256 }
write: { maxObjects: 64 }
YML
"$BIN" run "$DIR/workload.yaml" --summary "$DIR/summary.json" --progress never \
  --metrics-addr 127.0.0.1:0 2> "$DIR/stderr.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
addr=
for _ in $(seq 1 600); do
  addr=$(sed -n 's|^metrics on http://\(.*\)/metrics$|\1|p' "$DIR/stderr.log")
  [ -n "$addr" ] && break
  sleep 0.1
done
[ -n "$addr" ] || { echo "FAIL: no metrics address" >&2; cat "$DIR/stderr.log" >&2; exit 1; }
rss() { awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || echo 0; }
scrapes=0 failed=0 rss_30='' rss_end=0 t=0
while kill -0 "$pid" 2>/dev/null; do
  if curl -sf --max-time 2 "http://$addr/metrics" > "$DIR/metrics.txt.tmp"; then
    mv "$DIR/metrics.txt.tmp" "$DIR/metrics.txt"; scrapes=$((scrapes + 1))
  elif kill -0 "$pid" 2>/dev/null && grep -q '^benchrun_stage 3' "$DIR/metrics.txt" 2>/dev/null; then
    failed=$((failed + 1))   # a refused scrape while the run is still running
  fi
  r=$(rss); [ "$r" -gt 0 ] && rss_end=$r
  [ $t -eq 30 ] && rss_30=$r
  t=$((t + 1)); sleep 1
done
wait "$pid" || { echo "FAIL: the worker exited $?" >&2; tail "$DIR/stderr.log" >&2; exit 1; }
python3 - "$DIR/summary.json" "$DIR/metrics.txt" "$scrapes" "$failed" "${rss_30:-0}" "$rss_end" "$SLACK" <<'PY'
import json, sys
summary, metrics, scrapes, failed, rss30, rssend, slack = sys.argv[1:]
s = json.load(open(summary))
scrapes, failed, rss30, rssend, slack = int(scrapes), int(failed), int(rss30), int(rssend), int(slack)
errors = {op: v["errors"] for op, v in s["ops"].items()}
counts = {op: v["count"] for op, v in s["ops"].items()}
scraped = {}
for line in open(metrics):
    if line.startswith("benchrun_ops_total{"):
        op = line.split('op="')[1].split('"')[0]
        scraped[op] = int(float(line.rsplit(" ", 1)[1]))
print(f"soak: {s['elapsedSeconds']:.0f} s, ops {counts}, errors {errors}")
print(f"soak: {scrapes} scrapes answered, {failed} refused; RSS {rss30} KiB at 30 s, {rssend} KiB at the end")
bad = []
if any(errors.values()): bad.append(f"operation errors: {errors}")
if failed: bad.append(f"{failed} scrapes refused")
if rss30 and rssend > rss30 * (100 + slack) / 100: bad.append(f"RSS grew {rss30} -> {rssend} KiB")
# The last scrape is at most ~1 s before the end: behind the summary by at most a second of
# operations (the rate limit, 2000/s), never ahead of it.
behind = {op: n - scraped.get(op, 0) for op, n in counts.items()}
if not scraped or any(not 0 <= d <= 2000 for d in behind.values()):
    bad.append(f"last scrape {scraped} does not match summary {counts}")
# Runs of any length: the timeline is exact (its entries add up to the ops counted) and
# bounded (one entry a second for the first hour, one per 5 minutes after: docs/REPORTS.md).
tl = [e for e in s.get("timeline", []) if not e.get("warmup")]
spans = {}
for e in tl: spans[e.get("span", 1)] = spans.get(e.get("span", 1), 0) + 1
size = len(open(summary).read())
print(f"soak: timeline {len(tl)} entries (by span: {dict(sorted(spans.items()))}), summary {size:,} bytes of JSON")
if sum(e["ops"] for e in tl) != sum(counts.values()):
    bad.append(f"timeline ops {sum(e['ops'] for e in tl)} != counted {sum(counts.values())}")
late = [e for e in tl if e["second"] >= 3600 and e.get("span", 1) != 300]
if late: bad.append(f"{len(late)} timeline entries after the first hour are not 5-minute spans")
if len(tl) > 3600 + (s["elapsedSeconds"] - 3600) / 300 + 2:
    bad.append(f"{len(tl)} timeline entries for {s['elapsedSeconds']:.0f} s: not bounded")
for b in bad: print("FAIL:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
