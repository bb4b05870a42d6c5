//! The operator deletes only what a run owns, and a failed run says so in a condition scripts
//! can wait on: on the real two-node test cluster (tests/cluster/up.sh + image.sh), the
//! controller in this test process.
//!
//! These tests fail (never skip) when the cluster is not up, saying which script to run.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_operator::crd::Phase;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use kube::api::PostParams;
use kube::Api;

use common::*;

/// A claim `orph-w0-data` and a ConfigMap `orph-workload` a user made (no owner: say, kept by
/// `kubectl delete br orph --cascade=orphan`), then a run `orph` with a claim template and
/// `cleanup: Always`. The run fails `NameTaken` on the ConfigMap, and its cleanup must leave
/// both alone; the failure satisfies `kubectl wait --for=condition=Failed`.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_failed_runs_cleanup_keeps_what_it_does_not_own_and_kubectl_wait_sees_the_failure() {
    let env = env("op-own").await;
    let ns = env.ns.name().to_string();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orph-w0-data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}
    }))
    .expect("claim");
    let claim_uid = pvcs
        .create(&PostParams::default(), &claim)
        .await
        .expect("the user's claim")
        .metadata
        .uid;
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("orph-workload".into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("mine".to_string(), "keep".to_string())])),
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("the user's ConfigMap");

    let _op = spawn_operator(&env);
    let api = create_run(
        &env,
        "orph",
        r#"
workload:
  target: file:///data/bench
  duration: 2s
  ops: [{op: get}]
  objectSize: 4KiB
  dataset: {objects: 4}
workers:
  count: 1
  resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 50m, memory: 32Mi}}
volume:
  claimTemplate:
    accessModes: [ReadWriteOnce]
    resources: {requests: {storage: 16Mi}}
cleanup: Always
timeout: 3m
"#,
    )
    .await;
    // What a script does: wait for the failure (bounded; started before the run fails).
    let mut wait = kubectl();
    wait.args([
        "wait",
        "-n",
        &ns,
        "--for=condition=Failed",
        "--timeout=90s",
        "benchmarkrun/orph",
    ]);
    let wait = tokio::task::spawn_blocking(move || wait.output());
    let run = wait_for(&api, "orph", Duration::from_secs(90), "finished", finished).await;
    assert_eq!(phase(&run), Phase::Failed, "{:#?}", run.status);
    let complete = condition(&run, "Complete").expect("Complete");
    assert_eq!(
        (complete.status.as_str(), complete.reason.as_str()),
        ("False", "NameTaken")
    );
    let failed = condition(&run, "Failed").expect("a Failed condition");
    assert_eq!(
        (failed.status.as_str(), failed.reason.as_str()),
        ("True", "NameTaken")
    );
    assert!(
        failed.message.contains("ConfigMap orph-workload"),
        "{}",
        failed.message
    );
    let out = wait.await.expect("joined").expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl wait --for=condition=Failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The cleanup ran (it says so in the same write as the failure) and kept the user's
    // objects, naming the claim.
    let cleaned = condition(&run, "CleanedUp").expect("CleanedUp");
    assert!(
        cleaned
            .message
            .contains("kept claim orph-w0-data, not this run's"),
        "{}",
        cleaned.message
    );
    let kept = pvcs
        .get("orph-w0-data")
        .await
        .expect("the user's claim is kept");
    assert_eq!(kept.metadata.uid, claim_uid);
    assert_eq!(
        kept.metadata.deletion_timestamp, None,
        "the claim is being deleted"
    );
    let kept = cms
        .get("orph-workload")
        .await
        .expect("the user's ConfigMap is kept");
    assert_eq!(kept.data, cm.data);
}

/// Two operator processes on one run (as during a `helm upgrade` without leader election):
/// every status write is conditional on the version its pass read, so one start time is
/// recorded and sent; every worker measured once, from it.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn two_operators_start_a_run_once() {
    let env = env("op-two").await;
    let _a = spawn_operator(&env);
    let _b = spawn_operator(&env);
    let api = create_run(
        &env,
        "two",
        r#"
workload:
  target: file:///data/bench
  duration: 3s
  concurrency: 2
  ops: [{op: get, weight: 70}, {op: put, weight: 30}]
  objectSize: 16KiB
  dataset: {objects: 20}
workers:
  perNode: true
  resources: {limits: {cpu: 500m, memory: 256Mi}, requests: {cpu: 50m, memory: 32Mi}}
volume: {emptyDir: {}}
startDelay: 3s
timeout: 3m
cleanup: Always
"#,
    )
    .await;
    let run = wait_succeeded(&api, "two").await;
    let st = run.status.as_ref().expect("status");
    let start: chrono::DateTime<chrono::Utc> = st
        .start_time
        .as_deref()
        .expect("start time")
        .parse()
        .expect("rfc3339");
    let parts = worker_summaries(&env, &run).await;
    assert_eq!(
        parts.len(),
        benchrun_test_support::NODES.len(),
        "one summary per worker"
    );
    for p in &parts {
        // A second start time would be at least a pass (a second) away from the recorded one.
        let off = (p.started_at - start).num_milliseconds().abs();
        assert!(
            off < 1000,
            "worker {:?} started {off} ms from the recorded start time {start}",
            p.worker_ids
        );
    }
    // Each worker's pod was created once (a second placement would have made others).
    let pods = run_pods(&env, "two").await;
    assert!(
        pods.len() <= benchrun_test_support::NODES.len(),
        "{} pods",
        pods.len()
    );
}
