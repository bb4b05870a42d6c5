//! Agent mode: the worker inside a pod, driven by the operator over HTTP.
//!
//! ```text
//! benchrun-worker agent --workload /config/workload.yaml --listen 0.0.0.0:8080 \
//!     --token-file /var/run/benchrun/token/token
//! ```
//!
//! Life of an agent: open the target and prepare the dataset (stage `preparing`), then wait
//! (`ready`, `/readyz` turns 200) for `POST /v1/start`, at most `--start-timeout` (then
//! `failed`, saying so); run from the given wall-clock instant
//! (`running`), clean up per workload (`cleaningUp`), keep the summary (`done`) and serve it
//! until the operator has fetched it and sent `POST /v1/shutdown`, or `--linger` passes.
//! A failure (bad target, prepare error) is stage `failed` with the message; the process then
//! exits 1 after `--error-linger`, writing the message to `/dev/termination-log` so the pod
//! shows it.
//!
//! # Endpoints
//! - `GET /metrics`, `/healthz`, `/readyz`: as in `run --metrics-addr`, unauthenticated, for
//!   Prometheus and the kubelet.
//! - `POST /v1/start` `{"startAt": "<RFC 3339>"}` → `{"workerTime", "startAt"}`; `workerTime` is
//!   this worker's clock when the request arrived, for the operator's clock-offset estimate.
//!   Repeating the same `startAt` is accepted (an operator restarted mid-start resends it); a
//!   different one once started is `409`.
//! - `POST /v1/stop-at` `{"stopAt": "<RFC 3339>", "stable": {...}}` → `{"workerTime", "stopAt"}`:
//!   end the running measured stage at that instant, as its duration would (an instant
//!   already past: at once), because the run is steady (`stopWhenStable` decided by the
//!   operator from all workers' merged throughput; the summary's `stable` says so). Repeating
//!   the same instant is accepted; another one is `409`, as is a stop before the start.
//! - `GET /v1/status` → [`AgentStatus`]; with `stopWhenStable`, while running, its `seconds`
//!   are the measured stage's last per-second op counts the operator decides on.
//! - `GET /v1/summary` → the [`Summary`] once `done` (`409` before).
//! - `POST /v1/shutdown`: stop (interrupting a running measured stage) and exit once done.
//!
//! Every `/v1/*` request needs `Authorization: Bearer <token>` (compared in constant time):
//! workers need no Kubernetes API rights, and nobody but the operator may start or stop them.
//!
//! # Files
//! - `mod.rs`: the options, the shared state and its token check, and `main`
//! - `server.rs`: the HTTP routes and handlers of `/v1/*`
//! - `drive.rs`: one workload driven through the agent's stages by the engine
//! - `ranked.rs`: training and checkpoint workloads, split over the run's ranks
//!   (`--worker-index`, `--workers`)
//! - `oplog.rs`: the op-log recorded to a spool and uploaded after the run (`--oplog-uri`)

mod drive;
mod oplog;
mod ranked;
mod server;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use tokio::sync::{watch, Notify};

// The wire types live in the api crate, which the operator uses without the engine.
pub use benchrun_api::agent::{
    AgentStage, AgentStatus, StartRequest, StartResponse, StopAtRequest, StopAtResponse,
};
use benchrun_api::stable::SecondCounts;

use crate::engine::StopAt;

use crate::metrics::Metrics;
use crate::stats::Summary;
use crate::units::HumanDuration;
use crate::Workload;

pub use drive::drive;
pub use oplog::OplogPlan;
pub use server::router;

/// Options of `benchrun-worker agent`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Workload file (YAML), mounted from the run's ConfigMap.
    #[arg(long, value_name = "FILE")]
    pub workload: PathBuf,
    /// Address of the HTTP endpoint (metrics, health, control).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// File holding the bearer token the operator sends (mounted from the run's token Secret).
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// Name of this worker in summaries and in the keys its PUTs write.
    #[arg(long, env = "BENCHRUN_WORKER_ID", default_value = "worker")]
    pub worker_id: String,
    /// This worker's index among the run's workers (0-based): its rank for training and
    /// checkpoint workloads, which split the dataset and the checkpoint over the workers. The
    /// operator sets it, and `--workers`, from the run's worker list.
    #[arg(long, env = "BENCHRUN_WORKER_INDEX", default_value_t = 0)]
    pub worker_index: u32,
    /// The number of workers of the run (see --worker-index).
    #[arg(long, env = "BENCHRUN_WORKERS", default_value_t = 1)]
    pub workers: u32,
    /// The run's identity, which keys what every worker of the run writes beside the
    /// workload's seed and the worker's index, so that no two workers or runs write the same
    /// data. The operator sets it from the run's UID (as an environment variable, which an
    /// older agent ignores).
    #[arg(long, env = crate::datagen::RUN_SEED_ENV, value_name = "N")]
    pub run_seed: Option<u64>,
    /// After the run, serve the summary at most this long when nobody sends /v1/shutdown.
    #[arg(long, default_value = "10m")]
    pub linger: HumanDuration,
    /// Once ready, wait for the operator's start time at most this long; then fail, saying so
    /// on /v1/status and in the termination message (the operator gone, or its start request
    /// never reaching this pod), instead of waiting for ever. The operator passes the run's
    /// deadline (as an environment variable, which an older agent ignores).
    #[arg(long, env = "BENCHRUN_START_TIMEOUT", default_value = "1h")]
    pub start_timeout: HumanDuration,
    /// With `stopWhenStable`: the run (the operator, from all its workers' merged
    /// throughput) decides when the stage is steady and sends the stop instant
    /// (`POST /v1/stop-at`); this worker does not stop on its own stability. The operator
    /// sets it (as an environment variable, which an older agent ignores) for runs of
    /// several workers.
    #[arg(long, env = STABLE_BY_RUN_ENV, default_value_t = false)]
    pub stable_by_run: bool,
    /// After a failure, keep reporting it on /v1/status this long before exiting 1.
    #[arg(long, default_value = "30s")]
    pub error_linger: HumanDuration,
    /// Where the kubelet picks up the failure message for the pod's status.
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
    /// Record every op to an op-log and upload it, after the measured stage, as
    /// `<URI><worker-id>.oplog.gz` with the workload's own storage settings. URI is a
    /// directory of the target's scheme ending in `/` (the operator passes
    /// `<spec.oplog.uri><namespace>/<run>/<run UID>/`).
    #[arg(long, value_name = "URI")]
    pub oplog_uri: Option<String>,
    /// With --oplog-uri: the writable directory the log is spooled to during the run.
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    pub oplog_spool: PathBuf,
    /// With --oplog-uri: records queued for the writer; when full, records are dropped (and
    /// counted in the summary's `oplog.dropped`) so the run never waits for the disk.
    #[arg(long, value_name = "N", default_value_t = crate::oplog::writer::DEFAULT_QUEUE)]
    pub oplog_queue: usize,
}

/// Shared state between the HTTP handlers and the driving task.
#[derive(Debug)]
struct Inner {
    worker_id: String,
    stage: AgentStage,
    error: Option<String>,
    start_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    summary: Option<Summary>,
    summary_fetched: bool,
    stop_at: Option<DateTime<Utc>>,
    shutdown: bool,
    /// The stage a SIGTERM/Ctrl-C arrived in (eviction, pod deletion), as opposed to the
    /// operator's `POST /v1/shutdown`.
    signalled_in: Option<AgentStage>,
}

/// The agent's shared state, cheap to clone into handlers.
#[derive(Clone, Debug)]
pub struct Agent {
    inner: Arc<Mutex<Inner>>,
    token: Arc<str>,
    metrics: Arc<Metrics>,
    /// Wakes the driver when a start time arrives.
    start_tx: watch::Sender<Option<DateTime<Utc>>>,
    /// Wakes the driver (and a running measured stage) on shutdown.
    shutdown: Arc<Notify>,
    /// With `--oplog-uri`: where the run's op-log is recorded and uploaded.
    oplog: Option<Arc<OplogPlan>>,
    /// Longest wait, once ready, for the start time (`--start-timeout`).
    start_timeout: std::time::Duration,
    /// This worker's index among the run's workers, and their number.
    rank: (u32, u32),
    /// `--run-seed`: the run's identity, which keys what this worker writes.
    run_seed: Option<u64>,
    /// `--stable-by-run`: the operator decides `stopWhenStable`.
    stable_by_run: bool,
    /// The measured stage's last seconds, with `stopWhenStable` (see `RunStability`).
    seconds: Arc<Mutex<Option<SecondCounts>>>,
    /// Wakes the engine when the operator's stop instant arrives.
    stop_at_tx: watch::Sender<Option<StopAt>>,
}

/// The environment variable of `--stable-by-run`.
pub const STABLE_BY_RUN_ENV: &str = "BENCHRUN_STABLE_BY_RUN";

/// `--start-timeout` by default: an agent nobody starts does not hold its node for ever.
pub const DEFAULT_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl Agent {
    /// A new agent in stage `preparing`, accepting `token` on `/v1/*`.
    pub fn new(worker_id: &str, token: &str, metrics: Arc<Metrics>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                worker_id: worker_id.to_string(),
                stage: AgentStage::Preparing,
                error: None,
                start_at: None,
                started_at: None,
                summary: None,
                summary_fetched: false,
                stop_at: None,
                shutdown: false,
                signalled_in: None,
            })),
            token: token.into(),
            metrics,
            start_tx: watch::channel(None).0,
            shutdown: Arc::new(Notify::new()),
            oplog: None,
            start_timeout: DEFAULT_START_TIMEOUT,
            rank: (0, 1),
            run_seed: None,
            stable_by_run: false,
            seconds: Arc::new(Mutex::new(None)),
            stop_at_tx: watch::channel(None).0,
        }
    }

    /// The same agent as worker `index` of `count` (training and checkpoint workloads).
    pub fn with_rank(mut self, index: u32, count: u32) -> Self {
        self.rank = (index, count);
        self
    }

    /// The same agent writing as a worker of the run seeded `run_seed` (`--run-seed`).
    pub fn with_run_seed(mut self, run_seed: Option<u64>) -> Self {
        self.run_seed = run_seed;
        self
    }

    /// Who writes: the run and this worker's place in it (see [`crate::datagen::Writer`]).
    pub fn writer(&self) -> crate::datagen::Writer {
        crate::datagen::Writer {
            run: self.run_seed,
            index: self.rank.0,
            count: self.rank.1.max(1),
        }
    }

    /// The same agent leaving `stopWhenStable` to the run (`--stable-by-run`).
    pub fn with_stable_by_run(mut self, by_run: bool) -> Self {
        self.stable_by_run = by_run;
        self
    }

    /// The same agent waiting at most `timeout` for its start time once ready.
    pub fn with_start_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// The same agent recording its run's op-log as `plan` says.
    pub fn with_oplog(mut self, plan: OplogPlan) -> Self {
        self.oplog = Some(Arc::new(plan));
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicked handler cannot leave the state half-written (every update is one
        // assignment), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_stage(&self, stage: AgentStage) {
        self.lock().stage = stage;
    }

    fn fail(&self, message: String) {
        let mut i = self.lock();
        i.stage = AgentStage::Failed;
        i.error = Some(message);
    }

    /// The body of `GET /v1/status` now.
    pub fn status(&self) -> AgentStatus {
        let (ops, bytes, errors) = self.metrics.totals();
        let i = self.lock();
        AgentStatus {
            worker_id: i.worker_id.clone(),
            stage: i.stage,
            error: i.error.clone(),
            start_at: i.start_at,
            started_at: i.started_at,
            ops,
            bytes,
            errors,
            worker_time: Utc::now(),
            summary_fetched: i.summary_fetched,
            // Only while measuring: what the operator decides on.
            seconds: (i.stage == AgentStage::Running)
                .then(|| {
                    self.seconds
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone()
                })
                .flatten(),
            stop_at: i.stop_at,
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return false;
        };
        match value.strip_prefix("Bearer ") {
            Some(given) => constant_time_eq(given.trim().as_bytes(), self.token.as_bytes()),
            None => false,
        }
    }

    fn request_shutdown(&self) {
        self.lock().shutdown = true;
        // notify_one stores a permit, so a shutdown sent before anyone waits is not lost.
        self.shutdown.notify_one();
        self.shutdown.notify_waiters();
    }

    /// A signal (not the operator) asks the agent to stop.
    fn signalled(&self) {
        {
            let mut i = self.lock();
            let stage = i.stage;
            i.signalled_in.get_or_insert(stage);
        }
        self.request_shutdown();
    }

    /// Why the agent must not exit 0: a signal stopped it before the operator fetched the
    /// summary, so whatever it measured is lost or partial.
    fn stopped_before_collection(&self) -> Option<String> {
        let i = self.lock();
        let stage = i.signalled_in?;
        if i.summary_fetched {
            return None;
        }
        Some(format!(
            "stopped by a signal in stage {} before the operator collected the summary",
            serde_json::to_value(stage)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| format!("{stage:?}"))
        ))
    }

    async fn wait_shutdown(&self) {
        loop {
            let notified = self.shutdown.notified();
            if self.lock().shutdown {
                return;
            }
            notified.await;
        }
    }
}

/// Compare without an early exit, so response timing does not reveal a token prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn read_token(path: &Path) -> anyhow::Result<String> {
    let token = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    let token = token.trim().to_string();
    anyhow::ensure!(
        !token.is_empty(),
        "the token file {} is empty",
        path.display()
    );
    Ok(token)
}

/// `benchrun-worker agent`: serve, drive, exit 0 after a served summary or 1 after a failure.
pub async fn main(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let token = read_token(&args.token_file)?;
    let metrics = Arc::new(Metrics::new());
    let mut agent = Agent::new(&args.worker_id, &token, metrics)
        .with_start_timeout(args.start_timeout.get())
        .with_rank(args.worker_index, args.workers)
        .with_run_seed(args.run_seed)
        .with_stable_by_run(args.stable_by_run);
    if let Some(uri) = &args.oplog_uri {
        agent = agent.with_oplog(OplogPlan {
            uri: uri.clone(),
            spool: args.oplog_spool.clone(),
            queue: args.oplog_queue,
        });
    }
    let bound = crate::server::spawn(args.listen, router(agent.clone()))
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!("agent {} listening on {bound}", args.worker_id);
    // A workload that does not load is reported like any other failure: on /v1/status and in
    // the termination message, so the run's condition can name the field.
    let workload = std::fs::read_to_string(&args.workload)
        .map_err(|e| format!("reading {}: {e}", args.workload.display()))
        .and_then(|t| Workload::from_yaml(&t).map_err(|e| format!("invalid workload: {e}")));
    let outcome = {
        let on_signal = {
            let agent = agent.clone();
            let signal = crate::shutdown::signal();
            async move {
                signal.await;
                agent.signalled();
            }
        };
        let signal_task = tokio::spawn(on_signal);
        let r = match workload {
            Ok(w) => drive(&agent, w, args.linger.get(), args.error_linger.get()).await,
            Err(e) => {
                agent.fail(e.clone());
                tokio::select! {
                    _ = tokio::time::sleep(args.error_linger.get()) => {}
                    _ = agent.wait_shutdown() => {}
                }
                Err(e)
            }
        };
        signal_task.abort();
        match (r, agent.stopped_before_collection()) {
            (Ok(()), Some(message)) => Err(message),
            (r, _) => r,
        }
    };
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(message) => {
            eprintln!("error: {message}");
            crate::shutdown::write_termination_message(&args.termination_log, &message);
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn token_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn bearer_header_is_checked() {
        let agent = Agent::new("w", "s3cret", Arc::new(Metrics::new()));
        let mut h = HeaderMap::new();
        assert!(!agent.authorized(&h));
        h.insert("authorization", "Bearer wrong".parse().unwrap());
        assert!(!agent.authorized(&h));
        h.insert("authorization", "s3cret".parse().unwrap());
        assert!(!agent.authorized(&h));
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert!(agent.authorized(&h));
    }

    #[test]
    fn a_signal_before_the_summary_is_collected_is_a_failure() {
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()));
        agent.set_stage(AgentStage::Running);
        // The operator's own shutdown request is a normal end.
        agent.request_shutdown();
        assert_eq!(agent.stopped_before_collection(), None);
        // A signal (eviction) while running: not a success, and the stage is named.
        agent.signalled();
        assert_eq!(
            agent.stopped_before_collection().as_deref(),
            Some("stopped by a signal in stage running before the operator collected the summary")
        );
        // Once the operator has the summary, a signal loses nothing.
        agent.lock().summary_fetched = true;
        assert_eq!(agent.stopped_before_collection(), None);
    }

    /// A signal mid-run (the kubelet evicting the pod): the measured stage stops, the agent
    /// cleans up but never offers the cut-short summary, and must not exit 0.
    #[tokio::test]
    async fn a_signal_mid_run_serves_no_summary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = Workload::from_yaml(&format!(
            "target: file://{}\nduration: 60s\nconcurrency: 1\nops: [{{op: put}}]\nobjectSize: 4KiB\ndataset: {{objects: 0}}\nwrite: {{maxObjects: 4}}\nrateLimit: 200\n",
            dir.path().display()
        ))
        .expect("valid workload");
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()));
        let driver = {
            let agent = agent.clone();
            tokio::spawn(async move {
                drive(&agent, w, Duration::from_secs(60), Duration::from_secs(60)).await
            })
        };
        // Bounded waits on the agent's own state: ready, then some PUTs measured.
        let wait = |pred: fn(&AgentStatus) -> bool| {
            let agent = agent.clone();
            async move {
                for _ in 0..1000 {
                    if pred(&agent.status()) {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                panic!("agent never got there: {:?}", agent.status());
            }
        };
        wait(|s| s.stage == AgentStage::Ready).await;
        let _ = agent.start_tx.send(Some(Utc::now()));
        wait(|s| s.stage == AgentStage::Running && s.ops >= 5).await;
        agent.signalled();
        let r = tokio::time::timeout(Duration::from_secs(10), driver)
            .await
            .expect("the agent stops promptly")
            .expect("no panic");
        assert_eq!(r, Ok(()));
        assert_eq!(agent.status().stage, AgentStage::Running);
        assert!(agent.lock().summary.is_none(), "no summary to serve");
        assert_eq!(
            agent.stopped_before_collection().as_deref(),
            Some("stopped by a signal in stage running before the operator collected the summary")
        );
        // What it wrote is cleaned up all the same.
        let left: Vec<_> = walk(dir.path());
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }

    #[tokio::test]
    async fn shutdown_before_wait_is_not_lost() {
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()));
        agent.request_shutdown();
        tokio::time::timeout(Duration::from_secs(1), agent.wait_shutdown())
            .await
            .expect("shutdown seen");
    }
}
