//! What the plugin's cluster tests share: the real test cluster with the CRDs and a namespace
//! of the test's own, the operator's controller running in the test process (watching only
//! that namespace, as `operator/tests/common/mod.rs` does), the built `kubectl-benchrun` run
//! to its end with the test kubeconfig, and the wait for a namespace's runs and claims to go.
//!
//! The plugin is given the test kubeconfig with `--kubeconfig` and `KUBECONFIG` is removed
//! from its environment, so a developer's own cluster is never touched.
// Each test binary uses a different subset of these.
#![allow(dead_code)]

use std::process::{Output, Stdio};
use std::time::Duration;

use benchrun_operator::context::Config;
use benchrun_operator::crd::BenchmarkRun;
use benchrun_operator::{controller, metrics::Metrics};
use benchrun_test_support::{cluster, Images, TestNamespace, NODES};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::{Api, Client};
use tokio::io::AsyncWriteExt;

/// Longest one plugin command may take: a hang guard, not a speed check (the slowest command,
/// `storageclass --control-plane`, runs six profile runs and a control-plane run).
pub const COMMAND_BOUND: Duration = Duration::from_secs(300);

/// The cluster, the CRDs, a namespace, and the worker images the operator starts.
pub struct Env {
    pub client: Client,
    pub ns: TestNamespace,
    pub images: Images,
}

impl Env {
    /// A namespace named after `prefix` on the ready test cluster, with the CRDs served.
    pub async fn new(prefix: &str) -> Env {
        let (client, ns) = env_without_workers(prefix).await;
        Env {
            client,
            ns,
            images: Images::load(),
        }
    }
}

/// The cluster, the CRDs and a namespace, for tests that start no workers (no images needed).
pub async fn env_without_workers(prefix: &str) -> (Client, TestNamespace) {
    benchrun_operator::install_crypto_provider();
    let client = cluster::connect().await;
    cluster::require_ready_nodes(&client, &NODES).await;
    cluster::install_crd(&client, &benchrun_operator::crd()).await;
    cluster::install_crd(&client, &benchrun_operator::schedule_crd()).await;
    let ns = TestNamespace::create(&client, prefix).await;
    (client, ns)
}

/// The controller, in this process, for the test's namespace only, signing with `key`.
pub fn spawn_operator(env: &Env, key: &[u8]) -> tokio::task::JoinHandle<()> {
    let config = Config {
        namespace: Some(env.ns.name().to_string()),
        ..Config::new(key.to_vec(), env.images.worker.clone())
    };
    let run = controller::run(
        env.client.clone(),
        config,
        std::sync::Arc::new(Metrics::new()),
        std::future::pending(),
    );
    tokio::spawn(async move { run.await.expect("the controller starts") })
}

/// The plugin with the test kubeconfig and namespace `ns`.
pub fn plugin(ns: &str, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-benchrun"));
    cmd.env_remove("KUBECONFIG")
        .arg("--kubeconfig")
        .arg(cluster::kubeconfig_path())
        .args(["-n", ns])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// How a plugin command ended.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// The outcome of `kubectl-benchrun args`, printed for the test log (`how` says how it ran).
    pub fn of(out: Output, args: &[&str], how: &str) -> Ran {
        let r = Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        eprintln!(
            "kubectl-benchrun {args:?}{how}: exit {}\n--- stdout\n{}--- stderr\n{}",
            r.code, r.stdout, r.stderr
        );
        r
    }
}

/// Run the plugin to its end, bounded by [`COMMAND_BOUND`].
pub async fn exec(ns: &str, args: &[&str]) -> Ran {
    let out = tokio::time::timeout(COMMAND_BOUND, plugin(ns, args).output())
        .await
        .unwrap_or_else(|_| {
            panic!("kubectl-benchrun {args:?} did not end within {COMMAND_BOUND:?}")
        })
        .expect("kubectl-benchrun starts");
    Ran::of(out, args, "")
}

/// Run the plugin with `input` on its stdin, bounded by [`COMMAND_BOUND`].
pub async fn exec_stdin(ns: &str, args: &[&str], input: &str) -> Ran {
    let mut cmd = plugin(ns, args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl-benchrun starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.as_bytes())
        .await
        .expect("write stdin");
    drop(stdin);
    let out = tokio::time::timeout(COMMAND_BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!("kubectl-benchrun {args:?} did not end within {COMMAND_BOUND:?}")
        })
        .expect("kubectl-benchrun runs");
    Ran::of(out, args, " (stdin)")
}

/// Wait, bounded by `bound`, until the namespace has no run and no claim left (deletion is
/// asynchronous: through the operator's finalizer and garbage collection).
pub async fn wait_no_runs_or_claims(env: &Env, bound: Duration) {
    let runs: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), env.ns.name());
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let left_runs = runs
            .list_metadata(&Default::default())
            .await
            .expect("list runs")
            .items
            .len();
        let left_claims = claims
            .list_metadata(&Default::default())
            .await
            .expect("list claims")
            .items
            .len();
        if left_runs == 0 && left_claims == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left_runs} runs and {left_claims} claims left {bound:?} after the command"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
