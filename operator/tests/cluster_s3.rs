//! The operator on the real two-node test cluster against MinIO on the host
//! (tests/cluster/up.sh + image.sh, tests/storage/up.sh), plus `count` placement and
//! `ttlSecondsAfterFinished`.
//!
//! MinIO listens on the host's 127.0.0.1, which pods cannot reach. Each test that needs it
//! starts its own TCP forwarder in this process (`common::s3`), bound to the `vm` node's bridge address
//! 10.88.0.1 (port chosen by the kernel) and forwarding to MinIO: pods on `vm` reach that
//! address directly, pods on `vm2` through its route for cross-node pod traffic
//! (10.88.0.0/16 via 10.200.0.1). Nothing but loopback, that bridge address and pod IPs is
//! contacted.
//!
//! These tests fail (never skip) when the cluster or the storage servers are not up, saying
//! which script to run.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use benchrun_operator::crd::WorkerPhase;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_test_support::NODES;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::DeleteParams;
use kube::Api;

use common::s3::*;
use common::*;

/// A short GET/PUT/STAT mix on MinIO under a prefix unique to this test namespace.
fn s3_spec(
    storage: &HashMap<String, String>,
    fwd: &Forwarder,
    prefix: &str,
    extra: &str,
) -> String {
    format!(
        r#"
workload:
  target: s3://{bucket}/{prefix}/
  duration: 2s
  concurrency: 2
  ops: [{{op: get, weight: 60}}, {{op: put, weight: 30}}, {{op: stat, weight: 10}}]
  objectSize: 64KiB
  dataset: {{objects: 16}}
  storage: {{endpoint: '{endpoint}', allowHttp: true, pathStyle: true, region: us-east-1}}
secretRef: {{name: {CREDS}}}
workers:
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
{extra}
startDelay: 3s
timeout: 3m
"#,
        bucket = storage["BENCHRUN_S3_BUCKET"],
        endpoint = fwd.endpoint,
    )
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_node_run_against_minio_on_the_host() {
    let storage = storage_env();
    let env = env("op-s3-pernode").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let prefix = env.ns.name().to_string();
    let spec = s3_spec(&storage, &fwd, &prefix, "cleanup: OnSuccess")
        .replace("workers:\n", "workers:\n  perNode: true\n");
    let api = create_run(&env, "s3", &spec).await;
    let run = wait_for(&api, "s3", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");

    // Exactly one worker on each node, each collected.
    let mut nodes: Vec<_> = st.workers.iter().filter_map(|w| w.node.clone()).collect();
    nodes.sort();
    assert_eq!(
        nodes,
        NODES.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    );
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Collected),
        "{:#?}",
        st.workers
    );

    // Counts are sums, p99 is the merged histograms'; both nodes reached MinIO without errors.
    let (merged, _) = check_merged(&env, &run, 2).await;
    assert!(
        merged.target.starts_with("s3://"),
        "target {}",
        merged.target
    );
    let errors: u64 = st.results.values().map(|r| r.errors).sum();
    assert_eq!(errors, 0, "operations failed: {:#?}", st.results);
    for op in ["get", "put", "stat"] {
        assert!(
            st.results.get(op).is_some_and(|r| r.count > 0),
            "{op} ran: {:#?}",
            st.results
        );
    }
    let skew = st.start_skew_ms.expect("startSkew reported");
    assert!(skew < MAX_SKEW_MS, "workers started {skew}ms apart");
    assert!(st.throughput.is_some() && st.p99.is_some());

    // cleanup: OnSuccess and the run succeeded -> worker pods go away.
    wait_pods_gone(&env, "s3", "cleanup: OnSuccess of a successful run").await;
    drop(fwd);
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_two_without_per_node_merges_both() {
    let storage = storage_env();
    let env = env("op-s3-count").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let prefix = env.ns.name().to_string();
    let spec = s3_spec(&storage, &fwd, &prefix, "cleanup: Never")
        .replace("workers:\n", "workers:\n  count: 2\n");
    let api = create_run(&env, "cnt", &spec).await;
    let run = wait_for(&api, "cnt", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    assert_eq!(st.workers.len(), 2, "{:#?}", st.workers);
    assert!(
        st.workers.iter().all(|w| w.phase == WorkerPhase::Collected),
        "{:#?}",
        st.workers
    );
    check_merged(&env, &run, 2).await;
    assert!(st.start_skew_ms.is_some(), "startSkew reported");
    // cleanup: Never -> the (exited) worker pods stay. The operator says so in the same
    // status write as the final phase, so no wait is needed to see the decision.
    let kept = condition(&run, "CleanedUp").expect("CleanedUp condition on a finished run");
    assert_eq!(
        (kept.status.as_str(), kept.reason.as_str()),
        ("False", "PodsKept"),
        "{kept:?}"
    );
    assert_eq!(
        run_pods(&env, "cnt").await.len(),
        2,
        "cleanup: Never keeps the pods"
    );
    drop(fwd);
}

// ---------------------------------------------------------------------------------------------
// ttlSecondsAfterFinished (a file:// run: no storage server needed).

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn finished_run_is_deleted_after_its_ttl() {
    const TTL: i64 = 6;
    let env = env("op-ttl").await;
    let _op = spawn_operator(&env);
    let spec = format!(
        r#"
workload:
  target: file:///data/bench
  totalOps: 50
  concurrency: 2
  ops: [{{op: get, weight: 70}}, {{op: put, weight: 30}}]
  objectSize: 4KiB
  dataset: {{objects: 4}}
workers: {{count: 1}}
volume: {{emptyDir: {{}}}}
startDelay: 2s
timeout: 2m
cleanup: Never
ttlSecondsAfterFinished: {TTL}
"#
    );
    let api = create_run(&env, "ttl", &spec).await;
    let run = wait_for(&api, "ttl", Duration::from_secs(120), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let finish: chrono::DateTime<chrono::Utc> = st
        .finish_time
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .expect("finishTime")
        .into();
    // The owned objects exist while the run does (cleanup: Never keeps the pod).
    assert_eq!(run_pods(&env, "ttl").await.len(), 1);
    result_data(&env, "ttl").await;

    // Gone after the TTL, not before. The operator's clock is this process's.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(TTL as u64 + 20);
    let mut last_seen = chrono::Utc::now();
    loop {
        let before = chrono::Utc::now();
        if api.get_opt("ttl").await.expect("read run").is_none() {
            break;
        }
        last_seen = before;
        if tokio::time::Instant::now() > deadline {
            panic!("run still present 20 s after its TTL expired (TTL {TTL}s)");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let present_for = (last_seen - finish).num_milliseconds() as f64 / 1000.0;
    assert!(
        present_for >= TTL as f64 - 1.0,
        "run deleted too early: last seen {present_for:.1}s after it finished, TTL {TTL}s"
    );

    // Its owned objects are garbage-collected.
    wait_pods_gone(&env, "ttl", "the run was deleted").await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), env.ns.name());
    for _ in 0..120 {
        let c = cms
            .list(&run_selector("ttl"))
            .await
            .expect("list cms")
            .items;
        let s = secrets
            .list(&run_selector("ttl"))
            .await
            .expect("list secrets")
            .items;
        if c.is_empty() && s.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the run's ConfigMaps or token Secret still present 60 s after it was deleted");
}

/// MinIO itself is stopped while a run reads from it, and started again (its data stays). The
/// worker counts the outage as errors by kind and goes on; once MinIO is back its GETs succeed
/// again; the run ends Succeeded with its one result. Each step waits for what the operator
/// observes (ops, then errors, in `status.progress`); the workload is paced (40 ops/s for 40 s),
/// so the steps, which take a few seconds, happen well inside it.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_server_stopped_mid_run_counts_the_outage_and_recovers() {
    let storage = storage_env();
    let env = env("op-s3-outage").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let prefix = env.ns.name().to_string();
    let spec = s3_spec(&storage, &fwd, &prefix, "cleanup: Always")
        .replace("duration: 2s", "duration: 40s\n  rateLimit: 40")
        .replace(
            "ops: [{op: get, weight: 60}, {op: put, weight: 30}, {op: stat, weight: 10}]",
            "ops: [{op: get}]",
        )
        .replace("workers:\n", "workers:\n  count: 1\n");
    let api = create_run(&env, "out", &spec).await;
    let progress = |r: &BenchmarkRun| {
        r.status
            .as_ref()
            .and_then(|s| s.progress.clone())
            .unwrap_or_default()
    };
    let before = wait_for(&api, "out", Duration::from_secs(150), "100 ops done", |r| {
        progress(r).ops >= 100
    })
    .await;
    assert_eq!(progress(&before).errors, 0, "errors before the outage");
    fault(&["storage-stop", "minio"]);
    let restart = Undo::new(&["storage-start"]);
    wait_for(
        &api,
        "out",
        Duration::from_secs(60),
        "errors counted during the outage",
        |r| progress(r).errors >= 10,
    )
    .await;
    fault(&["storage-start"]);
    restart.disarm();
    let run = wait_for(&api, "out", Duration::from_secs(150), "finished", finished).await;
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    let (merged, _) = check_merged(&env, &run, 1).await;
    let get = &merged.ops[&benchrun_api::spec::OpKind::Get];
    assert!(get.errors >= 10, "the outage is counted: {get:?}");
    assert_eq!(
        get.errors_by_kind.values().sum::<u64>(),
        get.errors,
        "every error has a kind: {get:?}"
    );
    // The last second with errors is followed by seconds where GETs succeed again.
    let last_error = merged
        .timeline
        .iter()
        .rposition(|s| s.errors > 0)
        .expect("a second with errors in the timeline");
    let ok_after: u64 = merged.timeline[last_error + 1..]
        .iter()
        .map(|s| s.ops - s.errors)
        .sum();
    assert!(
        ok_after > 0,
        "no GET succeeded after the outage: {:?}",
        &merged.timeline[last_error..]
    );
    assert_eq!(
        st.results["get"].errors, get.errors,
        "status shows the errors"
    );
    wait_pods_gone(&env, "out", "cleanup: Always").await;
    drop(fwd);
}

// ---------------------------------------------------------------------------------------------
// Deleting a running run.

/// The objects under `prefix` on MinIO, listed from the host (the worker's own S3 client,
/// credentials from a directory as a mounted Secret would give them).
async fn objects_under(storage: &HashMap<String, String>, prefix: &str) -> usize {
    let creds = tempfile::tempdir().expect("tempdir");
    for (file, key) in [
        ("accessKeyId", "AWS_ACCESS_KEY_ID"),
        ("secretAccessKey", "AWS_SECRET_ACCESS_KEY"),
    ] {
        std::fs::write(creds.path().join(file), &storage[key]).expect("credential file");
    }
    let yaml = format!(
        "target: s3://{bucket}/\nduration: 1s\nops: [{{op: get}}]\nstorage: {{endpoint: '{ep}', allowHttp: true, pathStyle: true, region: us-east-1, credentialsDir: '{dir}'}}\n",
        bucket = storage["BENCHRUN_S3_BUCKET"],
        ep = storage["BENCHRUN_S3_ENDPOINT"],
        dir = creds.path().display(),
    );
    let w = benchrun_worker::Workload::from_yaml(&yaml).expect("listing workload");
    let target = benchrun_worker::targets::open(&w)
        .await
        .expect("open MinIO");
    target.list(prefix).await.expect("list").objects.len()
}

/// `kubectl delete` of a run in the middle of its measured stage: the operator's finalizer
/// holds the deletion while the workers stop and remove everything the run wrote (its
/// prepared dataset and its PUTs), then lets it go; nothing is left under the run's prefix,
/// and the run's series are gone from the operator's metrics.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_running_run_stops_its_workers_and_removes_its_data() {
    let storage = storage_env();
    let env = env("op-s3-delete").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let (_op, metrics) = spawn_operator_with_metrics(&env);
    let prefix = env.ns.name().to_string();
    let spec = s3_spec(&storage, &fwd, &prefix, "cleanup: Always")
        .replace("duration: 2s", "duration: 10m")
        .replace("timeout: 3m", "timeout: 20m")
        .replace("workers:\n", "workers:\n  count: 2\n");
    let api = create_run(&env, "del", &spec).await;
    let run = wait_for(&api, "del", Duration::from_secs(150), "running", |r| {
        r.status
            .as_ref()
            .is_some_and(|s| s.worker_phases.get("Running") == Some(&2))
    })
    .await;
    assert!(
        run.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == benchrun_operator::reconcile::deletion::FINALIZER),
        "the operator's finalizer is on the run: {:?}",
        run.metadata.finalizers
    );
    let before = objects_under(&storage, &prefix).await;
    assert!(before >= 32, "the dataset is there ({before} objects)");
    let series = "run=\"del\"".to_string();
    assert!(metrics.render().contains(&series), "the run has series");

    api.delete("del", &DeleteParams::background())
        .await
        .expect("delete");
    // Bounded by the operator's cleanup bound (120 s) plus a poll or two.
    let deadline = tokio::time::Instant::now()
        + benchrun_operator::reconcile::deletion::CLEANUP_BOUND
        + Duration::from_secs(30);
    while api.get_opt("del").await.expect("read run").is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run is still there"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        objects_under(&storage, &prefix).await,
        0,
        "everything the run wrote is removed"
    );
    let text = metrics.render();
    assert!(
        !text.contains(&series),
        "the deleted run's series are gone:\n{text}"
    );
    drop(fwd);
}

/// A run that fails while another worker is still at work on the storage keeps that worker's
/// pod until its agent says its cleanup is done, up to the cleanup bound of every path (the
/// deletion's); past it the run says `CleanupAbandoned`, naming the worker and its prefix.
/// Here the storage hangs (the forwarder to MinIO stalled) before a worker pod is deleted, so
/// the other worker cannot finish: before, its pod was deleted in the pass that failed the
/// run, and nothing said what it left.
#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_keeps_a_cleaning_workers_pod_up_to_the_bound_then_says_so() {
    let storage = storage_env();
    let env = env("op-s3-abandon").await;
    let fwd = s3_for_pods(&env, &storage).await;
    create_creds_secret(&env, &storage).await;
    let _op = spawn_operator(&env);
    let prefix = env.ns.name().to_string();
    // One request may hang for 5 minutes, longer than the bound; no retries.
    let spec = s3_spec(
        &storage,
        &fwd,
        &prefix,
        "cleanup: Always\nfailurePolicy: Abort",
    )
    .replace("duration: 2s", "duration: 10m")
    .replace("timeout: 3m", "timeout: 20m")
    .replace(
        "region: us-east-1}",
        "region: us-east-1, requestTimeout: 5m}",
    )
    .replace("workers:\n", "workers:\n  count: 2\n");
    let api = create_run(&env, "cut", &spec).await;
    wait_for(&api, "cut", Duration::from_secs(150), "running", |r| {
        r.status
            .as_ref()
            .is_some_and(|s| s.worker_phases.get("Running") == Some(&2))
    })
    .await;

    fwd.stall();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    pods.delete("cut-w0", &DeleteParams::default())
        .await
        .expect("delete worker pod");
    let run = wait_for(&api, "cut", Duration::from_secs(60), "failed", finished).await;
    assert_eq!(phase(&run), Phase::Failed);
    // w1 cannot finish: its pod stays, and the run says why.
    let run = wait_for(
        &api,
        "cut",
        Duration::from_secs(30),
        "waiting for w1",
        |r| condition(r, "CleanedUp").is_some_and(|c| c.reason == "WaitingForWorkers"),
    )
    .await;
    let waiting = condition(&run, "CleanedUp").expect("CleanedUp");
    assert!(waiting.message.contains("workers w1 "), "{waiting:?}");
    let w1 = pods.get("cut-w1").await.expect("w1's pod kept");
    assert!(
        w1.metadata.deletion_timestamp.is_none(),
        "w1's pod is not deleted yet"
    );

    // Past the bound: deleted, and the run names w1 and where it writes.
    let bound = benchrun_operator::worker_cleanup::CLEANUP_BOUND + Duration::from_secs(30);
    let run = wait_for(&api, "cut", bound, "cleaned up", |r| {
        condition(r, "CleanedUp").is_some_and(|c| c.status == "True")
    })
    .await;
    let cut = condition(&run, "CleanupAbandoned").expect("CleanupAbandoned");
    assert_eq!(cut.status, "True");
    let w1_prefix = format!(
        "w1 (s3://{}/{prefix}/benchrun/w1/)",
        storage["BENCHRUN_S3_BUCKET"]
    );
    assert!(cut.message.contains(&w1_prefix), "{}", cut.message);
    wait_pods_gone(&env, "cut", "the cleanup bound").await;
    drop(fwd);
}
