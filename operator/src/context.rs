//! What every reconcile shares: the operator's configuration and its clients.

use crate::backoff::Backoff;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::client::WorkerClient;
use crate::metrics::Metrics;
use crate::resources::MANAGER;

/// Default of `--worker-parallelism`: calls to workers in flight at once per run.
pub const DEFAULT_WORKER_PARALLELISM: usize = 64;
/// Default of `--worker-timeout`: longest call to one worker (status, start, summary,
/// shutdown). A dead worker costs this once per pass, beside the others, not before them.
pub const DEFAULT_WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// How often an active run is looked at even when nothing changes (workers are polled, not
/// watched).
pub(crate) const POLL: Duration = Duration::from_secs(2);

/// What the operator was started with.
#[derive(Clone, Debug)]
pub struct Config {
    /// Key for the per-run worker tokens (HMAC); must stay the same across restarts.
    pub key: Vec<u8>,
    /// Worker image when a run names none.
    pub worker_image: String,
    /// Watch only this namespace (tests); `None` for all.
    pub namespace: Option<String>,
    /// Port of the worker agents.
    pub agent_port: u16,
    /// What runs may ask for (worker images, hostPath).
    pub policy: crate::policy::Policy,
    /// With a value, each run gets a NetworkPolicy letting only these peers reach its workers.
    pub worker_ingress: Option<crate::netpol::WorkerIngress>,
    /// Calls to one run's workers in flight at once (status, start, summary, shutdown).
    pub worker_parallelism: usize,
    /// Longest call to one worker.
    pub worker_timeout: Duration,
}

/// Shared by every reconcile.
pub struct Context {
    /// The API server client.
    pub client: Client,
    /// What the operator was started with.
    pub config: Config,
    /// The operator's own metrics.
    pub metrics: Arc<Metrics>,
    /// HTTP client for the workers' agents (connection pool shared by every run).
    pub http: reqwest::Client,
    /// The one event recorder of the operator: its cache turns a repeated event into a series.
    pub recorder: Recorder,
    /// Retry delays of failed passes, per run.
    pub backoff: Backoff,
}

impl Context {
    /// The context of a controller using `client`, started with `config`.
    pub fn new(client: Client, config: Config, metrics: Arc<Metrics>) -> Self {
        let http = WorkerClient::http(config.worker_timeout);
        let reporter = Reporter {
            controller: MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            backoff: Backoff::default(),
            client,
            config,
            metrics,
            http,
        }
    }
}
