//! Agent mode: the worker inside a pod, driven by the operator over HTTP.
//!
//! ```text
//! benchrun-worker agent --workload /config/workload.yaml --listen 0.0.0.0:8080 \
//!     --token-file /var/run/benchrun/token/token
//! ```
//!
//! Life of an agent: open the target and prepare the dataset (stage `preparing`), then wait
//! (`ready`, `/readyz` turns 200) for `POST /v1/start`; run from the given wall-clock instant
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
//! - `GET /v1/status` → [`AgentStatus`].
//! - `GET /v1/summary` → the [`Summary`] once `done` (`409` before).
//! - `POST /v1/shutdown`: stop (interrupting a running measured stage) and exit once done.
//!
//! Every `/v1/*` request needs `Authorization: Bearer <token>` (compared in constant time):
//! workers need no Kubernetes API rights, and nobody but the operator may start or stop them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use tokio::sync::{watch, Notify};

// The wire types live in the api crate, which the operator uses without the engine.
pub use benchrun_api::agent::{AgentStage, AgentStatus, StartRequest, StartResponse};

use crate::metrics::Metrics;
use crate::stats::Summary;
use crate::{server, Engine, Workload};

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
    /// After the run, serve the summary at most this long when nobody sends /v1/shutdown.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub linger: Duration,
    /// After a failure, keep reporting it on /v1/status this long before exiting 1.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub error_linger: Duration,
    /// Where the kubelet picks up the failure message for the pod's status.
    #[arg(long, default_value = "/dev/termination-log")]
    pub termination_log: PathBuf,
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
}

impl Agent {
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
                shutdown: false,
                signalled_in: None,
            })),
            token: token.into(),
            metrics,
            start_tx: watch::channel(None).0,
            shutdown: Arc::new(Notify::new()),
        }
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

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(serde_json::json!({"error": "missing or wrong bearer token"})),
    )
        .into_response()
}

fn conflict(message: String) -> Response {
    (
        StatusCode::CONFLICT,
        Json(serde_json::json!({"error": message})),
    )
        .into_response()
}

/// The agent's routes: the worker's usual ones plus `/v1/*`.
pub fn router(agent: Agent) -> Router {
    let control = Router::new()
        .route("/v1/status", get(status_handler))
        .route("/v1/start", post(start_handler))
        .route("/v1/summary", get(summary_handler))
        .route("/v1/shutdown", post(shutdown_handler))
        .with_state(agent.clone());
    server::router(agent.metrics.clone()).merge(control)
}

async fn status_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    Json(agent.status()).into_response()
}

async fn start_handler(
    State(agent): State<Agent>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let worker_time = Utc::now();
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    let req: StartRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({"error": format!("expected {{\"startAt\": RFC 3339}}: {e}")})),
        )
            .into_response(),
    };
    {
        let mut i = agent.lock();
        match (i.stage, i.start_at) {
            (_, Some(at)) if at == req.start_at => {}
            (_, Some(at)) => return conflict(format!("already started for {}", at.to_rfc3339())),
            (AgentStage::Ready, None) => i.start_at = Some(req.start_at),
            (stage, None) => return conflict(format!("not ready to start (stage {stage:?})")),
        }
    }
    agent.start_tx.send_replace(Some(req.start_at));
    Json(StartResponse {
        worker_time,
        start_at: req.start_at,
    })
    .into_response()
}

async fn summary_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    let mut i = agent.lock();
    match (&i.summary, i.stage) {
        (Some(s), AgentStage::Done) => {
            let body = Json(s.clone()).into_response();
            i.summary_fetched = true;
            body
        }
        (_, stage) => conflict(format!("no summary yet (stage {stage:?})")),
    }
}

async fn shutdown_handler(State(agent): State<Agent>, headers: HeaderMap) -> Response {
    if !agent.authorized(&headers) {
        return unauthorized();
    }
    agent.request_shutdown();
    (
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"shutdown": true})),
    )
        .into_response()
}

/// Drive one workload through the agent's stages. Returns when the agent may exit:
/// `Ok(())` after a served summary, `Err(message)` after a failure.
pub async fn drive(
    agent: &Agent,
    workload: Workload,
    linger: Duration,
    error_linger: Duration,
) -> Result<(), String> {
    let result = drive_inner(agent, workload, linger).await;
    if let Err(message) = &result {
        agent.fail(message.clone());
        // Keep answering /v1/status so the operator reads the reason, then exit.
        tokio::select! {
            _ = tokio::time::sleep(error_linger) => {}
            _ = agent.wait_shutdown() => {}
        }
    }
    result
}

async fn drive_inner(
    agent: &Agent,
    mut workload: Workload,
    linger: Duration,
) -> Result<(), String> {
    let cleanup = workload.dataset.cleanup;
    let worker_id = agent.lock().worker_id.clone();
    if workload.dataset.prepare {
        // Each worker prepares, reads and cleans up its own dataset under its own sub-prefix:
        // workers finish at slightly different instants, and a shared dataset would be
        // deleted by the first one done while the others still read it.
        workload.dataset.prefix = format!("{}{worker_id}/", workload.dataset.prefix);
    }
    let engine = Engine::open(workload, agent.metrics.clone(), &worker_id)
        .await
        .map_err(|e| format!("opening the target: {e}"))?;
    let dataset = tokio::select! {
        r = engine.prepare() => r.map_err(|e| format!("preparing the dataset: {e}"))?,
        _ = agent.wait_shutdown() => return Ok(()),
    };
    agent.set_stage(AgentStage::Ready);
    let mut start_rx = agent.start_tx.subscribe();
    let start_at = tokio::select! {
        r = start_rx.wait_for(|s| s.is_some()) => match r {
            Ok(s) => s.unwrap_or_else(Utc::now),
            Err(_) => return Err("start channel closed".into()),
        },
        _ = agent.wait_shutdown() => return Ok(()),
    };
    agent.set_stage(AgentStage::Running);
    let stop = {
        let agent = agent.clone();
        async move { agent.wait_shutdown().await }
    };
    let mut summary = engine
        .run(&dataset, Some(SystemTime::from(start_at)), stop)
        .await
        .map_err(|e| format!("measured stage: {e}"))?;
    agent.lock().started_at = Some(summary.started_at);
    // A signal (eviction, pod deletion) that ended the measured stage early: what it measured
    // is less than the workload asked for, so it is never served as a result (the operator
    // would count it as the worker's whole run). The agent stays in `running`, cleans up, and
    // exits non-zero saying so; the pod tells the operator why it stopped.
    let cut_short = agent.lock().signalled_in == Some(AgentStage::Running);
    if cleanup {
        if !cut_short {
            agent.set_stage(AgentStage::CleaningUp);
        }
        match engine.cleanup().await {
            Ok(st) => summary.cleanup = Some(st),
            // A failed cleanup does not void the measurement: warn and keep the result.
            Err(e) => tracing::warn!("cleanup failed: {e}"),
        }
    }
    if cut_short {
        return Ok(());
    }
    {
        let mut i = agent.lock();
        i.summary = Some(summary);
        i.stage = AgentStage::Done;
    }
    tokio::select! {
        _ = tokio::time::sleep(linger) => {}
        _ = agent.wait_shutdown() => {}
    }
    Ok(())
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
    let agent = Agent::new(&args.worker_id, &token, metrics);
    let bound = server::spawn(args.listen, router(agent.clone()))
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
            Ok(w) => drive(&agent, w, args.linger, args.error_linger).await,
            Err(e) => {
                agent.fail(e.clone());
                tokio::select! {
                    _ = tokio::time::sleep(args.error_linger) => {}
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

    #[tokio::test]
    async fn bad_target_fails_with_message() {
        let agent = Agent::new("w", "t", Arc::new(Metrics::new()));
        let w = Workload::from_yaml(
            "target: file:///proc/benchrun-no-such-dir\ntotalOps: 1\nops: [{op: get}]\ndataset: {objects: 1, size: 4KiB}\n",
        )
        .expect("valid workload");
        let r = drive(
            &agent,
            w,
            Duration::from_millis(10),
            Duration::from_millis(10),
        )
        .await;
        let e = r.expect_err("must fail");
        assert!(
            e.contains("opening the target") || e.contains("preparing"),
            "{e}"
        );
        let st = agent.status();
        assert_eq!(st.stage, AgentStage::Failed);
        assert_eq!(st.error.as_deref(), Some(e.as_str()));
    }
}
