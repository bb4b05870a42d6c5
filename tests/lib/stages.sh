#!/usr/bin/env bash
# Run `make STAGE` for each stage in order, stop at the first that fails, and print how long each
# took (also when one fails), so a slow or failing stage is named at the end of a long log:
#   tests/lib/stages.sh lint chart unit local storage cluster
set -uo pipefail
# shellcheck source=tests/lib/cache.sh
. "$(dirname "$0")/cache.sh"
make=${MAKE:-make}
times=()
cpu_before=0 cpu_after=0
status=0
report() {
  echo ">>> stage times:"
  for t in "${times[@]}"; do echo ">>>   $t"; done
}
# The slow builds of later stages fill the cache in the background meanwhile (prefetch.sh);
# stopped with this script, so a failed `make test` leaves nothing running.
prefetch_pid=
if [ "${BENCHRUN_PREFETCH:-1}" = 1 ]; then
  cache=${BENCHRUN_CACHE:-$HOME/.cache/benchrun}
  mkdir -p "$cache/logs"
  setsid nice -n 19 "$(dirname "$0")/prefetch.sh" > "$cache/logs/prefetch.log" 2>&1 < /dev/null &
  prefetch_pid=$!
  echo ">>> background builds: $cache/logs/prefetch.log (BENCHRUN_PREFETCH=0 turns them off)"
fi
finish() {
  report
  if [ -n "$prefetch_pid" ] && kill -0 "$prefetch_pid" 2>/dev/null; then
    kill -- "-$prefetch_pid" 2>/dev/null
  fi
}
trap finish EXIT
for stage in "$@"; do
  echo ">>> $(date -u +%FT%TZ) stage $stage"
  start=$(date +%s)
  children_cpu cpu_before
  "$make" --no-print-directory "$stage"
  status=$?
  elapsed=$(( $(date +%s) - start ))
  # CPU of what the stage ran and waited for (not the servers it left running).
  children_cpu cpu_after
  cpu=$(( cpu_after - cpu_before ))
  if [ "$status" -ne 0 ]; then
    times+=("$(printf '%-8s %5ss  cpu %5ss  FAILED (status %s)' "$stage" "$elapsed" "$cpu" "$status")")
    exit "$status"
  fi
  times+=("$(printf '%-8s %5ss  cpu %5ss' "$stage" "$elapsed" "$cpu")")
done
