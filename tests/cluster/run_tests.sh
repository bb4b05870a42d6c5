#!/usr/bin/env bash
# Run every cluster test binary against the running test cluster, several at a time, and print
# each one's output whole when it ends (never interleaved) with its time.
#
# Why in parallel: a cluster test spends nearly all its time waiting (pods starting, a run's
# measured stage, cron minutes), so one binary at a time left both cores idle for ~25 min of a
# cold CI run. Each test makes its own namespace and runs its own controller confined to it,
# so tests in different binaries do not see each other's runs. Two binaries change the cluster
# for everyone and run alone, after the others: cluster_faults (stops a kubelet, restarts the
# API server) and cluster_decode (installs a looser CRD for a moment, which would let the
# schema tests' bad manifests through).
#
#   tests/cluster/run_tests.sh            (make cluster runs it; the cluster must be up)
#   BENCHRUN_CLUSTER_JOBS=1 tests/cluster/run_tests.sh     one binary at a time
#   tests/cluster/run_tests.sh cluster_s3 cluster_tls      only these binaries
#   tests/cluster/run_tests.sh --build-only   compile them and stop (make cluster runs this
#                                             while the cluster starts: that waits on I/O)
#
# Exits non-zero when any test fails, after all have run, naming the failed binaries.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../lib/cache.sh"
cd "$REPO_ROOT" || exit 1
build_only=
[ "${1:-}" = --build-only ] && { build_only=1; shift; }
# Three at a time: the tests mostly wait, and worker pods request no CPU. On a cold run's
# cluster (2 cores, 2026-11-27) the pool (every binary but the exclusive ones) took ~880 s at
# two, with builds and a 20-claim control-plane benchmark beside it, and 553 s at three.
jobs=${BENCHRUN_CLUSTER_JOBS:-3}
case $jobs in ''|*[!0-9]*|0) echo "BENCHRUN_CLUSTER_JOBS must be a positive number, not '$jobs'" >&2; exit 2 ;; esac
logs=$STATE_DIR/logs/tests
mkdir -p "$logs"

# Alone, in this order, after the parallel ones (see the header).
read -ra EXCLUSIVE <<< "cluster_decode cluster_faults"
# Started first: the longest, so the pool ends together (a cold run on 2 cores, 2026-11-27:
# plugin_controlplane 281 s, s3 232 s, cluster 228 s, plugin 180 s, schedule 133 s; every
# other binary of the pool 62 s or less).
read -ra FIRST <<< "cluster_plugin_controlplane cluster_s3 cluster cluster_plugin cluster_schedule"

# Build every binary once (compiling, if needed, uses both cores before any test starts), and
# list "name dir executable" for each, as `cargo test` would run it.
list=$(mktemp)
trap 'rm -f "$list"' EXIT
build() {
  local pkg=$1; shift
  cargo test -p "$pkg" --no-run --message-format=json-render-diagnostics "$@" | python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], os.path.dirname(m["manifest_path"]), m["executable"])
' >> "$list" || { echo "building the cluster tests of $pkg failed" >&2; exit 1; }
}
tests_of() { for f in "$@"; do printf -- '--test %s ' "$(basename "$f" .rs)"; done; }
# shellcheck disable=SC2046  # one --test NAME pair per word
{
  build benchrun-test-support $(tests_of tests/support/tests/cluster*.rs)
  build benchrun-operator $(tests_of operator/tests/cluster*.rs)
  build kubectl-benchrun $(tests_of kubectl-benchrun/tests/cluster*.rs)
}
[ -n "$build_only" ] && { echo ">>> cluster tests built: $(wc -l < "$list") binaries"; exit 0; }
declare -A dir_of exe_of
names=()
while read -r name dir exe; do
  # Binaries are known by file name: two crates' tests of one name would run one of them twice.
  [ -z "${exe_of[$name]:-}" ] || { echo "two cluster test binaries are named $name (${dir_of[$name]} and $dir): rename one" >&2; exit 2; }
  dir_of[$name]=$dir exe_of[$name]=$exe
  names+=("$name")
done < "$list"
if [ $# -gt 0 ]; then
  for n in "$@"; do [ -n "${exe_of[$n]:-}" ] || { echo "no cluster test binary named $n (have: ${names[*]})" >&2; exit 2; }; done
  names=("$@")
fi

declare -A pid_name started took
failed=()
running=0
start() {
  local n=$1
  echo ">>> $(date -u +%T) start $n"
  ( cd "${dir_of[$n]}" && CARGO_MANIFEST_DIR=${dir_of[$n]} exec "${exe_of[$n]}" --include-ignored --test-threads=1 ) \
    > "$logs/$n.log" 2>&1 < /dev/null &
  pid_name[$!]=$n
  started[$n]=$(date +%s)
  running=$((running + 1))
}
# Wait for any one binary, then print its output whole.
reap() {
  local pid status n
  wait -n -p pid
  status=$?
  n=${pid_name[$pid]}
  running=$((running - 1))
  took[$n]=$(( $(date +%s) - started[$n] ))
  echo ">>> ---------------- $n (${took[$n]} s) ----------------"
  cat "$logs/$n.log"
  if [ "$status" -ne 0 ]; then
    echo ">>> $n FAILED (status $status; log $logs/$n.log)"
    failed+=("$n")
  else
    echo ">>> $n passed in ${took[$n]} s"
  fi
}
run_pool() {
  local width=$1; shift
  for n in "$@"; do
    while [ "$running" -ge "$width" ]; do reap; done
    start "$n"
  done
  while [ "$running" -gt 0 ]; do reap; done
}
member() { local x=$1; shift; for y in "$@"; do [ "$x" = "$y" ] && return 0; done; return 1; }

# The cluster's own checks first, alone: when they fail, every other test would fail far from
# the cause.
checks=() pool=() alone=()
for n in "${FIRST[@]}"; do member "$n" "${names[@]}" && ! member "$n" "${EXCLUSIVE[@]}" && pool+=("$n"); done
for n in "${names[@]}"; do
  if [ "$n" = cluster_smoke ] || [ "$n" = cluster_dns ]; then checks+=("$n")
  elif member "$n" "${EXCLUSIVE[@]}"; then alone+=("$n")
  elif ! member "$n" "${pool[@]}"; then pool+=("$n")
  fi
done
t0=$(date +%s)
run_pool 1 "${checks[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo ">>> the cluster's own checks failed (${failed[*]}): not running the other cluster tests" >&2
  exit 1
fi
run_pool "$jobs" "${pool[@]}"
for n in "${EXCLUSIVE[@]}"; do member "$n" "${alone[@]}" && run_pool 1 "$n"; done

echo ">>> cluster tests: $(( $(date +%s) - t0 )) s in all, $jobs at a time; each binary:"
for n in "${!took[@]}"; do printf '>>>   %-18s %5s s\n' "$n" "${took[$n]}"; done | sort -k3 -n -r
if [ ${#failed[@]} -gt 0 ]; then
  echo ">>> FAILED cluster test binaries: ${failed[*]} (logs in $logs)" >&2
  exit 1
fi
