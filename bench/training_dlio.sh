#!/usr/bin/env bash
# benchrun's training reads side by side with DLIO (dlio-benchmark, MLPerf Storage's tool) on one
# local disk: a unet3d-shaped workload scaled down (SAMPLES samples of ~SIZE_MIB MiB, stdev
# STDEV_MIB, batches of 7, 4 readers per accelerator, 636 ms of compute per step, ACC
# accelerators = DLIO's MPI ranks), one epoch per run, ROUNDS interleaved rounds (the tool that
# goes first alternates), the page cache of both datasets dropped (posix_fadvise DONTNEED)
# before every run, the load average recorded before each. Prints samples/s and AU from each.
# A third contender, `s3dlio` (bench/training_s3dlio.py: s3dlio's get_many as the reader, the
# same emulated accelerators in Python threads), reads benchrun's very files.
#
# DLIO reads its own copy of the dataset, of the same shape, on the same disk: its reader opens
# NPZ files (numpy.load), benchrun reads its own files of raw bytes; neither can read the
# other's format.
#
# Install (once; see BENCHMARKS.md for why --no-deps):
#   apt-get install -y openmpi-bin libopenmpi-dev
#   python3 -m venv /root/venv-dlio
#   /root/venv-dlio/bin/pip install --no-deps dlio-benchmark
#   /root/venv-dlio/bin/pip install mpi4py numpy h5py omegaconf hydra-core pandas psutil \
#       pydftracer==1.0.2 pyyaml Pillow torch tensorflow-cpu
#   /root/venv-dlio/bin/pip install s3dlio
#   cargo build --release -p benchrun-worker
#   BR=target/release/benchrun-worker bench/training_dlio.sh
# Env: BR, VENV (/root/venv-dlio), DIR (/var/tmp/benchrun-dlio: a local disk, not tmpfs),
#      ROUNDS (3), ACC (2), SAMPLES (168), SIZE_MIB (8), STDEV_MIB (4), COMPUTE_MS (636).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BR="${BR:-$HERE/../target/release/benchrun-worker}"
VENV="${VENV:-/root/venv-dlio}"
DIR="${DIR:-/var/tmp/benchrun-dlio}"
ROUNDS="${ROUNDS:-3}"
ACC="${ACC:-2}"
SAMPLES="${SAMPLES:-168}"
SIZE_MIB="${SIZE_MIB:-8}"
STDEV_MIB="${STDEV_MIB:-4}"
COMPUTE_MS="${COMPUTE_MS:-636}"
PY="$VENV/bin/python"
if ! "$PY" -c 'import dlio_benchmark.main, torch, tensorflow, mpi4py' 2>/dev/null; then
  echo "DLIO is not installed in $VENV (see the install steps at the top of $0):" >&2
  "$PY" -c 'import dlio_benchmark.main, torch, tensorflow, mpi4py' >&2 || true
  exit 2
fi
OUT="$DIR/out"
mkdir -p "$DIR/dlio" "$DIR/benchrun" "$OUT"
SIZE=$((SIZE_MIB * 1048576))
STDEV=$((STDEV_MIB * 1048576))
COMPUTE_S=$(python3 -c "print($COMPUTE_MS / 1000)")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dlio() { # dlio OUTDIR OVERRIDES...: one DLIO run
  local out=$1; shift
  mpirun --oversubscribe -np "$ACC" "$VENV/bin/dlio_benchmark" workload=unet3d_a100 \
    ++workload.dataset.data_folder="$DIR/dlio" \
    ++workload.dataset.num_files_train="$SAMPLES" \
    ++workload.dataset.record_length="$SIZE" \
    ++workload.dataset.record_length_stdev="$STDEV" \
    ++workload.train.computation_time="$COMPUTE_S" \
    ++workload.train.epochs=1 \
    ++workload.workflow.checkpoint=False \
    ++workload.output.folder="$out" hydra.run.dir="$out" "$@" > "$out.log" 2>&1
}
cat > "$OUT/benchrun.yaml" <<Y
target: file://$DIR/benchrun
ops: [{op: get}]
concurrency: 4
training:
  preset: unet3d
  samples: $SAMPLES
  sampleSize: ${SIZE_MIB}MiB
  sampleSizeStdev: ${STDEV_MIB}MiB
  computeTime: ${COMPUTE_MS}ms
  acceleratorsPerWorker: $ACC
  epochs: 1
  minAU: 90
Y
drop() { # the page cache of both datasets (what benchrun's dropCache does before an epoch)
  "$PY" - "$DIR/dlio" "$DIR/benchrun" <<'PY'
import os, sys
for root in sys.argv[1:]:
    for d, _, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
PY
}
if [ "$(find "$DIR/dlio" -name '*.npz' | wc -l)" -lt "$SAMPLES" ]; then
  echo "generating DLIO's dataset in $DIR/dlio" >&2
  mkdir -p "$OUT/gen"
  dlio "$OUT/gen" ++workload.workflow.generate_data=True ++workload.workflow.train=False
fi
echo "preparing benchrun's dataset in $DIR/benchrun (a run whose figures are not kept)" >&2
"$BR" run "$OUT/benchrun.yaml" --progress never > /dev/null || true
printf '%-6s %-9s %12s %9s %9s %9s %8s  %s\n' round tool "samples/s" "AU mean" "AU min" "MiB/s" seconds "load avg (1m 5m 15m)"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then order="dlio benchrun s3dlio"; else order="s3dlio benchrun dlio"; fi
  for tool in $order; do
    drop
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ "$tool" = dlio ]; then
      rm -rf "$OUT/dlio-$r"
      start=$(date +%s.%N)
      dlio "$OUT/dlio-$r" ++workload.workflow.generate_data=False ++workload.workflow.train=True
      end=$(date +%s.%N)
      python3 - "$OUT/dlio-$r/summary.json" "$start" "$end" "$SIZE_MIB" "$load" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["metric"]
secs = float(sys.argv[3]) - float(sys.argv[2])
sps = m["train_throughput_mean_samples_per_second"]
au = m["train_au_mean_percentage"]
print(f"{'':6} {'dlio':9} {sps:12.2f} {au:8.1f}% {'-':>9} {m['train_io_mean_MB_per_second']:9.1f} {secs:8.1f}  {sys.argv[5]}")
PY
    elif [ "$tool" = s3dlio ]; then
      files=$(dirname "$(find "$DIR/benchrun" -type f | head -1)")
      "$PY" "$HERE/training_s3dlio.py" "file://$files/" "$ACC" 7 "$COMPUTE_S" 4 2 > "$OUT/s3dlio-$r.json"
      python3 - "$OUT/s3dlio-$r.json" "$load" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"{'':6} {'s3dlio':9} {m['samples_per_sec']:12.2f} {m['au_mean']:8.1f}% {m['au_min']:8.1f}% {m['bytes'] / 2**20 / m['seconds']:9.1f} {m['seconds']:8.1f}  {sys.argv[2]}  (AU DLIO's way {m['au_dlio']:.1f}%)")
PY
    else
      "$BR" run "$OUT/benchrun.yaml" --summary "$OUT/benchrun-$r.json" --progress never > "$OUT/benchrun-$r.txt" || true
      python3 - "$OUT/benchrun-$r.json" "$load" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
e = s["training"]["epochs"][0]
secs = e["elapsedUs"] / 1e6
au = 100.0 * e["au"]["computeUs"] / e["au"]["wallUs"]
print(f"{'':6} {'benchrun':9} {e['samples'] / secs:12.2f} {au:8.1f}% {e['au']['minAuPercent']:8.1f}% {e['bytes'] / 2**20 / secs:9.1f} {secs:8.1f}  {sys.argv[2]}")
PY
    fi | sed "s/^      /$(printf '%-6s' "$r")/"
  done
done
echo "outputs in $OUT (DLIO: dlio-N/summary.json and dlio-N.log; benchrun: benchrun-N.json)" >&2
