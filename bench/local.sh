#!/usr/bin/env bash
# benchrun vs fio on the same files in the same run (issue 2's performance checks).
#
#   bench/local.sh [DIR]          DIR must be on a disk-backed filesystem (default /var/tmp)
#
# The dataset has the chunked-read report's shape: FILES x SIZE (64 x 8 MiB), read in key order.
# 1. direct:// sequential read, 4 MiB chunks  vs  fio --direct=1 --bs=4M --ioengine=psync.
#    benchrun's read buffers are 2 MiB-aligned transparent huge pages; on a VM an O_DIRECT
#    read costs per page of buffer, so the like-for-like peer is fio with huge-page buffers
#    (--mem=shmhuge, which needs vm.nr_hugepages: reserved here and restored on exit).
#    fio's default 4 KiB-page buffers and io_uring qd1/qd16 are shown alongside.
# 2. file:// buffered read, 1 MiB chunks      vs  fio --direct=0 --bs=1M --ioengine=psync,
#    both on a warm page cache
# 3. direct:// whole-object read              vs  direct:// 4 MiB chunks (the 0.01 GiB/s trap)
# Each pair runs interleaved, REPS times; the table shows the median and the ratio.
# Page faults and CPU come from each tool's own accounting (fio's minf/majf, getrusage).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
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
"$BR" run "$OUT/prep.yaml" --progress never > /dev/null
FIO_FILES=$(ls -d "$BASE"/data/benchrun/obj-* | paste -sd: -)
workload direct4m direct "{ chunkSize: 4MiB }"
workload directwhole direct "{ wholeObject: true }"
workload file1m file "{ chunkSize: 1MiB }"

br() { # name -> "MiB/s minor major cpu_s"
  "$BR" run "$OUT/$1.yaml" --progress never --summary "$OUT/$1.json" > /dev/null
  python3 - "$OUT/$1.json" <<'P'
import json,sys; s=json.load(open(sys.argv[1])); r=s["report"]["get"]; p=s["process"]
print(f'{r["mibPerSec"]:.0f} {p["minorFaults"]} {p["majorFaults"]} {p["cpuUserSeconds"]+p["cpuSystemSeconds"]:.2f}')
P
}
fio_run() { # name direct bs engine depth [extra fio args] -> "MiB/s minor major cpu_s"
  fio --name="$1" --filename="$FIO_FILES" --rw=read --bs="$3" --direct="$2" --ioengine="$4" --iodepth="$5" ${6:-} \
      --file_service_type=sequential --time_based --runtime="$SECS" --invalidate=0 \
      --output-format=json > "$OUT/$1.fio.json"
  python3 - "$OUT/$1.fio.json" "$SECS" <<'P'
import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; secs=float(sys.argv[2])
cpu=(j["usr_cpu"]+j["sys_cpu"])/100*secs
print(f'{j["read"]["bw"]/1024:.0f} {j["minf"]} {j["majf"]} {cpu:.2f}')
P
}
warm() { cat "$BASE"/data/benchrun/obj-* > /dev/null; }

declare -A R
for i in $(seq "$REPS"); do
  R[fio_d4m]+="$(fio_run dio4m 1 4M psync 1);"
  R[fio_d4mh]+="$(fio_run dio4mh 1 4M psync 1 "--mem=shmhuge --hugepage-size=2m");"
  R[br_d4m]+="$(br direct4m);"
  R[br_dwhole]+="$(br directwhole);"
  warm
  R[fio_b1m]+="$(fio_run buf1m 0 1M psync 1);"
  R[br_b1m]+="$(br file1m);"
done
R[fio_uring1]="$(fio_run uring1 1 4M io_uring 1);"
R[fio_uring16]="$(fio_run uring16 1 4M io_uring 16);"

python3 - <<P
import statistics as st
R = {$(for k in "${!R[@]}"; do printf "'%s': '%s'," "$k" "${R[$k]}"; done)}
def med(k):
    rows=[list(map(float,x.split())) for x in R[k].strip(';').split(';')]
    return [st.median(c) for c in zip(*rows)], len(rows)
rows=[('direct:// 4 MiB chunks, benchrun (huge-page buffers)','br_d4m'),
      ('direct:// 4M, fio psync, huge-page buffers','fio_d4mh'),('direct:// 4M, fio psync, default buffers','fio_d4m'),
      ('direct:// 4M, fio io_uring qd1','fio_uring1'),('direct:// 4M, fio io_uring qd16','fio_uring16'),
      ('direct:// whole object, benchrun','br_dwhole'),
      ('file:// 1 MiB chunks (warm), benchrun','br_b1m'),('file:// 1M (warm), fio psync','fio_b1m')]
print(f"| run | MiB/s (median of n) | minor faults | major faults | CPU s |")
print("|---|---|---|---|---|")
for name,k in rows:
    m,n=med(k); print(f"| {name} | {m[0]:.0f} (n={n}) | {m[1]:.0f} | {m[2]:.0f} | {m[3]:.2f} |")
d=med('br_d4m')[0][0]/med('fio_d4mh')[0][0]; dd=med('br_d4m')[0][0]/med('fio_d4m')[0][0]; b=med('br_b1m')[0][0]/med('fio_b1m')[0][0]
w=med('br_dwhole')[0][0]/med('br_d4m')[0][0]
print()
print(f"direct:// 4M benchrun / fio psync huge-page buffers = {d:.3f} (target >= 0.95)")
print(f"direct:// 4M benchrun / fio psync default buffers   = {dd:.3f}")
print(f"file:// 1M benchrun / fio psync   = {b:.3f} (target >= 0.95)")
print(f"direct:// whole / chunked          = {w:.3f} (target >= 1.0, never the 0.01 GiB/s trap)")
P
rm -rf "$BASE/data"
