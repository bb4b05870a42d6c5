# benchrun: `make test` is the one test command (CI runs it through .ci/run).
#
# Stages, in order, each failing loudly (tests/lib/stages.sh runs them and prints each one's time;
# meanwhile tests/lib/prefetch.sh builds the later stages' servers and images in the background
# at nice 19). Each stage first installs the Debian packages it needs (tests/lib/deps.sh, from
# tests/deps.txt; root): `make test` alone passes on a fresh Debian 12 machine.
#   lint          cargo fmt --check, no import cycles between modules, clippy -D warnings, every
#                 tool the stages call is installed by a script (tests/lint/tools.py), every
#                 link and path named by README.md and docs/ exists (tests/lint/links.py), the
#                 operator deletes only through its one deletion module (tests/lint/deletes.py),
#                 every crate's Layout names each of its modules and no other (tests/lint/layouts.py)
#   chart         helm lint/template of charts/benchrun per ci/ overlay, schema, RBAC, dashboard
#                 queries against the registered metric names, CRDs in sync (offline)
#   unit          unit tests of every crate (no servers)
#   local         the worker binary and engine on real files (file://, direct://, tmpfs refusal):
#                 every test file of the worker but object_*, of the operator but cluster*
#   storage       MinIO, Azurite, fake-gcs-server on 127.0.0.1, then the object storage tests
#   cluster       a real 2-node Kubernetes cluster (kube-proxy, CoreDNS, storage Services, a
#                 dynamic provisioner behind the default StorageClass), worker/operator images,
#                 kwok (simulated nodes for the fleet test), the cluster tests of every crate
#                 (tests/cluster/run_tests.sh: three binaries at a time, the disruptive ones
#                 alone), then the chart installed as users do (tests/helm/e2e.sh: README.md's
#                 quick start command by command, in-cluster operator, Prometheus,
#                 dashboard)
# Slow builds (Kubernetes, etcd, storage servers, cargo target dirs) are cached under
# ~/.cache/benchrun, outside the checkout.

SHELL := /bin/bash
# BENCHRUN_CACHE=/elsewhere gives a whole separate cache (a cold run beside a warm one).
export BENCHRUN_CACHE ?= $(HOME)/.cache/benchrun
export CARGO_TARGET_DIR ?= $(BENCHRUN_CACHE)/target
export CARGO_TERM_COLOR ?= never
CARGO ?= cargo

.PHONY: test lint chart unit local storage cluster build release images krew soak bench-local bench-object bench-bufpool clean-state

test:
	MAKE="$(MAKE)" tests/lib/stages.sh lint chart unit local storage cluster

lint:
	tests/lib/deps.sh lint
	$(CARGO) fmt --all --check
	python3 tests/lint/module_cycles.py api/src worker/src operator/src kubectl-benchrun/src
	python3 tests/lint/tools.py .
	python3 tests/lint/links.py .
	python3 tests/lint/server_tests.py .
	python3 tests/lint/deletes.py .
	python3 tests/lint/layouts.py api/src/lib.rs worker/src/lib.rs operator/src/lib.rs
	$(CARGO) clippy --workspace --all-targets -- -D warnings

chart:
	tests/lib/deps.sh chart
	tests/helm/test.sh

unit:
	tests/lib/deps.sh unit
	$(CARGO) test --workspace --lib --bins

local:
	tests/lib/deps.sh local
	$(CARGO) test -p benchrun-worker $(patsubst worker/tests/%.rs,--test %,$(filter-out worker/tests/object_%,$(wildcard worker/tests/*.rs)))
	$(CARGO) test -p benchrun-api $(patsubst api/tests/%.rs,--test %,$(wildcard api/tests/*.rs))
	$(CARGO) test -p benchrun-operator $(patsubst operator/tests/%.rs,--test %,$(filter-out operator/tests/cluster%,$(wildcard operator/tests/*.rs)))
	BR=$(CARGO_TARGET_DIR)/debug/benchrun-worker bench/reproductions.sh check

storage:
	tests/lib/deps.sh storage
	tests/storage/up.sh
	$(CARGO) test -p benchrun-worker $(patsubst worker/tests/%.rs,--test %,$(wildcard worker/tests/object_*.rs)) -- --include-ignored

cluster:
	tests/lib/deps.sh cluster
# The test binaries compile while the cluster starts (which mostly waits on its daemons).
	mkdir -p "$(BENCHRUN_CACHE)/logs"
	tests/cluster/run_tests.sh --build-only > "$(BENCHRUN_CACHE)/logs/cluster-tests-build.log" 2>&1 & build=$$!; \
	  tests/cluster/up.sh && tests/cluster/image.sh && tests/cluster/kwok.sh up; up=$$?; \
	  wait $$build || { tail -n 40 "$(BENCHRUN_CACHE)/logs/cluster-tests-build.log"; exit 1; }; exit $$up
	tests/cluster/run_tests.sh
	tests/helm/e2e.sh

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p benchrun-worker

# OCI image archives of the worker and operator, without Docker (see images/build.sh).
images:
	images/build.sh $(or $(IMAGES_DIR),target/images)

# 10-minute soak of the standalone worker with /metrics scraped every second (not in `test`).
# The krew archive of the kubectl plugin and its manifest with the real sha256, in target/krew/.
krew:
	kubectl-benchrun/krew/build.sh

soak:
	bench/soak.sh

bench-local:
	bench/local.sh

bench-object:
	bench/object.sh

bench-bufpool:
	bench/bufpool.sh

clean-state:
	-tests/cluster/down.sh --wipe
	-tests/storage/down.sh
