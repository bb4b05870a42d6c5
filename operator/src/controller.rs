//! The controller: watches runs (and the pods they own), runs one reconcile pass per change or
//! poll, and requeues a failed pass. The schedule controller ([`crate::schedule::controller`])
//! runs beside it.
//!
//! What triggers a pass: a change of a run's spec (its `generation`), labels, annotations or
//! finalizers, any change of a pod it owns, and the pass's own requeue (every
//! [`POLL`](crate::context::POLL) while a run is active). Not its status: the operator is the
//! only writer of the status, and a pass triggered by its own write would probe every worker
//! again at once (one 4-worker run cost 1,177 passes and 1,123 status writes in 120 s).

use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{predicates, watcher, Controller, Predicate, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use tracing::{warn, Instrument};

use crate::context::{Config, Context};
use crate::metrics::Metrics;
use crate::resources::MANAGER;
use crate::{decode, reconcile, Error, Result};

/// How soon a pass that found the pod store not yet filled runs again.
const STORE_NOT_READY: std::time::Duration = std::time::Duration::from_millis(200);

/// Run the controller until `shutdown` completes; an error when it cannot start.
///
/// Runs are watched untyped and decoded one by one ([`crate::decode`]): a run the Rust type
/// cannot read is reported on itself instead of failing the watch of every run.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let ar = decode::api_resource();
    let (runs, pods): (Api<DynamicObject>, Api<Pod>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced_with(client.clone(), ns, &ar),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all_with(client.clone(), &ar), Api::all(client.clone())),
    };
    // Runs: the store sees every change; passes are triggered by the changes that are not
    // the operator's own status writes.
    let run_writer = Writer::new(ar.clone());
    let run_store = run_writer.as_reader();
    // A run deleted without the finalizer's pass (the finalizer removed by hand, a run that
    // never got it) is forgotten by the metrics here: on its delete event, or, for one
    // deleted while the watch was down, when the relist is complete.
    let forget = {
        let (metrics, store, ar) = (metrics.clone(), run_store.clone(), ar.clone());
        move |event: &watcher::Event<DynamicObject>| match event {
            watcher::Event::Delete(run) => {
                metrics.forget(&run.namespace().unwrap_or_default(), &run.name_any())
            }
            watcher::Event::InitDone => metrics.forget_gone(|ns, name| {
                store
                    .get(&ObjectRef::new_with(name, ar.clone()).within(ns))
                    .is_some()
            }),
            _ => {}
        }
    };
    let run_changes = watcher(runs, watcher::Config::default())
        .default_backoff()
        .reflect(run_writer)
        .inspect(move |e| {
            if let Ok(e) = e {
                forget(e)
            }
        })
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            Default::default(),
        );
    // Pods: one store of every managed pod, which the passes read (no LIST per pass).
    let pod_writer = Writer::<Pod>::default();
    let pod_store = pod_writer.as_reader();
    let pod_changes = watcher(
        pods,
        watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGER}")),
    )
    .default_backoff()
    .reflect(pod_writer)
    .touched_objects();
    let http = crate::client::WorkerClient::http(config.worker_timeout).map_err(Error::Invalid)?;
    // The schedule controller runs beside, in the same process and leadership, and stops
    // with it.
    let shutdown = shutdown.shared();
    let schedules = crate::schedule::controller::run(
        client.clone(),
        config.namespace.clone(),
        metrics.clone(),
        shutdown.clone(),
    );
    let ctx = Arc::new(Context::new(client, config, metrics, pod_store, http));
    let runs = Controller::for_stream_with(run_changes, run_store, ar)
        .owns_stream(pod_changes)
        .graceful_shutdown_on(shutdown)
        .run(reconcile_object, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!("reconcile: {e}");
            }
        });
    let (scheduled, ()) = tokio::join!(schedules, runs);
    scheduled
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

/// The run as the API server has it when the cached copy may predate the operator's last
/// status write of it (see [`Context::is_stale`]); `None` when it is gone.
async fn fresh(obj: Arc<DynamicObject>, ctx: &Context) -> Result<Option<Arc<DynamicObject>>> {
    let key = key(&obj);
    if !ctx.is_stale(&key, obj.metadata.resource_version.as_deref()) {
        return Ok(Some(obj));
    }
    let ar = decode::api_resource();
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &obj.namespace().unwrap_or_default(),
        &ar,
    );
    match api.get_opt(&obj.name_any()).await? {
        Some(now) => Ok(Some(Arc::new(now))),
        None => {
            ctx.forget(&key);
            ctx.metrics
                .forget(&obj.namespace().unwrap_or_default(), &obj.name_any());
            Ok(None)
        }
    }
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
    let obj = crate::failpoint::stale(obj);
    let Some(obj) = fresh(obj, &ctx).await? else {
        return Ok(Action::await_change());
    };
    // Before the first pass reads pods, the pod store must hold them all: an empty store
    // would read as every worker's pod deleted. Asked, not awaited: the store's readiness
    // wakes only its last waiter, and passes of several runs would wait together (all but
    // one forever).
    match ctx.pods.wait_until_ready().now_or_never() {
        Some(Ok(())) => {}
        Some(Err(_)) => return Err(crate::Error::Invalid("the pod watch stopped".into())),
        None => return Ok(Action::requeue(STORE_NOT_READY)),
    }
    match decode::decode(&obj) {
        Ok(run) => reconcile::reconcile(Arc::new(run), ctx).await,
        Err(message) => {
            ctx.metrics.error("decode");
            decode::report(&obj, &message, &ctx.client, &ctx.recorder).await?;
            Ok(Action::await_change())
        }
    }
}
