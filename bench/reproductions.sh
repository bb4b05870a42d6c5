#!/usr/bin/env bash
# The reproductions of docs/REPRODUCTIONS.md, regenerated (issue 19 §5).
#
#   bench/reproductions.sh [STUDY...]          run each study's sweep with repeats, then render
#   bench/reproductions.sh render [STUDY...]   render from the committed sweep.json (no servers)
#   bench/reproductions.sh check [STUDY...]    exit 1 when a committed table is not what
#                                              `render` makes of the committed sweep.json, or
#                                              docs/REPRODUCTIONS.md does not quote it as it is
#
# STUDY: 000 (examples/sweep-range-engine.yaml), 001 (sweep-extra-head.yaml), 001-head
# (sweep-head-before-get.yaml), 002 (sweep-single-stream.yaml), 003 (sweep-chunked-read.yaml);
# all of them by default (render and check: those with a sweep.json).
#
# A run writes docs/reproductions/STUDY/sweep.json (every repeat's summary) and run.json (date,
# commit, load average, repeats); `render` writes report.md and the charts there
# (`benchrun-worker report` of sweep.json: each combination's median repeat) and table.md
# (bench/reproductions_table.py: medians over the repeats, the change against the baseline,
# and whether `benchrun-worker compare` finds it significant in every repeat pair).
#
# REPEATS=3 sets `matrix.repeats`; DURATION=8s replaces each file's `duration` (for a quick
# check of the script only: figures of a shortened run are not the study's). BR is the
# worker binary: the release build for a run, the debug build (`make local` builds it) for
# render and check; both render the same bytes. The S3 studies need tests/storage/up.sh's
# MinIO (tests/.state/storage.env, or BENCHRUN_STATE).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$HOME/.cache/benchrun/target}
ALL=(000 001 001-head 002 003)

mode=run
case ${1:-} in render | check) mode=$1; shift ;; esac
if [ "$mode" = run ]; then BR=${BR:-$TARGET/release/benchrun-worker}; else BR=${BR:-$TARGET/debug/benchrun-worker}; fi
[ -x "$BR" ] || { echo "no worker binary at $BR (cargo build -p benchrun-worker, or set BR)" >&2; exit 2; }

# study STUDY -> "sweep-file|title|labels": the example file, the title, a short label per
# combination in sweep order (`NAME>REF`: compared with REF, not with the sweep's baseline).
study() {
  case $1 in
    000) echo "sweep-range-engine|000: the range engine against object size|4MiB-off,4MiB-on>4MiB-off,8MiB-off,8MiB-on>8MiB-off,16MiB-off,16MiB-on>16MiB-off,32MiB-off,32MiB-on>32MiB-off" ;;
    001) echo "sweep-extra-head|001: the 60/30/10 mix, range engine and pre-stat, extra HEADs emulated|mix-off,mix-on,mix-on-prestat,HEAD-emul-off,HEAD-emul-on>mix-on,HEAD-emul-on-prestat>mix-on-prestat" ;;
    001-head) echo "sweep-head-before-get|001: a HEAD before every GET (read.headBeforeGet)|no-HEAD-off,no-HEAD-on,HEAD-off,HEAD-on>no-HEAD-on" ;;
    002) echo "sweep-single-stream|002: single-stream download against chunk size|64KiB,64-256KiB-adaptive>64KiB,1MiB>64-256KiB-adaptive,whole>1MiB" ;;
    003) echo "sweep-chunked-read|003: chunked against whole-file reads, file:// and direct://|file-whole,file-256KiB,file-1MiB,file-4MiB,direct-whole,direct-256KiB>direct-whole,direct-1MiB>direct-whole,direct-4MiB>direct-whole" ;;
    *) echo "unknown study '$1' (one of: ${ALL[*]})" >&2; return 1 ;;
  esac
}

# render STUDY OUTDIR: report.md, the charts and table.md of docs/reproductions/STUDY/sweep.json
# (and run.json) into OUTDIR.
render() {
  local dir=$REPO/docs/reproductions/$1 out=$2 spec file title labels tmp
  spec=$(study "$1"); IFS='|' read -r file title labels <<< "$spec"
  tmp=$(mktemp -d); mkdir -p "$out"
  "$BR" report "$dir/sweep.json" --out "$tmp" > /dev/null
  python3 "$HERE/reproductions_table.py" "$BR" "$dir" "$labels" "$title" "$file" > "$tmp/table.md"
  rm -f "$out"/*.svg "$out/report.md" "$out/table.md"
  cp "$tmp"/* "$out"/
  rm -rf "$tmp"
}

# run STUDY: the sweep with REPEATS repeats (a temporary copy of the example file).
run() {
  local dir=$REPO/docs/reproductions/$1 spec file title labels yaml overrides=""
  spec=$(study "$1"); IFS='|' read -r file title labels <<< "$spec"
  yaml=$(mktemp --suffix .yaml)
  # The matrix's repeats replaced (or added), the duration when DURATION is set.
  awk -v r="${REPEATS:-3}" -v d="${DURATION:-}" '
    /^  repeats:/ { next }
    /^duration:/ && d != "" { print "duration: " d; next }
    { print }
    /^matrix:/ { print "  repeats: " r }' "$REPO/examples/$file.yaml" > "$yaml"
  [ -z "${DURATION:-}" ] || overrides=", \`duration: $DURATION\` (shortened: not the study's figures)"
  mkdir -p "$dir"
  python3 - "$dir/run.json" "$1" "${REPEATS:-3}" "$overrides" "$(git -C "$REPO" rev-parse --short HEAD)" <<'P'
import datetime, json, os, sys
path, study, repeats, overrides, commit = sys.argv[1:6]
load = open("/proc/loadavg").read().split()[:3]
json.dump({"study": study, "repeats": int(repeats), "overrides": overrides, "commit": commit,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "loadavg": ", ".join(load), "cores": os.cpu_count()}, open(path, "w"), indent=1)
P
  echo ">>> $1: $file.yaml, repeats ${REPEATS:-3}, load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$BR" run "$yaml" --progress never --summary "$dir/sweep.json"
  rm -f "$yaml"
}

studies=("$@")
if [ ${#studies[@]} -eq 0 ]; then
  for s in "${ALL[@]}"; do
    if [ "$mode" = run ] || [ -f "$REPO/docs/reproductions/$s/sweep.json" ]; then studies+=("$s"); fi
  done
fi
for s in "${studies[@]}"; do study "$s" > /dev/null; done

case $mode in
  run)
    # The S3 studies read MinIO's keys from files (credentialsDir in the example files).
    STATE=$(realpath -m "${BENCHRUN_STATE:-$REPO/tests/.state}")
    if [ -f "$STATE/storage.env" ]; then
      (set -a; . "$STATE/storage.env"; mkdir -p /tmp/benchrun-minio-creds
       printf '%s' "$AWS_ACCESS_KEY_ID" > /tmp/benchrun-minio-creds/accessKeyId
       printf '%s' "$AWS_SECRET_ACCESS_KEY" > /tmp/benchrun-minio-creds/secretAccessKey)
    fi
    for s in "${studies[@]}"; do run "$s"; render "$s" "$REPO/docs/reproductions/$s"; done
    ;;
  render)
    for s in "${studies[@]}"; do render "$s" "$REPO/docs/reproductions/$s"; done
    ;;
  check)
    bad=0
    for s in "${studies[@]}"; do
      tmp=$(mktemp -d)
      render "$s" "$tmp"
      for f in "$tmp"/*; do
        if ! cmp -s "$f" "$REPO/docs/reproductions/$s/$(basename "$f")"; then
          echo "docs/reproductions/$s/$(basename "$f") is not what bench/reproductions.sh render $s makes of its sweep.json" >&2
          bad=1
        fi
      done
      # docs/REPRODUCTIONS.md quotes every table of table.md: each must be there as it is.
      if ! python3 - "$REPO/docs/reproductions/$s/table.md" "$REPO/docs/REPRODUCTIONS.md" <<'P'
import sys
table, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
blocks = [b for b in table.split("\n\n") if b.startswith("|")]
sys.exit(any(b.strip() not in doc for b in blocks))
P
      then
        echo "docs/REPRODUCTIONS.md does not quote every table of docs/reproductions/$s/table.md as it is" >&2
        bad=1
      fi
      rm -rf "$tmp"
    done
    exit $bad
    ;;
esac
