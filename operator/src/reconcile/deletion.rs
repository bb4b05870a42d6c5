//! A run being deleted: its workers are stopped (they remove the datasets they created, as the
//! workload's `dataset.cleanup` says), its metrics are dropped, then its finalizer goes, so
//! Kubernetes deletes it and, by their owner references, its pods and other objects.
//!
//! Without the finalizer, `kubectl delete` of a running run would leave its workers 10 s to
//! die and everything they had written on object storage behind, and the run's series would
//! stay in `/metrics` (alerts firing for a run that is gone). The wait is bounded
//! ([`CLEANUP_BOUND`]): a worker that does not stop in time is reported and given up on,
//! never holding the deletion forever.

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::json;
use tracing::info;

use super::Reconciler;
use crate::client::fan_out;
use crate::context::POLL;
use crate::crd::BenchmarkRun;
use crate::Result;

/// The operator's finalizer on every run.
pub const FINALIZER: &str = "benchrun.dev/cleanup";

/// Longest wait for a deleted run's workers to stop and clean up.
pub const CLEANUP_BOUND: Duration = Duration::from_secs(120);

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

/// Remove the finalizer (tested like [`add_finalizer`]).
async fn remove_finalizer(api: &Api<BenchmarkRun>, run: &BenchmarkRun) -> Result<()> {
    let f = run.finalizers();
    let rest: Vec<&String> = f.iter().filter(|x| *x != FINALIZER).collect();
    let patch = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": f},
        {"op": "replace", "path": "/metadata/finalizers", "value": rest},
    ]);
    patch_finalizers(api, run, patch).await.map(|_| ())
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

/// Whether a worker's pod is still running (its agent may still be measuring or cleaning up).
fn running(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    p.metadata.deletion_timestamp.is_none() && matches!(phase, Some("Pending" | "Running"))
}

impl Reconciler<'_> {
    /// Ask the workers of these pods to stop; the pods of those still at work (measuring or
    /// removing their data). A worker whose agent no longer answers has exited.
    async fn stop_for_deletion<'p>(
        &self,
        pods: impl Iterator<Item = &'p Pod>,
    ) -> Result<Vec<String>> {
        use benchrun_api::agent::AgentStage as S;
        let clients = self.agents(pods, &self.token()?);
        let busy = fan_out(clients, self.parallelism(), |(pod, c)| async move {
            let _ = c.shutdown().await;
            match c.status().await {
                Ok(st) if !matches!(st.stage, S::Done | S::Failed) => Some(pod),
                _ => None,
            }
        })
        .await;
        Ok(busy.into_iter().flatten().collect())
    }

    /// One pass over a run being deleted: ask its running workers to stop until they have
    /// (each removes its dataset, as its workload says, then exits) or [`CLEANUP_BOUND`] has
    /// passed; then drop its metrics and its finalizer.
    pub(crate) async fn finalize(&mut self) -> Result<Action> {
        if !has_finalizer(self.run) {
            return Ok(Action::await_change());
        }
        let since = self
            .run
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(crate::state::from_time)
            .unwrap_or(self.draft.now);
        let waited = (self.draft.now - since).to_std().unwrap_or_default();
        // A finished run's workers were stopped when it finished.
        let pods = if self.draft.status.phase.is_finished() {
            Default::default()
        } else {
            self.pods()
        };
        let left = self
            .stop_for_deletion(pods.values().filter(|p| running(p)))
            .await?;
        if !left.is_empty() {
            if waited < CLEANUP_BOUND {
                // Said on the first pass after the deletion (a pass a poll later is past it).
                if waited < POLL {
                    self.draft.event(
                        EventType::Normal,
                        "Stopping",
                        format!(
                            "the run is being deleted: stopping {} workers, which remove what they created",
                            left.len()
                        ),
                    );
                }
                return Ok(Action::requeue(POLL));
            }
            self.draft.event(
                EventType::Warning,
                "CleanupAbandoned",
                format!(
                    "workers {} did not stop within {}s of the deletion; what they created under {} may be left",
                    left.join(", "),
                    CLEANUP_BOUND.as_secs(),
                    self.run.spec.workload.target
                ),
            );
        }
        self.ctx
            .metrics
            .forget(&self.ns, &self.name, &self.draft.status);
        self.ctx.forget(&format!("{}/{}", self.ns, self.name));
        remove_finalizer(&self.api(), self.run).await?;
        info!(
            "{}/{}: deleted after {:.1}s",
            self.ns,
            self.name,
            (Utc::now() - since).num_milliseconds() as f64 / 1000.0
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
}
