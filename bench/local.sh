#!/usr/bin/env bash
# benchrun vs fio on the same files in the same run (issues 2 and 12's local read checks).
#
#   bench/local.sh [DIR]          DIR must be on a disk-backed filesystem (default /var/tmp)
#   SECS=8 REPS=5 bench/local.sh  seconds per run, interleaved rounds
#
# The dataset has the chunked-read report's shape: FILES x SIZE (64 x 8 MiB), written once by
# benchrun and read by both tools in the same order (benchrun `access: sequential` walks the
# keys in order; fio gets the same files in the same order with --file_service_type=sequential
# and keeps its cache with --invalidate=0). One stream each (concurrency 1 / one fio job).
# 1. direct:// sequential read, 4 MiB chunks  vs  fio --direct=1 --bs=4M --ioengine=psync.
#    benchrun's read buffers of 2 MiB and more are 2 MiB-aligned transparent huge pages; on a
#    VM an O_DIRECT read costs per page of buffer, so the like-for-like peer is fio with
#    huge-page buffers (--mem=shmhuge, which needs vm.nr_hugepages: reserved here and restored
#    on exit). fio's default 4 KiB-page buffers and io_uring qd1/qd16 are shown alongside.
# 2. file:// buffered read, 1 MiB chunks      vs  fio --direct=0 --bs=1M --ioengine=psync.
#    benchrun's 1 MiB buffers are ordinary 4 KiB pages (below the 2 MiB huge-page size), as
#    are fio's default buffers: like for like. The page cache is warmed (every file read
#    through `cat`) right before each of these runs, for both tools. fio with
#    --gtod_reduce=1 (no per-I/O clock reads, no latency figures) is shown as fio's ceiling.
# 3. direct:// whole-object read              vs  direct:// 4 MiB chunks (the 0.01 GiB/s trap)
# Every round prints the machine's state first (load average, and the share of both CPUs busy
# over one second while nothing of ours runs), then each run; the tools' order alternates from
# round to round. The table shows medians; the ratios are medians of the per-round ratios.
# Page faults and CPU come from each tool's own accounting (fio's minf/majf/usr/sys,
# getrusage for benchrun).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$HERE/../tests/lib/cache.sh"
BASE=${1:-/var/tmp}/benchrun-bench
SECS=${SECS:-10}
REPS=${REPS:-3}
FILES=${FILES:-64}
SIZE=${SIZE:-8MiB}
apt_install fio python3
OLD_HUGE=$(cat /proc/sys/vm/nr_hugepages)
trap 'echo "$OLD_HUGE" > /proc/sys/vm/nr_hugepages' EXIT
echo $(( OLD_HUGE + 16 )) > /proc/sys/vm/nr_hugepages
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}
(cd "$REPO_ROOT" && cargo build --release -q -p benchrun-worker)
BR=$CARGO_TARGET_DIR/release/benchrun-worker
OUT=$BASE/out; rm -rf "$BASE"; mkdir -p "$OUT"

# One dataset of FILES x SIZE, written once by benchrun, read by both tools.
workload() { # name target extra-read-yaml
  cat > "$OUT/$1.yaml" <<Y
target: $2://$BASE/data
duration: ${SECS}s
concurrency: 1
ops: [{ op: get }]
dataset: { objects: $FILES, size: $SIZE, prepare: false, cleanup: false, access: sequential }
read: $3
Y
}
cat > "$OUT/prep.yaml" <<Y
target: direct://$BASE/data
totalOps: 1
ops: [{ op: stat }]
dataset: { objects: $FILES, size: $SIZE, cleanup: false }
Y
"$BR" run "$OUT/prep.yaml" --progress never > /dev/null 2>&1
# The glob expands in key order, the order benchrun's sequential access walks the listing.
FIO_FILES=$(printf '%s\n' "$BASE"/data/benchrun/obj-* | paste -sd: -)
workload direct4m direct "{ chunkSize: 4MiB }"
workload directwhole direct "{ wholeObject: true }"
workload file1m file "{ chunkSize: 1MiB }"

# Each run prints "MiB/s minor major cpu_s" and appends it to $OUT/rows (run name first).
br() { # name
  "$BR" run "$OUT/$1.yaml" --progress never --summary "$OUT/$1.json" > /dev/null 2>&1
  python3 - "$OUT/$1.json" "$1" "$ROUND" <<'P' | tee -a "$OUT/rows"
import json,sys; s=json.load(open(sys.argv[1])); r=s["report"]["get"]; p=s["process"]
print(f'{sys.argv[3]} br_{sys.argv[2]} {r["mibPerSec"]:.0f} {p["minorFaults"]} {p["majorFaults"]} {p["cpuUserSeconds"]+p["cpuSystemSeconds"]:.2f}')
P
}
fio_run() { # name direct bs engine depth [extra fio args]
  # shellcheck disable=SC2086  # $6 is a list of options
  fio --name="$1" --filename="$FIO_FILES" --rw=read --bs="$3" --direct="$2" --ioengine="$4" --iodepth="$5" ${6:-} \
      --file_service_type=sequential --time_based --runtime="$SECS" --invalidate=0 \
      --output-format=json > "$OUT/$1.fio.json"
  python3 - "$OUT/$1.fio.json" "$SECS" "$1" "$ROUND" <<'P' | tee -a "$OUT/rows"
import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; secs=float(sys.argv[2])
cpu=(j["usr_cpu"]+j["sys_cpu"])/100*secs
print(f'{sys.argv[4]} fio_{sys.argv[3]} {j["read"]["bw"]/1024:.0f} {j["minf"]} {j["majf"]} {cpu:.2f}')
P
}
warm() { cat "$BASE"/data/benchrun/obj-* > /dev/null; }
# The machine before a round: load average and the % of all CPUs busy over one second.
machine() {
  local a b
  read -ra a < <(grep '^cpu ' /proc/stat); sleep 1; read -ra b < <(grep '^cpu ' /proc/stat)
  python3 - "${a[*]}" "${b[*]}" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'P'
import sys
a=list(map(int,sys.argv[1].split()[1:])); b=list(map(int,sys.argv[2].split()[1:]))
d=[y-x for x,y in zip(a,b)]; idle=d[3]+d[4]; tot=sum(d[:8])
print(f"busy {100*(tot-idle)/max(tot,1):.0f}% of all CPUs over 1 s, load average {sys.argv[3]}")
P
}

: > "$OUT/rows"
for ROUND in $(seq "$REPS"); do
  echo "--- round $ROUND: $(machine)" | tee -a "$OUT/machine"
  if (( ROUND % 2 )); then
    fio_run dio4m 1 4M psync 1
    fio_run dio4mh 1 4M psync 1 "--mem=shmhuge --hugepage-size=2m"
    br direct4m
    br directwhole
    warm; fio_run buf1m 0 1M psync 1
    warm; fio_run buf1mg 0 1M psync 1 "--gtod_reduce=1"
    warm; br file1m
  else
    br directwhole
    br direct4m
    fio_run dio4mh 1 4M psync 1 "--mem=shmhuge --hugepage-size=2m"
    fio_run dio4m 1 4M psync 1
    warm; br file1m
    warm; fio_run buf1mg 0 1M psync 1 "--gtod_reduce=1"
    warm; fio_run buf1m 0 1M psync 1
  fi
done
ROUND=1
fio_run uring1 1 4M io_uring 1
fio_run uring16 1 4M io_uring 16

echo
python3 - "$OUT/rows" "$SECS" <<'P'
import statistics as st, sys, collections
runs = collections.defaultdict(dict)  # name -> round -> [MiB/s, minor, major, cpu]
for line in open(sys.argv[1]):
    r, name, *v = line.split(); runs[name][int(r)] = list(map(float, v))
secs = float(sys.argv[2])
def med(k): return [st.median(c) for c in zip(*runs[k].values())], len(runs[k])
rows=[('direct:// 4 MiB chunks, benchrun (huge-page buffers)','br_direct4m'),
      ('direct:// 4M, fio psync, huge-page buffers (--mem=shmhuge)','fio_dio4mh'),
      ('direct:// 4M, fio psync, default buffers','fio_dio4m'),
      ('direct:// 4M, fio io_uring qd1','fio_uring1'),('direct:// 4M, fio io_uring qd16','fio_uring16'),
      ('direct:// whole object, benchrun','br_directwhole'),
      ('file:// 1 MiB chunks (warm), benchrun','br_file1m'),('file:// 1M (warm), fio psync','fio_buf1m'),
      ('file:// 1M (warm), fio psync --gtod_reduce=1','fio_buf1mg')]
print("| run | MiB/s (median) | rounds | minor faults | major faults | CPU s | CPU-s/GiB |")
print("|---|---|---|---|---|---|---|")
for name,k in rows:
    m,n=med(k); gib=m[0]*secs/1024
    print(f"| {name} | {m[0]:.0f} | {n} | {m[1]:.0f} | {m[2]:.0f} | {m[3]:.2f} | {m[3]/gib:.3f} |")
def ratio(a, b, what, target=""):
    per=[runs[a][r][0]/runs[b][r][0] for r in sorted(runs[a]) if r in runs[b]]
    print(f"{what:<52} median {st.median(per):.3f}  rounds {' '.join(f'{x:.3f}' for x in per)} {target}")
print()
ratio('br_direct4m','fio_dio4mh',"direct:// 4M benchrun / fio psync huge-page buffers","(target >= 0.98)")
ratio('br_direct4m','fio_dio4m', "direct:// 4M benchrun / fio psync default buffers")
ratio('br_file1m','fio_buf1m',   "file:// 1M benchrun / fio psync","(target >= 1.0)")
ratio('br_file1m','fio_buf1mg',  "file:// 1M benchrun / fio psync --gtod_reduce=1")
ratio('br_directwhole','br_direct4m',"direct:// whole / chunked","(target >= 1.0, never the 0.01 GiB/s trap)")
P
rm -rf "$BASE/data"
