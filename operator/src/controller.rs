//! The controller: watches runs (and the pods they own), runs one reconcile pass per change or
//! poll, and requeues a failed pass.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::{watcher, Controller};
use kube::{Api, Client, ResourceExt};
use tracing::{warn, Instrument};

use crate::context::{Config, Context};
use crate::metrics::Metrics;
use crate::resources::MANAGER;
use crate::{decode, reconcile, Error, Result};

/// Run the controller until `shutdown` completes.
///
/// Runs are watched untyped and decoded one by one ([`crate::decode`]): a run the Rust type
/// cannot read is reported on itself instead of failing the watch of every run.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ar = decode::api_resource();
    let (runs, pods): (Api<DynamicObject>, Api<Pod>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced_with(client.clone(), ns, &ar),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all_with(client.clone(), &ar), Api::all(client.clone())),
    };
    let ctx = Arc::new(Context::new(client, config, metrics));
    Controller::new_with(runs, watcher::Config::default(), ar)
        .owns(
            pods,
            watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGER}")),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile_object, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!("reconcile: {e}");
            }
        })
        .await;
}

/// A failed pass: counted by its error label, retried after a delay that doubles per run
/// while its passes keep failing (see [`Backoff`](crate::backoff::Backoff)).
fn error_policy(run: Arc<DynamicObject>, err: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff.failed(&key(&run));
    warn!(
        "reconcile {} failed: {err}; retrying in {}s",
        run.name_any(),
        delay.as_secs()
    );
    ctx.metrics.error(err.metric_label());
    Action::requeue(delay)
}

/// `namespace/name`, the key of a run's retry delays.
fn key(obj: &DynamicObject) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// One pass, in a `reconcile` span naming the run, so every log line of the pass says which.
async fn reconcile_object(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action> {
    let span = tracing::info_span!(
        "reconcile",
        namespace = %obj.namespace().unwrap_or_default(),
        run = %obj.name_any()
    );
    let run = key(&obj);
    let result = reconcile_decoded(obj, ctx.clone()).instrument(span).await;
    if result.is_ok() {
        ctx.backoff.reset(&run);
    }
    result
}

/// Decode the run, then reconcile it; a run that does not decode is reported on itself.
async fn reconcile_decoded(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action> {
    match decode::decode(&obj) {
        Ok(run) => reconcile::reconcile(Arc::new(run), ctx).await,
        Err(message) => {
            ctx.metrics.error("decode");
            decode::report(&obj, &message, &ctx.client, &ctx.recorder).await?;
            Ok(Action::await_change())
        }
    }
}
