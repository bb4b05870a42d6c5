//! A finished run: worker pods (and per-worker claims) deleted per `spec.cleanup`, once their
//! workers removed what they created or the cleanup bound passed (see
//! [`crate::worker_cleanup`]), then the run itself deleted `ttlSecondsAfterFinished` after it
//! finished.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::DeleteParams;
use kube::runtime::controller::Action;

use kube::Api;
use tracing::warn;

use super::cleanup_rules::{self as decide, TtlStep};
use super::Reconciler;
use crate::children::{delete_if_ours, delete_itself, Deleted};
use crate::context::POLL;
use crate::crd::BenchmarkRun;
use crate::resources;
use crate::run_rules;
use crate::worker_cleanup;
use crate::Result;

impl Reconciler<'_> {
    /// A matrix run's children in flight stopped; cleanup per policy; then TTL.
    pub(crate) async fn finished(&mut self) -> Result<Action> {
        if self.run.spec.control_plane.is_some() {
            self.control_plane_stop().await;
        }
        // A matrix run has no workers of its own: its combination in flight is its child run.
        if self.run.spec.matrix.is_some() {
            self.stop_children(crate::sweep::MATRIX_LABEL).await?;
        } else if crate::search::plan(&self.run.spec).is_some() {
            self.stop_children(crate::search::SEARCH_LABEL).await?;
        }
        let clean = decide::cleanup_due(&mut self.draft, self.run.spec.cleanup);
        if clean {
            // The workers of a run that failed were told to stop in the pass that failed it:
            // those still removing what they created keep their pods, up to the bound of
            // every path (deleted now, a pod's 10 s grace would cut their cleanup short).
            let finished = self.draft.status.finish_time.as_deref();
            let since = worker_cleanup::bound_start(
                finished.and_then(run_rules::parse_time),
                None,
                self.draft.now,
            );
            let busy = self.stop_and_find_busy().await?;
            let step = worker_cleanup::step(since, self.draft.now, POLL, busy);
            if let Some(retry) =
                decide::cleanup_wait(&mut self.draft, &self.run.spec.workload, step)
            {
                return Ok(Action::requeue(retry));
            }
            // By the names in the status, not from the pod store: a pod created in the pass
            // that failed the run may not be in the store yet. Only what is this run's is
            // deleted: a run failed `NameTaken` has names in its status that are another's.
            let api = self.api::<Pod>();
            let (mut deleted, mut kept) = (0, vec![]);
            for p in self.draft.status.workers.iter().map(|w| &w.pod) {
                match delete_if_ours(&api, p, self.run, DeleteParams::default()).await? {
                    Deleted::Yes => deleted += 1,
                    Deleted::Absent => {}
                    Deleted::NotOurs => kept.push(format!("pod {p}")),
                }
            }
            if self
                .run
                .spec
                .volume
                .as_ref()
                .is_some_and(|v| v.claim_template.is_some())
            {
                let pvcs = self.api::<PersistentVolumeClaim>();
                for w in &self.draft.status.workers {
                    let claim = resources::claim_name(&self.name, &w.name);
                    if delete_if_ours(&pvcs, &claim, self.run, DeleteParams::default()).await?
                        == Deleted::NotOurs
                    {
                        kept.push(format!("claim {claim}"));
                    }
                }
            }
            decide::cleaned_up(&mut self.draft, self.run.spec.cleanup, deleted, &kept);
        }
        match decide::ttl_step(&self.draft, self.run.spec.ttl_seconds_after_finished) {
            TtlStep::Keep => {}
            TtlStep::OutOfRange(ttl) => warn!(
                "{}/{}: ttlSecondsAfterFinished {ttl} is out of range; keeping the run",
                self.ns, self.name
            ),
            TtlStep::Wait(left) => return Ok(Action::requeue(left)),
            TtlStep::Delete => {
                let api: Api<BenchmarkRun> = self.api();
                // This run, not one applied again under its name since this pass read it.
                delete_itself(&api, self.run, DeleteParams::background()).await?;
                // Its metrics go in the pass of its deletion (the finalizer's).
            }
        }
        Ok(Action::await_change())
    }
}
