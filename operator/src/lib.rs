//! benchrun's Kubernetes operator: `BenchmarkRun` resources become worker pods on the selected
//! nodes, started at one common instant, with the exactly merged result written back.
//!
//! # Layout
//! - [`crd`](mod@crd): the `BenchmarkRun` types: spec, status and their sub-types; schema, CEL, columns
//! - [`validate`]: what the schema cannot check in a spec, each problem with its field path
//! - [`control_plane`]: `spec.controlPlane`: claims provisioned, attached, written and deleted, timed by watch
//! - [`context`]: what every pass shares: configuration, API and HTTP clients, event recorder
//! - [`controller`]: the watch, one traced pass per change or poll, the error policy, `run()`
//! - [`reconcile`]: one pass over one run, deciding through [`run_rules`]; the RBAC it needs
//! - [`status`]: the status a pass builds: conditions, phase, events, server-side-apply writes
//! - [`placement`]: where the workers run (perNode: Ready nodes, taints, required affinity)
//! - [`children`]: creating and deleting what a run owns: the one deletion path (read, owned
//!   by the run's or schedule's UID, deleted with that UID as a precondition)
//! - [`lost`]: when a worker is lost although its pod still says Running (pure)
//! - [`worker_cleanup`]: how long workers get to remove what they created, on every path
//! - [`run_rules`]: pure decisions: pod classification, phase transitions, skew, aggregation
//! - [`resources`]: pure builders for the objects a run owns (ConfigMap, token Secret, Pods)
//! - [`client`]: the workers' control endpoint (`/v1/start`, `/v1/status`, `/v1/summary`)
//! - [`results`]: persisting each worker's summary, merging, folding into the status
//! - [`thresholds`]: `spec.thresholds` checked and evaluated on the merged result
//! - [`baseline`]: the merged result against another run's (`Regressed`)
//! - [`schedule`]: `BenchmarkSchedule`: cron times, CronJob's rules (pure), its controller
//! - [`sweep`]: `spec.matrix`: the combinations, their child runs' specs, and the table
//! - [`search`]: maximum-accelerators searches: each probe a child run, planned and judged
//! - [`decode`]: runs decoded one at a time, so one unreadable run is reported, not fatal
//! - [`podfields`]: the Kubernetes-typed fields copied into worker pods, checked before any pod
//! - [`oplog`]: `spec.oplog` checked, and the directory a run's workers upload their op-logs to
//! - [`netpol`]: the per-run NetworkPolicy: only the operator (and named scrapers) reach workers
//! - [`policy`]: the administrator's limits on runs (worker images, hostPath)
//! - [`autoscaler`]: what a node autoscaler said about an unschedulable worker, how long to wait
//! - [`apicount`]: the operator's own API requests, counted by verb
//! - [`backoff`]: retry delays of failed passes, per run (5 s doubling to 60 s)
//! - [`metrics`]: the operator's own Prometheus metrics
//! - [`failpoint`]: crash points for tests (a panic exactly between two steps)
//! - [`leader`]: leader election on a Lease, so that only one replica runs the controller

#![warn(missing_docs)]

pub mod apicount;
pub mod autoscaler;
pub mod backoff;
pub mod baseline;
pub mod children;
pub mod client;
pub mod context;
pub mod control_plane;
pub mod controller;
pub mod crd;
pub mod decode;
pub mod failpoint;
#[cfg(test)]
mod fake_api;
pub mod leader;
pub mod lost;
pub mod metrics;
pub mod netpol;
pub mod oplog;
pub mod placement;
pub mod podfields;
pub mod policy;
pub mod reconcile;
pub mod resources;
pub mod results;
pub mod run_rules;
pub mod schedule;
pub mod search;
pub mod status;
pub mod sweep;
pub mod thresholds;
pub mod validate;
pub mod worker_cleanup;

/// Everything that can go wrong in a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A call to a worker's agent failed.
    #[error("worker {worker}: {message}")]
    Worker {
        /// The worker's name.
        worker: String,
        /// What went wrong.
        message: String,
    },
    /// A persisted summary cannot be read or merged.
    #[error("result: {0}")]
    Result(String),
    /// An object could not be (de)serialized.
    #[error("serialization: {0}")]
    Json(#[from] serde_json::Error),
    /// An object lacks what the operator needs (a namespace, a UID).
    #[error("invalid object: {0}")]
    Invalid(String),
    /// The apiserver refused an object the run asked for (HTTP 422): a problem of the run.
    #[error("the API server rejected {what}: {message}")]
    Rejected {
        /// Kind and name of the refused object.
        what: String,
        /// The API server's message.
        message: String,
    },
    /// An object the run needs exists under its name and is not the run's.
    #[error("{what} exists and does not belong to this run ({owner})")]
    NotOurs {
        /// Kind and name of the object.
        what: String,
        /// Who owns it, as a user can act on it.
        owner: String,
        /// It belongs to an earlier run of the same name, which Kubernetes is deleting: wait.
        earlier_run: bool,
    },
}

impl Error {
    /// Short label for the `benchrun_operator_reconcile_errors_total{error}` metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Worker { .. } => "worker",
            Error::Result(_) => "result",
            Error::Json(_) => "json",
            Error::Invalid(_) => "invalid",
            Error::Rejected { .. } => "rejected",
            Error::NotOurs { .. } => "not_ours",
        }
    }
}

/// The operator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Choose rustls' crypto provider for the process. The operator alone links only `ring` (kube),
/// but its tests also link the worker, whose object_store brings `aws-lc-rs`; with both, rustls
/// cannot pick one itself and would panic on the first TLS connection. Explicit, so TLS to the
/// API server does not depend on which other crates are linked. Call before creating a kube
/// client; repeated calls are harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The CRD, as installed: the derived one with schemars' unsigned-integer formats removed
/// (`uint32`, `uint64`), which the apiserver does not know and warns about on every apply.
pub fn crd(
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    installable(crd::BenchmarkRun::crd())
}

/// The `BenchmarkSchedule` CRD, as installed (see [`crd`]).
pub fn schedule_crd(
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    installable(crd::schedule::BenchmarkSchedule::crd())
}

fn installable(
    derived: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let Ok(mut v) = serde_json::to_value(&derived) else {
        return derived;
    };
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                if o.get("format")
                    .and_then(|f| f.as_str())
                    .is_some_and(|f| f.starts_with("uint"))
                {
                    o.remove("format");
                }
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    serde_json::from_value(v).unwrap_or(derived)
}

/// The CRD as YAML: what `benchrun-operator crd` prints and `crds/benchmarkrun.yaml` holds.
pub fn crd_yaml() -> String {
    // Serializing a CRD built from our own types cannot fail.
    let body = serde_yaml::to_string(&crd()).unwrap_or_default();
    format!("# Generated by `benchrun-operator crd`; do not edit. Regenerate after changing operator/src/crd/ or api/src/spec/.\n{body}")
}

/// The schedule CRD as YAML: what `benchrun-operator crd --schedule` prints and
/// `crds/benchmarkschedule.yaml` holds.
pub fn schedule_crd_yaml() -> String {
    let body = serde_yaml::to_string(&schedule_crd()).unwrap_or_default();
    format!("# Generated by `benchrun-operator crd --schedule`; do not edit. Regenerate after changing operator/src/crd/ or api/src/spec/.\n{body}")
}
