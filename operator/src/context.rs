//! What every reconcile shares: the operator's configuration and its clients.

use crate::backoff::Backoff;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::Client;

use crate::metrics::Metrics;
use crate::resources::MANAGER;

/// Default of `--worker-parallelism`: calls to workers in flight at once per run.
pub const DEFAULT_WORKER_PARALLELISM: usize = 64;
/// Default of `--worker-timeout`: longest call to one worker (status, start, summary,
/// shutdown). A dead worker costs this once per pass, beside the others, not before them.
pub const DEFAULT_WORKER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default of `--progress-interval`: how often a running run's `status.progress` is rewritten.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

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
    /// Pull secrets of the worker pods when a run names none (`spec.workers.imagePullSecrets`).
    pub worker_image_pull_secrets: Vec<String>,
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
    /// Least time between two writes of a running run's `status.progress`.
    pub progress_interval: Duration,
}

impl Config {
    /// The operator's defaults, with this key and worker image: every namespace, the agent's
    /// port, the default policy, no NetworkPolicy, the default parallelism, timeout and
    /// progress interval (what `run` starts with when no flag says otherwise).
    pub fn new(key: Vec<u8>, worker_image: String) -> Config {
        Config {
            key,
            worker_image,
            worker_image_pull_secrets: Vec::new(),
            namespace: None,
            agent_port: crate::resources::AGENT_PORT,
            policy: Default::default(),
            worker_ingress: None,
            worker_parallelism: DEFAULT_WORKER_PARALLELISM,
            worker_timeout: DEFAULT_WORKER_TIMEOUT,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
        }
    }
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
    /// Every pod the operator manages, kept by the controller's pod watch: a pass reads its
    /// run's pods here instead of listing them.
    pub pods: Store<Pod>,
    /// The control-plane runs this process is executing (`spec.controlPlane`).
    pub control_plane: crate::control_plane::Runs,
    /// The `resourceVersion` of each run's last status write (by `namespace/name`): a cached
    /// run that is not that version may predate the write (see [`Context::is_stale`]).
    written: Mutex<HashMap<String, String>>,
}

impl Context {
    /// The context of a controller using `client`, started with `config`.
    pub fn new(
        client: Client,
        config: Config,
        metrics: Arc<Metrics>,
        pods: Store<Pod>,
        http: reqwest::Client,
    ) -> Self {
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
            pods,
            control_plane: Default::default(),
            written: Mutex::default(),
        }
    }

    /// Remember the `resourceVersion` a status write of run `key` produced.
    pub(crate) fn wrote(&self, key: &str, resource_version: Option<String>) {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        match resource_version {
            Some(rv) => w.insert(key.to_string(), rv),
            None => w.remove(key),
        };
    }

    /// Whether the cached copy of run `key` (at `resource_version`) may predate this
    /// operator's last status write of it. The watch usually delivers a write within
    /// milliseconds, but a pass queued right behind the write can be handed the copy from
    /// before it; one-shot decisions (placement, the start time) taken on that copy would be
    /// taken twice. Versions are opaque, so any difference counts: at worst one extra read.
    pub(crate) fn is_stale(&self, key: &str, resource_version: Option<&str>) -> bool {
        let w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        w.get(key)
            .is_some_and(|rv| Some(rv.as_str()) != resource_version)
    }

    /// Forget run `key` (deleted).
    pub(crate) fn forget(&self, key: &str) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}
