#!/usr/bin/env bash
# Fill the cache's slow builds in the background, at the lowest CPU priority, while the first
# stages of `make test` run: helm, the chart test's dashcheck, the storage servers, Kubernetes
# and etcd, CoreDNS, the test cluster's two provisioners and CSI driver, kwok and the test images' static build
# (the `test-image` profile, as tests/cluster/image.sh builds it).
# A cold cache has about half an hour of these builds, and the test stages before `cluster`
# leave a core idle much of the time (tests that wait on I/O or on a server); nice 19 takes only
# what the stages leave. Each build script holds a lock in the cache
# (cache_lock), so the stage that needs a build waits for the prefetch's copy instead of
# building it a second time, and a warm cache makes this a no-op. Installs no packages (apt's
# lock belongs to the stages) and starts no server.
#   tests/lib/prefetch.sh     (stages.sh starts it; its log: $BENCHRUN_CACHE/logs/prefetch.log)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/cache.sh
. "$here/cache.sh"
repo=$(cd "$here/../.." && pwd)
renice -n 19 $$ >/dev/null 2>&1 || true
status=0
before=0 after=0
for step in "$repo/tests/helm/install.sh" "$repo/tests/helm/dashcheck/build.sh" "$repo/tests/storage/install.sh" "$repo/tests/cluster/build.sh" \
            "$repo/tests/cluster/provisioner.sh build" \
            "$repo/tests/cluster/local_path.sh build" "$repo/tests/cluster/csi.sh build" "$repo/tests/cluster/kwok.sh install" "env IMAGES_PROFILE=test-image $repo/images/static-build.sh"; do
  echo ">>> $(date -u +%FT%TZ) prefetch: $step"
  children_cpu before
  # shellcheck disable=SC2086  # "kwok.sh install", "env VAR=... script": a command and its arguments
  $step || { echo ">>> prefetch: $step failed (the stage that needs it will build it and say why)"; status=1; }
  children_cpu after
  # Its CPU seconds: what it cost, whatever the stages took of the machine meanwhile.
  echo ">>> prefetch: $step: cpu $(( after - before ))s"
done
echo ">>> $(date -u +%FT%TZ) prefetch done (status $status)"
exit $status
