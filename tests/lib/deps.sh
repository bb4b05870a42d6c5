#!/usr/bin/env bash
# Install the Debian packages a stage of `make test` needs (tests/deps.txt), so `make test`
# alone passes on a fresh Debian 12 machine, as .ci/run does:
#   tests/lib/deps.sh STAGE...       install what STAGE needs (root), or name it and fail
#   tests/lib/deps.sh --packages     print every package deps.txt names (.ci/run installs them)
# Without root, a missing package is an error naming the apt-get command, never a silent skip.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$here/cache.sh"
deps=$here/../deps.txt

if [ "${1:-}" = --packages ]; then
  grep -v '^\s*#' "$deps" | awk 'NF >= 3 { print $2 }' | sort -u | tr '\n' ' '; echo
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: $0 STAGE... | --packages" >&2; exit 2; }

missing=()
while read -r tool pkg stages; do
  case "$tool" in ''|'#'*) continue ;; esac
  for want in "$@"; do
    case " $stages " in *" $want "*) ;; *) continue ;; esac
    if [[ $tool == /* ]]; then [ -e "$tool" ] && continue; else command -v "$tool" >/dev/null && continue; fi
    missing+=("$pkg")
  done
done < "$deps"
if [[ " $* " == *" lint "* ]] && ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then
  echo "cargo fmt and cargo clippy are needed: rustup component add rustfmt clippy" >&2; exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "stage $* needs: apt-get install ${missing[*]} (as root on Debian 12; or run only \`make unit local\`)" >&2
  exit 1
fi
apt_install "${missing[@]}"
