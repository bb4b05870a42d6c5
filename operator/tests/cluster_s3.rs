//! The operator on the real two-node test cluster against MinIO on the host
//! (tests/cluster/up.sh + image.sh, tests/storage/up.sh), plus `count` placement and
//! `ttlSecondsAfterFinished`.
//!
//! MinIO listens on the host's 127.0.0.1, which pods cannot reach. Each test that needs it
//! starts its own TCP forwarder in this process, bound to the `vm` node's bridge address
//! 10.88.0.1 (port chosen by the kernel) and forwarding to MinIO: pods on `vm` reach that
//! address directly, pods on `vm2` through its route for cross-node pod traffic
//! (10.88.0.0/16 via 10.200.0.1). Nothing but loopback, that bridge address and pod IPs is
//! contacted.
//!
//! These tests fail (never skip) when the cluster or the storage servers are not up, saying
//! which script to run.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use benchrun_operator::crd::WorkerPhase;
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_test_support::{cluster, pods, NODES};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, Secret};
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::Api;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use common::*;

/// The `vm` node's pod bridge (cni0) address: the host as pods on either node reach it.
const BRIDGE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 1);
/// Name of the Secret holding the S3 keys in each test namespace.
const CREDS: &str = "s3-creds";

// ---------------------------------------------------------------------------------------------
// MinIO, reachable from the pods.

/// `tests/.state/storage.env`, or a panic saying to run tests/storage/up.sh.
fn storage_env() -> HashMap<String, String> {
    let path = cluster::state_dir().join("storage.env");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "storage servers not set up: cannot read {}: {e}; run tests/storage/up.sh",
            path.display()
        )
    });
    let env: HashMap<String, String> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    for k in [
        "BENCHRUN_S3_ENDPOINT",
        "BENCHRUN_S3_BUCKET",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ] {
        assert!(
            env.contains_key(k),
            "{} has no {k}; run tests/storage/up.sh",
            path.display()
        );
    }
    env
}

/// MinIO's loopback address from `BENCHRUN_S3_ENDPOINT` (`http://127.0.0.1:9000`), checked to
/// answer; panics saying to run tests/storage/up.sh otherwise.
async fn minio_addr(env: &HashMap<String, String>) -> SocketAddr {
    let ep = &env["BENCHRUN_S3_ENDPOINT"];
    let hostport = ep
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("BENCHRUN_S3_ENDPOINT {ep} is not http://host:port"))
        .trim_end_matches('/');
    let addr: SocketAddr = hostport
        .parse()
        .unwrap_or_else(|e| panic!("BENCHRUN_S3_ENDPOINT {ep}: {e}"));
    assert!(
        addr.ip().is_loopback(),
        "BENCHRUN_S3_ENDPOINT {ep} must be a loopback address"
    );
    match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)).await {
        Ok(Ok(_)) => addr,
        Ok(Err(e)) => panic!("MinIO is not up at {ep}: {e}; run tests/storage/up.sh"),
        Err(_) => {
            panic!("MinIO did not accept a connection at {ep} in 5 s; run tests/storage/up.sh")
        }
    }
}

/// A TCP forwarder from the bridge address to MinIO, running in this process until dropped.
struct Forwarder {
    endpoint: String,
    task: JoinHandle<()>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(listener: TcpListener, to: SocketAddr) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut out) = TcpStream::connect(to).await {
                let _ = out.set_nodelay(true);
                let _ = inbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            }
        });
    }
}

/// Bind a listener on the bridge address. The bridge (cni0) only exists once a pod has run on
/// `vm`: if it is missing, run a throwaway pod there first and bind as soon as it appears.
async fn bridge_listener(env: &Env) -> TcpListener {
    let addr = SocketAddr::from((BRIDGE_ADDR, 0));
    match TcpListener::bind(addr).await {
        Ok(l) => return l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {}
        Err(e) => panic!("binding the S3 forwarder on {addr}: {e}"),
    }
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("bridge-warmup".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("vm".into()),
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            security_context: Some(pods::restricted_pod_security()),
            containers: vec![Container {
                name: "warmup".into(),
                image: Some(env.images.worker.clone()),
                image_pull_policy: Some("Never".into()),
                args: Some(vec!["--version".into()]),
                security_context: Some(pods::restricted_container_security()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating the bridge warm-up pod: {e}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let listener = loop {
        match TcpListener::bind(addr).await {
            Ok(l) => break l,
            Err(e) if tokio::time::Instant::now() > deadline => panic!(
                "the vm node's pod bridge {BRIDGE_ADDR} did not appear within 60 s of running a pod there: {e}"
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let _ = pods.delete("bridge-warmup", &DeleteParams::default()).await;
    listener
}

/// Make MinIO reachable from pods on both nodes at `http://10.88.0.1:<port>`.
async fn s3_for_pods(env: &Env, storage: &HashMap<String, String>) -> Forwarder {
    let to = minio_addr(storage).await;
    let listener = bridge_listener(env).await;
    let port = listener.local_addr().expect("forwarder address").port();
    Forwarder {
        endpoint: format!("http://{BRIDGE_ADDR}:{port}"),
        task: tokio::spawn(forward(listener, to)),
    }
}

/// The S3 keys as a Secret in the test namespace, under the worker's documented environment
/// variable names; the operator hands it to the workers with `envFrom`.
async fn create_creds_secret(env: &Env, storage: &HashMap<String, String>) {
    let mut data = BTreeMap::new();
    for k in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
        if let Some(v) = storage.get(k) {
            data.insert(k.to_string(), v.clone());
        }
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(CREDS.into()),
            ..Default::default()
        },
        string_data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(env.client.clone(), env.ns.name())
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {CREDS}: {e}"));
}

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
