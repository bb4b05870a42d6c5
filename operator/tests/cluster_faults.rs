//! Faults of the cluster itself under a running BenchmarkRun, on the real two-node test
//! cluster (tests/cluster/up.sh + image.sh): the network to one worker cut and healed, a
//! kubelet stopped until its node is NotReady, the API server restarted. Each fault is made
//! by tests/cluster/fault.sh and undone even when the test fails. For each: the run ends
//! Succeeded, every worker's result is counted exactly once, and nothing is left running.
//! (The storage server stopped mid-run is in cluster_s3.rs, which has MinIO's plumbing.)
//!
//! Every wait is bounded and ends on an observable event (a phase, a worker's state, a node
//! condition), never on a sleep. These tests change the whole cluster: run them one at a
//! time (`--test-threads=1`, as the Makefile does).

mod common;

use std::time::Duration;

use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_operator::resources;
use benchrun_test_support::NODES;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, Client};

use common::*;

/// Two workers, one per node, reading and writing small files on an emptyDir.
fn per_node(duration: &str) -> String {
    format!(
        r#"
workload:
  target: file:///data/bench
  duration: {duration}
  concurrency: 2
  ops: [{{op: get, weight: 70}}, {{op: put, weight: 30}}]
  objectSize: 16KiB
  dataset: {{objects: 20}}
  write: {{maxObjects: 200}}
workers:
  perNode: true
  resources: {{limits: {{cpu: 500m, memory: 256Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
volume: {{emptyDir: {{}}}}
startDelay: 3s
timeout: 4m
cleanup: Always
"#
    )
}

/// The worker placed on `node` (perNode: exactly one).
fn worker_on<'a>(run: &'a BenchmarkRun, node: &str) -> &'a benchrun_operator::crd::WorkerStatus {
    let st = run.status.as_ref().expect("status");
    st.workers
        .iter()
        .find(|w| w.node.as_deref() == Some(node))
        .unwrap_or_else(|| panic!("no worker on {node}: {:?}", st.workers))
}

/// Every worker collected, each summary persisted once, the merged counts the workers' sums,
/// and the pods gone.
async fn check_complete(env: &Env, run: &BenchmarkRun, why: &str) {
    let name = run.metadata.name.clone().unwrap_or_default();
    let st = run.status.clone().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{why}: {st:#?}");
    assert!(
        st.workers.iter().all(|w| w.phase == "Collected"),
        "{why}: {:#?}",
        st.workers
    );
    check_merged(env, run, NODES.len()).await;
    let want: Vec<String> = st
        .workers
        .iter()
        .map(|w| resources::worker_result_cm_name(&name, &w.name))
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(
        result_objects(env, &name, resources::RESULT_SUMMARY).await,
        want,
        "{why}: one persisted summary per worker"
    );
    wait_pods_gone(env, &name, why).await;
}

async fn pod_ip(env: &Env, pod: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    pods.get(pod)
        .await
        .unwrap_or_else(|e| panic!("reading pod {pod}: {e}"))
        .status
        .and_then(|s| s.pod_ip)
        .unwrap_or_else(|| panic!("pod {pod} has no IP while Running"))
}

/// The node's Ready condition status (`True`, `False`, `Unknown`).
async fn node_ready(client: &Client, node: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .get(node)
        .await
        .ok()
        .and_then(|n| n.status)
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
        .unwrap_or_else(|| "Unknown".into())
}

async fn wait_node_ready(client: &Client, node: &str, want_ready: bool, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ready = node_ready(client, node).await;
        if (ready == "True") == want_ready {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "node {node}: Ready={ready} after {timeout:?}, wanted {}",
            if want_ready { "True" } else { "not True" }
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The network between the operator and the worker on vm2 is cut while both workers run. The
/// operator goes on with the reachable worker (it is collected during the cut) and keeps asking
/// the cut one, which lingers with its summary; once the network is back, that summary is
/// collected too. Nothing measured is lost, nothing is counted twice.
#[tokio::test]
async fn network_cut_to_one_worker_then_healed_loses_nothing() {
    let env = env("op-netcut").await;
    let _op = spawn_operator(&env);
    let api = create_run(&env, "cut", &per_node("5s")).await;
    let running = wait_for(&api, "cut", Duration::from_secs(150), "Running", |r| {
        phase(r) == Phase::Running
    })
    .await;
    let cut = worker_on(&running, "vm2").clone();
    let other = worker_on(&running, "vm").name.clone();
    let ip = pod_ip(&env, &cut.pod).await;
    fault(&["cut", &ip]);
    let heal = Undo::new(&["heal", &ip]);
    // The reachable worker finishes its 5 s and is collected while the other is cut off.
    let during = wait_for(
        &api,
        "cut",
        Duration::from_secs(120),
        "the reachable worker collected",
        |r| worker(r, &other).phase == "Collected",
    )
    .await;
    assert!(
        !finished(&during),
        "the run finished without the cut-off worker: {:#?}",
        during.status
    );
    assert_ne!(worker(&during, &cut.name).phase, "Collected");
    fault(&["heal", &ip]);
    heal.disarm();
    let run = wait_for(&api, "cut", Duration::from_secs(120), "finished", finished).await;
    check_complete(&env, &run, "network cut then healed").await;
}

/// vm2's kubelet is stopped while the run is Running and stays stopped until the node
/// controller marks vm2 NotReady. The worker's container keeps running without its kubelet;
/// the operator talks to the worker directly, so the run completes with both results once the
/// kubelet is back (it is needed only to remove the pod).
#[tokio::test]
async fn kubelet_stopped_until_node_not_ready_loses_nothing() {
    let env = env("op-kubelet").await;
    let _op = spawn_operator(&env);
    let api = create_run(&env, "kl", &per_node("5s")).await;
    wait_for(&api, "kl", Duration::from_secs(150), "Running", |r| {
        phase(r) == Phase::Running
    })
    .await;
    fault(&["stop", "kubelet-vm2"]);
    let restart = Undo::new(&["start"]);
    // The node monitor's grace period (40-50 s by default) passes without a heartbeat.
    wait_node_ready(&env.client, "vm2", false, Duration::from_secs(150)).await;
    let during = api.get("kl").await.expect("read run");
    eprintln!(
        "vm2 NotReady; run phase {:?}, workers {:?}",
        phase(&during),
        during.status.as_ref().map(|s| s
            .workers
            .iter()
            .map(|w| (&w.name, &w.phase))
            .collect::<Vec<_>>())
    );
    fault(&["start"]);
    restart.disarm();
    wait_node_ready(&env.client, "vm2", true, Duration::from_secs(120)).await;
    let run = wait_for(&api, "kl", Duration::from_secs(150), "finished", finished).await;
    check_complete(&env, &run, "kubelet stopped until NotReady").await;
    // Leave vm2 as found: Ready is not enough, the node controller lifts the unreachable
    // taints a few seconds later, and a test started before that gets no worker on vm2.
    benchrun_test_support::cluster::require_ready_nodes(&env.client, &NODES).await;
}

/// The API server is stopped while the run is Running and started again. The controller's
/// watches fail and resume; the workers never needed the API server; the run completes with
/// every worker counted once.
#[tokio::test]
async fn apiserver_restarted_mid_run_loses_nothing() {
    let env = env("op-apiserver").await;
    let _op = spawn_operator(&env);
    let api = create_run(&env, "as", &per_node("5s")).await;
    wait_for(&api, "as", Duration::from_secs(150), "Running", |r| {
        phase(r) == Phase::Running
    })
    .await;
    fault(&["stop", "kube-apiserver"]);
    let restart = Undo::new(&["start"]);
    fault(&["start"]);
    restart.disarm();
    let run = wait_for(&api, "as", Duration::from_secs(180), "finished", finished).await;
    check_complete(&env, &run, "API server restarted").await;
}
