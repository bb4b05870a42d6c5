//! A run being deleted: its workers are stopped (they remove the datasets they created, as the
//! workload's `dataset.cleanup` says), its metrics are dropped, then its finalizer goes, so
//! Kubernetes deletes it and, by their owner references, its pods and other objects.
//!
//! Without the finalizer, `kubectl delete` of a running run would leave its workers 10 s to
//! die and everything they had written on object storage behind, and the run's series would
//! stay in `/metrics` (alerts firing for a run that is gone). The wait is bounded
//! ([`CLEANUP_BOUND`]): a worker that does not stop in time is reported and given up on,
//! never holding the deletion forever.

use chrono::Utc;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use super::{cleanup_rules, Reconciler};
use crate::context::POLL;
use crate::crd::BenchmarkRun;
use crate::worker_cleanup;
use crate::Result;

/// The operator's finalizer on every run.
pub const FINALIZER: &str = "benchrun.dev/cleanup";

/// Longest wait for a deleted run's workers to stop and clean up: the bound of every path
/// (see [`crate::worker_cleanup`]).
pub use crate::worker_cleanup::CLEANUP_BOUND;

/// Whether `run` carries the operator's finalizer.
pub fn has_finalizer(run: &BenchmarkRun) -> bool {
    run.finalizers().iter().any(|f| f == FINALIZER)
}

/// Add the finalizer (see [`add_finalizer_patch`]): the run's new resource version.
pub(crate) async fn add_finalizer(
    api: &Api<BenchmarkRun>,
    run: &BenchmarkRun,
) -> Result<Option<String>> {
    patch_finalizers(api, run, add_finalizer_patch(run)).await
}

/// The JSON patch that adds the finalizer: it tests the list it extends, or, when the run had
/// none, the resource version it read (an `add` of the whole list would replace one another
/// controller added meanwhile). A concurrent change fails the patch (422), and the pass is
/// retried on the new version.
pub(crate) fn add_finalizer_patch(run: &BenchmarkRun) -> serde_json::Value {
    match (&run.metadata.finalizers, &run.metadata.resource_version) {
        (Some(f), _) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": f},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ]),
        (None, Some(rv)) => json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
        // Never from the API server (every object it serves has a version).
        (None, None) => json!([
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
    }
}

/// Remove the finalizer (see [`remove_finalizer_patch`]).
async fn remove_finalizer(api: &Api<BenchmarkRun>, run: &BenchmarkRun) -> Result<()> {
    patch_finalizers(api, run, remove_finalizer_patch(run))
        .await
        .map(|_| ())
}

/// The JSON patch that removes the finalizer: it tests the list it read, so a finalizer
/// another controller added or removed meanwhile is not undone (the patch fails, 422, and the
/// pass is retried on the new version).
pub(crate) fn remove_finalizer_patch(run: &BenchmarkRun) -> serde_json::Value {
    let f = run.finalizers();
    let rest: Vec<&String> = f.iter().filter(|x| *x != FINALIZER).collect();
    json!([
        {"op": "test", "path": "/metadata/finalizers", "value": f},
        {"op": "replace", "path": "/metadata/finalizers", "value": rest},
    ])
}

/// Apply a finalizer patch: the run's new resource version (`None` when it is gone).
async fn patch_finalizers(
    api: &Api<BenchmarkRun>,
    run: &BenchmarkRun,
    patch: serde_json::Value,
) -> Result<Option<String>> {
    let patch: json_patch::Patch = serde_json::from_value(patch)?;
    match api
        .patch(
            &run.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(patched) => Ok(patched.metadata.resource_version),
        // Gone already: nothing to hold.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl Reconciler<'_> {
    /// One pass over a run being deleted: ask its workers to stop until those still at work
    /// (measuring, or removing what they created as their workload says) are done, or
    /// [`CLEANUP_BOUND`] has passed since the run finished or was deleted, whichever was
    /// first (the one rule of every path, [`worker_cleanup::step`]); then drop its metrics
    /// and its finalizer.
    pub(crate) async fn finalize(&mut self) -> Result<Action> {
        if !has_finalizer(self.run) {
            return Ok(Action::await_change());
        }
        if self.run.spec.control_plane.is_some() {
            self.control_plane_stop().await;
        }
        let deleted = self
            .run
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(crate::run_rules::from_time)
            .unwrap_or(self.draft.now);
        // A run that finished first had its bound start then.
        let finished = self
            .draft
            .status
            .phase
            .is_finished()
            .then_some(self.draft.status.finish_time.as_deref())
            .flatten()
            .and_then(crate::run_rules::parse_time);
        let since = worker_cleanup::bound_start(finished, Some(deleted), self.draft.now);
        let busy = self.stop_and_find_busy().await?;
        let step = worker_cleanup::step(since, self.draft.now, POLL, busy);
        let w = &self.run.spec.workload;
        if let Some(retry) = cleanup_rules::deletion_wait(&mut self.draft, w, deleted, step) {
            return Ok(Action::requeue(retry));
        }
        self.ctx.metrics.forget(&self.ns, &self.name);
        self.ctx.forget(&format!("{}/{}", self.ns, self.name));
        remove_finalizer(&self.api(), self.run).await?;
        info!(
            "{}/{}: deleted after {:.1}s",
            self.ns,
            self.name,
            (Utc::now() - deleted).num_milliseconds() as f64 / 1000.0
        );
        Ok(Action::await_change())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(finalizers: Option<Vec<&str>>, rv: Option<&str>) -> BenchmarkRun {
        let mut r: BenchmarkRun = serde_json::from_value(json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "bench", "namespace": "ns"},
            "spec": {"workload": {"target": "file:///data", "duration": "5s", "ops": [{"op": "get"}]}}
        }))
        .expect("run");
        r.metadata.finalizers = finalizers.map(|f| f.into_iter().map(String::from).collect());
        r.metadata.resource_version = rv.map(String::from);
        r
    }

    #[test]
    fn adding_the_finalizer_never_overwrites_anothers() {
        // A list read: tested, then extended.
        assert_eq!(
            add_finalizer_patch(&run(Some(vec!["other.io/x"]), Some("7"))),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/x"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
            ])
        );
        // No list read: the version read is tested, so a list added since fails the patch.
        assert_eq!(
            add_finalizer_patch(&run(None, Some("7"))),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
            ])
        );
    }

    #[test]
    fn removing_the_finalizer_keeps_anothers_and_tests_the_list_read() {
        assert_eq!(
            remove_finalizer_patch(&run(Some(vec!["other.io/x", FINALIZER]), Some("7"))),
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/x", FINALIZER]},
                {"op": "replace", "path": "/metadata/finalizers", "value": ["other.io/x"]},
            ])
        );
    }
}
