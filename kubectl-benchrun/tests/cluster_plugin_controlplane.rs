//! Control-plane runs on the test cluster's two real provisioners, through the plugin: the
//! default class `benchrun-hostpath` (tests/cluster/provisioner, on
//! sig-storage-lib-external-provisioner) and `local-path` (rancher's local-path-provisioner
//! v0.0.30, built from the Go module proxy by tests/cluster/local_path.sh, run by up.sh). 20
//! claims each at concurrency 5 through provision, attach, firstIO and delete, then
//! `kubectl benchrun compare` between the two; and `storageclass local-path --control-plane`.
//! The controller runs in this test process, watching only the test's namespace.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::time::Duration;

use benchrun_operator::control_plane::objects;
use benchrun_operator::crd::control_plane::ControlPlaneStatus;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use common::{exec, Env};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, PostParams};
use kube::Api;

/// The operator's HMAC key in these tests.
const KEY: &[u8] = b"benchrun-plugin-cp-test-operator-key";
/// Longest a control-plane run of 20 claims may take on this cluster.
const RUN_BOUND: Duration = Duration::from_secs(240);

/// The test's namespace, once the second provisioner's class is known to be there.
async fn env(prefix: &str) -> Env {
    let env = Env::new(prefix).await;
    // The second provisioner's class: made by tests/cluster/local_path.sh (up.sh), not here.
    let classes: Api<StorageClass> = Api::all(env.client.clone());
    let lp = classes
        .get_opt("local-path")
        .await
        .expect("read StorageClasses");
    assert!(
        lp.is_some_and(|c| c.provisioner == "rancher.io/local-path"),
        "no StorageClass local-path of rancher.io/local-path: run tests/cluster/up.sh (or tests/cluster/local_path.sh up)"
    );
    env
}

fn spawn_operator(env: &Env) -> tokio::task::JoinHandle<()> {
    common::spawn_operator(env, KEY)
}

/// Create control-plane run `name` on `class` (20 claims, 5 at a time, every operation) and
/// wait until it has finished (bounded by [`RUN_BOUND`]).
async fn run_on(env: &Env, name: &str, class: &str) -> BenchmarkRun {
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    let run: BenchmarkRun = serde_yaml::from_str(&format!(
        r#"
apiVersion: benchrun.dev/v1alpha1
kind: BenchmarkRun
metadata: {{name: {name}}}
spec:
  controlPlane:
    operations: [provision, attach, firstIO, delete]
    count: 20
    concurrency: 5
    storageClassName: {class}
    size: 16Mi
    timeout: 60s
"#
    ))
    .expect("manifest");
    api.create(&PostParams::default(), &run)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    // Polled as the operator's tests do (common::wait_for): a watch's connection can time out
    // on a loaded cluster, a get just retries.
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    loop {
        let run = api.get(name).await.expect("read run");
        if run.status.as_ref().is_some_and(|s| s.phase.is_finished()) {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {name} not finished after {RUN_BOUND:?}; status:\n{}",
            serde_yaml::to_string(&run.status).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The checks of a 20-claim run: exact counts, every latency (and phase) inside the measured
/// span, percentiles ordered; its status.controlPlane.
fn check_twenty(run: &BenchmarkRun) -> ControlPlaneStatus {
    let name = run.metadata.name.clone().unwrap_or_default();
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{name}: {st:#?}");
    let cp = st.control_plane.clone().expect("status.controlPlane");
    assert_eq!(
        (cp.requested, cp.completed, cp.failed),
        (20, 20, 0),
        "{name}: {cp:#?}"
    );
    for op in ["provision", "attach", "firstIO", "delete"] {
        let r = cp
            .operations
            .get(op)
            .unwrap_or_else(|| panic!("{name}: {op} missing: {cp:#?}"));
        assert_eq!((r.count, r.errors), (20, 0), "{name} {op}: {r:#?}");
        let l = &r.latency;
        assert!(
            0.0 < l.p50_ms && l.p50_ms <= l.p95_ms && l.p95_ms <= l.p99_ms && l.p99_ms <= l.max_ms,
            "{name} {op}: {l:?}"
        );
        // HDR buckets are within 0.1 % of the value.
        assert!(
            l.max_ms <= cp.elapsed_ms * 1.001,
            "{name} {op}: max {} > span {}",
            l.max_ms,
            cp.elapsed_ms
        );
        for (phase, p) in &r.phases {
            assert!(
                p.max_ms <= cp.elapsed_ms * 1.001,
                "{name} {op}.{phase}: {p:?}"
            );
        }
    }
    let e2e = cp
        .provision_to_first_io
        .clone()
        .expect("provisionToFirstIO");
    assert!(
        e2e.p50_ms > 0.0 && e2e.max_ms <= cp.elapsed_ms * 1.001,
        "{name}: {e2e:?}"
    );
    // Both classes bind on first consumer: provisioning waits for the scheduler.
    let prov = &cp.operations["provision"];
    for phase in ["bound", "pvCreated", "scheduled"] {
        assert!(
            prov.phases.contains_key(phase),
            "{name} provision phases: {:?}",
            prov.phases.keys()
        );
    }
    cp
}

/// The run's claims and pods still there, and the volumes of this namespace's claims.
async fn leftovers(env: &Env, runs: &[&str]) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), env.ns.name());
    let mut left = vec![];
    for run in runs {
        let lp = ListParams::default().labels(&objects::selector(run));
        for p in pods.list_metadata(&lp).await.expect("list pods").items {
            left.push(format!("pod {}", p.metadata.name.unwrap_or_default()));
        }
        for c in claims.list_metadata(&lp).await.expect("list claims").items {
            left.push(format!("claim {}", c.metadata.name.unwrap_or_default()));
        }
    }
    for pv in Api::<PersistentVolume>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list PVs")
        .items
    {
        let ns = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .and_then(|c| c.namespace.clone());
        if ns.as_deref() == Some(env.ns.name()) {
            left.push(format!(
                "PersistentVolume {}",
                pv.metadata.name.unwrap_or_default()
            ));
        }
    }
    left
}

/// 20 claims at concurrency 5 on each of the cluster's two provisioners (one class after the
/// other, so neither is measured under the other's load), everything deleted afterwards, and
/// the two compared by `kubectl benchrun compare`: text (rows equal to the runs' status),
/// JSON, and `--fail-if-slower` gating on p99.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn twenty_claims_on_each_provisioner_compared_through_the_plugin() {
    let env = env("plugin-cp").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let hp = check_twenty(&run_on(&env, "hp", "benchrun-hostpath").await);
    let lp = check_twenty(&run_on(&env, "lp", "local-path").await);
    // Each lifecycle waited for its volume to be gone (delete), so nothing is left.
    assert_eq!(leftovers(&env, &["hp", "lp"]).await, Vec::<String>::new());

    let r = exec(&ns, &["compare", "hp", "lp"]).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0]
            .starts_with("A = hp (StorageClass benchrun-hostpath): 20 of 20 lifecycles completed"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].starts_with("B = lp (StorageClass local-path): 20 of 20 lifecycles completed"),
        "{}",
        r.stdout
    );
    // Every operation's p50 and p99 row holds the two runs' figures (as printed, 3 decimals)
    // and the change between them.
    for op in ["provision", "attach", "firstIO", "delete"] {
        for (stat, a, b) in [
            (
                "p50",
                hp.operations[op].latency.p50_ms,
                lp.operations[op].latency.p50_ms,
            ),
            (
                "p99",
                hp.operations[op].latency.p99_ms,
                lp.operations[op].latency.p99_ms,
            ),
        ] {
            let cells: Vec<&str> = lines
                .iter()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|c| c.len() == 5 && c[0] == op && c[1] == stat)
                .unwrap_or_else(|| panic!("no {op} {stat} row in:\n{}", r.stdout));
            assert_eq!(cells[2], format!("{a:.3}"), "{op} {stat} A");
            assert_eq!(cells[3], format!("{b:.3}"), "{op} {stat} B");
            assert_eq!(
                cells[4],
                format!("{:+.1}%", (b - a) / a * 100.0),
                "{op} {stat} change"
            );
        }
    }
    // Phases follow their operation; the claim-to-first-I/O span is compared last.
    assert!(
        lines.iter().any(|l| l.starts_with("provision.bound ")),
        "{}",
        r.stdout
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("claim->firstIO ")),
        "{}",
        r.stdout
    );

    let j = exec(&ns, &["compare", "hp", "lp", "-o", "json"]).await;
    assert_eq!(j.code, 0);
    let v: serde_json::Value = serde_json::from_str(&j.stdout).expect("JSON");
    assert_eq!(v["a"]["storageClass"], "benchrun-hostpath");
    assert_eq!(v["b"]["controlPlane"]["completed"], 20);
    let rows = v["rows"].as_array().expect("rows");
    assert!(rows.iter().any(|r| r["operation"] == "firstIO"
        && r["phase"] == "write"
        && r["stat"] == "p99"
        && r["aMs"].is_number()
        && r["bMs"].is_number()));

    // Any p99 at all is more than 100 % below zero change, so every operation goes to the
    // rule's test: each is named, as slower (exit 5, SLOWER) or as noise (a note).
    let gate = exec(&ns, &["compare", "hp", "lp", "--fail-if-slower=-100"]).await;
    let slower = gate
        .stderr
        .contains("lp is slower than allowed (-100% on p99): ");
    assert_eq!(gate.code, if slower { 5 } else { 0 }, "{}", gate.stderr);
    for op in ["provision", "attach", "firstIO", "delete"] {
        assert!(
            gate.stderr.contains(&format!("{op} p99 ")),
            "{op} unnamed: {}",
            gate.stderr
        );
    }

    // `report` of the two: each run's control-plane table, as `result` prints it; with
    // --out, in report.md.
    let rep = exec(&ns, &["report", "hp", "lp"]).await;
    assert_eq!(rep.code, 0, "{}", rep.stderr);
    for (name, st) in [("hp", &hp), ("lp", &lp)] {
        assert!(
            rep.stdout.contains(&format!("## Control plane: {name}")),
            "{}",
            rep.stdout
        );
        let row = format!("{:.3}", st.operations["provision"].latency.p50_ms);
        assert!(
            rep.stdout.contains(&row),
            "{name}: no {row} in {}",
            rep.stdout
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r");
    let rep = exec(
        &ns,
        &["report", "hp", "--out", out.to_str().expect("utf-8")],
    )
    .await;
    assert_eq!(rep.code, 0, "{}", rep.stderr);
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(
        md.contains("## Control plane: hp") && md.contains("20 of 20 lifecycles completed"),
        "{md}"
    );
}

/// `storageclass local-path --control-plane`: the I/O profile on the second provisioner's
/// class, then its control plane; both tables printed, both runs deleted with their claims.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn storageclass_with_control_plane_prints_both_tables_and_cleans_up() {
    let env = env("plugin-sc-cp").await;
    let _op = spawn_operator(&env);
    let ns = env.ns.name().to_string();
    let r = exec(
        &ns,
        &[
            "storageclass",
            "local-path",
            "--claim-size",
            "64Mi",
            "--file-size",
            "16MiB",
            "--duration",
            "1s",
            "--control-plane",
            "--control-plane-count",
            "6",
            "--control-plane-concurrency",
            "3",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("profile"), "{}", r.stdout);
    for label in [
        "random 4KiB QD32 (IOPS) read",
        "sequential 1MiB QD4 (bandwidth) write",
        "random 4KiB QD1 (latency) write",
    ] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row:\n{}", r.stdout));
        assert!(line.contains("Succeeded"), "{line}");
    }
    assert!(
        r.stdout
            .contains("control plane: 6 of 6 lifecycles completed, 0 failed"),
        "{}",
        r.stdout
    );
    for op in ["provision", "attach", "firstIO", "delete"] {
        let cells: Vec<&str> = lines
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|c| c.first() == Some(&op))
            .unwrap_or_else(|| panic!("no {op} row:\n{}", r.stdout));
        assert_eq!(&cells[1..3], ["6", "0"], "{op}: count 6, no errors");
    }
    // Both runs deleted (a bounded poll: deletion goes through the finalizer).
    assert_eq!(
        r.stderr.matches("deleted (its claims with it)").count(),
        2,
        "{}",
        r.stderr
    );
    common::wait_no_runs_or_claims(&env, RUN_BOUND).await;
}
