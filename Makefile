# benchrun: `make test` is the one test command (CI runs it through .ci/run).
#
# Stages, in order, each failing loudly:
#   lint          cargo fmt --check, no import cycles between modules, clippy -D warnings
#   chart         helm lint/template of charts/benchrun per ci/ overlay, schema, RBAC, dashboard
#                 queries against the registered metric names, CRDs in sync (offline)
#   unit          unit tests of every crate (no servers)
#   local         the worker binary and engine on real files (file://, direct://, tmpfs refusal)
#   storage       MinIO, Azurite, fake-gcs-server on 127.0.0.1, then the object storage tests
#   cluster       a real 2-node Kubernetes cluster (kube-proxy, CoreDNS, storage Services, a
#                 dynamic provisioner behind the default StorageClass), worker/operator images,
#                 kwok (simulated nodes for the fleet test), cluster tests, the kubectl plugin's
#                 cluster test, then the chart installed as users do (tests/helm/e2e.sh:
#                 README.md's quick start command by command, in-cluster operator, Prometheus,
#                 dashboard)
# Slow builds (Kubernetes, etcd, storage servers, cargo target dirs) are cached under
# ~/.cache/benchrun, outside the checkout.

SHELL := /bin/bash
# BENCHRUN_CACHE=/elsewhere gives a whole separate cache (a cold run beside a warm one).
export BENCHRUN_CACHE ?= $(HOME)/.cache/benchrun
export CARGO_TARGET_DIR ?= $(BENCHRUN_CACHE)/target
export CARGO_TERM_COLOR ?= never
CARGO ?= cargo

.PHONY: test lint chart unit local storage cluster build release images soak bench-local bench-object bench-bufpool clean-state

test: lint chart unit local storage cluster

lint:
	$(CARGO) fmt --all --check
	python3 tests/lint/module_cycles.py api/src worker/src operator/src kubectl-benchrun/src
	$(CARGO) clippy --workspace --all-targets -- -D warnings

chart:
	tests/helm/test.sh

unit:
	$(CARGO) test --workspace --lib --bins

local:
	$(CARGO) test -p benchrun-worker --test local_cli --test local_reads --test local_threads --test matrix_cli --test report_cli --test engine_local --test volume_local --test data_content --test oplog --test examples --test corpus --test fuzz --test summary_schema
	$(CARGO) test -p benchrun-api --test results_doc
	$(CARGO) test -p benchrun-operator --test agent --test agent_oplog --test examples
	BR=$(CARGO_TARGET_DIR)/debug/benchrun-worker bench/reproductions.sh check

storage:
	tests/storage/up.sh
	$(CARGO) test -p benchrun-worker $(patsubst worker/tests/%.rs,--test %,$(wildcard worker/tests/object_*.rs))

cluster:
	tests/cluster/up.sh
	tests/cluster/image.sh
	tests/cluster/kwok.sh up
	$(CARGO) test -p benchrun-test-support --test cluster_smoke --test cluster_dns
	$(CARGO) test -p benchrun-operator $(patsubst operator/tests/%.rs,--test %,$(wildcard operator/tests/cluster*.rs)) -- --test-threads=1
	$(CARGO) test -p kubectl-benchrun --test cluster_plugin -- --test-threads=1
	tests/helm/e2e.sh

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p benchrun-worker

# OCI image archives of the worker and operator, without Docker (see images/build.sh).
images:
	images/build.sh $(or $(IMAGES_DIR),target/images)

# 10-minute soak of the standalone worker with /metrics scraped every second (not in `test`).
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
