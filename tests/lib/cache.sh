# shellcheck shell=bash disable=SC2034  # sourced; the variables are used by the scripts that source it
# Shared paths for the test scripts. Everything slow to build lives under $BENCHRUN_CACHE,
# outside the checkout, so a warm machine starts in seconds and a fresh one still builds it.
# Sourced, not executed.
BENCHRUN_CACHE=${BENCHRUN_CACHE:-$HOME/.cache/benchrun}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
K8S_BIN=$BENCHRUN_CACHE/k8s/$K8S_VERSION/bin
COREDNS_VERSION=${COREDNS_VERSION:-v1.13.1}
COREDNS_BIN=$BENCHRUN_CACHE/coredns/$COREDNS_VERSION/coredns
STORAGE_BIN=$BENCHRUN_CACHE/storage/bin
export GOPATH=$BENCHRUN_CACHE/go GOCACHE=$BENCHRUN_CACHE/go-build GOTOOLCHAIN=local
export PATH=/usr/local/go/bin:$PATH
# Repository root and the per-checkout state directory (kubeconfig, PIDs, endpoints).
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Normalized (no `..`): it ends up in the kubelet's podLogsDir, which must be a clean path.
STATE_DIR=$(realpath -m "${BENCHRUN_STATE:-$REPO_ROOT/tests/.state}")

# apt_install PKG...: install Debian packages that are missing, running `apt-get update` once.
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo ">>> apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# cache_lock NAME: hold $BENCHRUN_CACHE/locks/NAME.lock until the calling script exits, so two
# builds of one thing into the cache (the background prefetch of `make test` and a stage, or two
# checkouts) run one after the other; the second then finds the cache warm and returns at once.
cache_lock() {
  mkdir -p "$BENCHRUN_CACHE/locks"
  local fd
  exec {fd}>"$BENCHRUN_CACHE/locks/$1.lock"
  if ! flock -n "$fd"; then
    echo ">>> waiting for another build of $1 into the cache (the background prefetch of make test?)" >&2
    flock -w 3600 "$fd" || { echo "still locked after 60 min: $BENCHRUN_CACHE/locks/$1.lock" >&2; exit 1; }
  fi
}

# children_cpu VAR: set VAR to the CPU seconds (user + system) of this shell's finished children
# so far, from the `times` builtin. Called as a command, not in $(...): a subshell's count starts
# at zero. The difference around a step is the CPU it cost, which, unlike its wall time, does
# not depend on what else the machine ran meanwhile: the figure to compare builds by.
children_cpu() {
  local f
  f=$(mktemp)
  times > "$f"
  printf -v "$1" '%s' "$(awk 'NR==2 { s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] }; printf "%d", s }' "$f")"
  rm -f "$f"
}

# claim_target_dir DIR: make DIR, a cargo target dir that other checkouts may share (the
# cache's), this checkout's. Cargo's fingerprints of workspace crates do not depend on where the
# checkout is, and a crate counts as fresh when its sources are older than its last build: an
# edit made here before another checkout's build into DIR would look older than that build, and
# its binaries would run instead of this checkout's. So DIR remembers the checkout that last
# built into it, and another one first touches its own files (only the workspace crates then
# rebuild; dependencies stay cached).
claim_target_dir() {
  local dir=$1 mark=$1/.benchrun-checkout
  [ "$(cat "$mark" 2>/dev/null)" = "$REPO_ROOT" ] && return 0
  if [ -d "$dir" ]; then
    if git -C "$REPO_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      git -C "$REPO_ROOT" ls-files -z | (cd "$REPO_ROOT" && xargs -0 -r touch --no-create --) || true
    else
      local skip=( \( -path "$REPO_ROOT/tests/.state" -o -path "$REPO_ROOT/target" \) -prune -o )
      find "$REPO_ROOT" "${skip[@]}" -type f -print0 | xargs -0 -r touch --no-create -- || true
    fi
  fi
  { mkdir -p "$dir" && echo "$REPO_ROOT" > "$mark"; } 2>/dev/null || true
}
claim_target_dir "${CARGO_TARGET_DIR:-$BENCHRUN_CACHE/target}"
claim_target_dir "${IMAGES_TARGET_DIR:-$BENCHRUN_CACHE/target-static}"
