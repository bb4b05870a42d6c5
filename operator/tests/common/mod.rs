//! Helpers the operator's cluster tests share: a namespace and the CRD on the real test
//! cluster, the controller running in the test process, and waits and checks on runs.
// Each test crate uses a different subset of these.
#![allow(dead_code)]

pub mod s3;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use benchrun_api::Summary;
use benchrun_operator::context::Config;
use benchrun_operator::controller;
use benchrun_operator::crd::{BenchmarkRun, BenchmarkRunSpec, Phase};
use benchrun_operator::metrics::Metrics;
use benchrun_operator::{resources, results};
use benchrun_test_support::{cluster, Images, TestNamespace, NODES};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use tokio::task::JoinHandle;

/// The operator's HMAC key in tests (workers' control tokens derive from it).
pub const KEY: &[u8] = b"benchrun-cluster-test-operator-key";

pub struct Env {
    pub client: Client,
    pub ns: TestNamespace,
    pub images: Images,
}

pub async fn env(prefix: &str) -> Env {
    benchrun_operator::install_crypto_provider();
    let client = cluster::connect().await;
    cluster::require_ready_nodes(&client, &NODES).await;
    let images = Images::load();
    install_crd(&client).await;
    let ns = TestNamespace::create(&client, prefix).await;
    Env { client, ns, images }
}

/// Apply the CRDs (runs, and schedules: the controller watches both) and wait until they are
/// served.
pub async fn install_crd(client: &Client) {
    cluster::install_crd(client, &benchrun_operator::crd()).await;
    cluster::install_crd(client, &benchrun_operator::schedule_crd()).await;
}

pub fn spawn_operator(env: &Env) -> JoinHandle<()> {
    spawn_operator_with_metrics(env).0
}

/// The controller, and the metrics it exports on `/metrics` in the real binary.
pub fn spawn_operator_with_metrics(env: &Env) -> (JoinHandle<()>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    (spawn_operator_sharing(env, metrics.clone()), metrics)
}

/// The controller exporting into `metrics`: a second one on the same metrics stands for the
/// same process whose watch restarted after a gap.
pub fn spawn_operator_sharing(env: &Env, metrics: Arc<Metrics>) -> JoinHandle<()> {
    let config = Config {
        namespace: Some(env.ns.name().to_string()),
        ..Config::new(KEY.to_vec(), env.images.worker.clone())
    };
    let run = controller::run(env.client.clone(), config, metrics, std::future::pending());
    tokio::spawn(async move { run.await.expect("the controller starts") })
}

/// The controller with its configuration changed by `change` (a policy, say).
pub fn spawn_operator_configured(env: &Env, change: impl FnOnce(&mut Config)) -> JoinHandle<()> {
    let mut config = Config {
        namespace: Some(env.ns.name().to_string()),
        ..Config::new(KEY.to_vec(), env.images.worker.clone())
    };
    change(&mut config);
    let run = controller::run(
        env.client.clone(),
        config,
        Arc::new(Metrics::new()),
        std::future::pending(),
    );
    tokio::spawn(async move { run.await.expect("the controller starts") })
}

/// The value of the sample `name{labels}` in a Prometheus text exposition.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

pub async fn create_run(env: &Env, name: &str, spec_yaml: &str) -> Api<BenchmarkRun> {
    let spec: BenchmarkRunSpec = serde_yaml::from_str(spec_yaml)
        .unwrap_or_else(|e| panic!("test spec parses: {e}\n{spec_yaml}"));
    let api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    api.create(&PostParams::default(), &BenchmarkRun::new(name, spec))
        .await
        .unwrap_or_else(|e| panic!("creating run {name}: {e}"));
    api
}

/// Poll the run until `pred` holds; panic with its status after `timeout`.
pub async fn wait_for(
    api: &Api<BenchmarkRun>,
    name: &str,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&BenchmarkRun) -> bool,
) -> BenchmarkRun {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let run = api.get(name).await.expect("read run");
        if pred(&run) {
            return run;
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "run {name}: not {what} after {timeout:?}; status:\n{}",
                serde_yaml::to_string(&run.status).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Wait (150 s at most) for run `name` to finish, and check it succeeded.
pub async fn wait_succeeded(api: &Api<BenchmarkRun>, name: &str) -> BenchmarkRun {
    let run = wait_for(api, name, Duration::from_secs(150), "finished", finished).await;
    let st = run.status.as_ref().expect("status");
    assert_eq!(st.phase, Phase::Succeeded, "{st:#?}");
    run
}

pub fn phase(r: &BenchmarkRun) -> Phase {
    r.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

pub fn finished(r: &BenchmarkRun) -> bool {
    phase(r).is_finished()
}

pub async fn result_data(env: &Env, run: &str) -> BTreeMap<String, String> {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    cms.get(&resources::result_cm_name(run))
        .await
        .expect("result ConfigMap")
        .data
        .unwrap_or_default()
}

/// Each worker's persisted summary, from its own result ConfigMap, in `status.workers` order.
pub async fn worker_summaries(env: &Env, run: &BenchmarkRun) -> Vec<Summary> {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    let st = run.status.clone().expect("status");
    let mut out = Vec::new();
    for w in &st.workers {
        let text = results::load_worker(&cms, run, &w.name)
            .await
            .unwrap_or_else(|e| panic!("reading the summary of worker {}: {e}", w.name))
            .unwrap_or_else(|| {
                panic!(
                    "no result ConfigMap {}",
                    resources::worker_result_cm_name(
                        &run.metadata.name.clone().unwrap_or_default(),
                        &w.name
                    )
                )
            });
        out.push(serde_json::from_str(&text).expect("worker summary"));
    }
    out
}

/// Names of the run's per-worker result ConfigMaps of `kind` (`summary` or `rejected`), sorted.
pub async fn result_objects(env: &Env, run: &str, kind: &str) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), env.ns.name());
    let lp = ListParams::default().labels(&format!(
        "{}={run},{}={kind}",
        resources::RUN_LABEL,
        resources::RESULT_LABEL
    ));
    let mut names: Vec<String> = cms
        .list_metadata(&lp)
        .await
        .expect("list result objects")
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    names.sort();
    names
}

pub fn run_selector(run: &str) -> ListParams {
    ListParams::default().labels(&format!("{}={run}", resources::RUN_LABEL))
}

pub async fn run_pods(env: &Env, run: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), env.ns.name());
    pods.list(&run_selector(run))
        .await
        .expect("list pods")
        .items
}

/// Wait until the run's worker pods are gone (cleanup or garbage collection).
pub async fn wait_pods_gone(env: &Env, run: &str, why: &str) {
    for _ in 0..120 {
        if run_pods(env, run).await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let left: Vec<_> = run_pods(env, run)
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    panic!("worker pods of run {run} still present 60 s after {why}: {left:?}");
}

/// The per-op checks every finished run with results must pass: each op's count is the sum
/// of the workers' counts, its p99 is the p99 of the merged histograms (not an average), and
/// the merged summary has exactly the collected workers. Returns the merged summary and the
/// per-worker summaries.
pub async fn check_merged(
    env: &Env,
    run: &BenchmarkRun,
    workers: usize,
) -> (Summary, Vec<Summary>) {
    let name = run.metadata.name.clone().unwrap_or_default();
    let st = run.status.clone().expect("status");
    let data = result_data(env, &name).await;
    let parts = worker_summaries(env, run).await;
    assert_eq!(parts.len(), workers, "one summary per worker");
    let merged: Summary =
        serde_json::from_str(&data[benchrun_operator::crd::MERGED_KEY]).expect("merged");
    let again = Summary::merge(&parts).expect("merge");
    assert!(!merged.ops.is_empty(), "merged summary has ops");
    for (op, stats) in &merged.ops {
        let sum: u64 = parts
            .iter()
            .filter_map(|p| p.ops.get(op))
            .map(|s| s.count)
            .sum();
        assert_eq!(stats.count, sum, "{op} count");
        let r = st
            .results
            .get(&op.to_string())
            .unwrap_or_else(|| panic!("status.results has no {op}: {:?}", st.results.keys()));
        assert_eq!(r.count, sum, "{op} status count");
        assert_eq!(
            r.p99_ms, again.report[op].p99_ms,
            "{op} p99 from merged histograms"
        );
        assert_eq!(r.p99_ms, merged.report[op].p99_ms);
    }
    assert_eq!(merged.workers as usize, workers);
    let mut ids = merged.worker_ids.clone();
    ids.sort();
    let mut want: Vec<_> = st.workers.iter().map(|w| w.name.clone()).collect();
    want.sort();
    assert_eq!(ids, want, "exactly one result per worker");
    for (w, p) in st.workers.iter().zip(&parts) {
        let n: u64 = p.ops.values().map(|s| s.count).sum();
        assert!(n > 0, "worker {} did no operations", w.name);
    }
    (merged, parts)
}

pub fn condition<'a>(
    r: &'a BenchmarkRun,
    t: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    r.status.as_ref()?.conditions.iter().find(|c| c.type_ == t)
}

/// Run `tests/cluster/fault.sh ARGS...` on the cluster the tests use (its state directory
/// passed explicitly); panics with the script's output when it fails.
pub fn fault(args: &[&str]) {
    if let Err(e) = try_fault(args) {
        panic!("{e}");
    }
}

fn try_fault(args: &[&str]) -> Result<(), String> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the operator crate is in the repository");
    let out = std::process::Command::new("bash")
        .arg(repo.join("tests/cluster/fault.sh"))
        .args(args)
        .env("BENCHRUN_STATE", cluster::state_dir())
        .output()
        .map_err(|e| format!("running fault.sh {args:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("fault.sh {}:\n{text}", args.join(" "));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "fault.sh {args:?} failed ({}):\n{text}",
            out.status
        ))
    }
}

/// Undoes a fault when dropped (`fault.sh ARGS...`), so a failing test leaves the cluster
/// whole for the next one. `disarm` once the test has undone it itself.
pub struct Undo(Option<Vec<String>>);

impl Undo {
    pub fn new(args: &[&str]) -> Undo {
        Undo(Some(args.iter().map(|s| s.to_string()).collect()))
    }
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Undo {
    fn drop(&mut self) {
        if let Some(args) = self.0.take() {
            // Never a panic here: this runs while a failing test unwinds.
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Err(e) = try_fault(&args) {
                eprintln!("undoing a fault: {e}");
            }
        }
    }
}

/// The status of worker `name`, or a panic naming the workers there are.
pub fn worker<'a>(run: &'a BenchmarkRun, name: &str) -> &'a benchrun_operator::crd::WorkerStatus {
    let st = run.status.as_ref().expect("status");
    st.workers
        .iter()
        .find(|w| w.name == name)
        .unwrap_or_else(|| panic!("no worker {name} in {:?}", st.workers))
}

/// The largest start skew (ms) a two-worker test accepts (it was 1 s). Measured here:
/// 0.09-5.5 ms, since both workers wake on their own clock at the common start time; 250 ms
/// still leaves a loaded 2-core CI machine room to schedule two processes late. Skew at scale
/// is measured by `cluster_fleet.rs` and `bench/scale.sh`.
pub const MAX_SKEW_MS: f64 = 250.0;

/// The test cluster's `kubectl` (built by tests/cluster/build.sh into the cache, as
/// tests/lib/cache.sh says), with the test kubeconfig; a clear panic when it is not there.
pub fn kubectl() -> std::process::Command {
    let cache = std::env::var_os("BENCHRUN_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/benchrun")
        });
    let version = std::env::var("K8S_VERSION").unwrap_or_else(|_| "v1.37.2".into());
    let bin = cache.join("k8s").join(version).join("bin/kubectl");
    assert!(
        bin.is_file(),
        "no kubectl at {}: run tests/cluster/build.sh (tests/cluster/up.sh does)",
        bin.display()
    );
    let mut c = std::process::Command::new(bin);
    c.arg(format!(
        "--kubeconfig={}",
        benchrun_test_support::cluster::kubeconfig_path().display()
    ));
    c
}
