//! A finished run: worker pods (and per-worker claims) deleted per `spec.cleanup`, once their
//! workers removed what they created or the cleanup bound passed (see
//! [`crate::worker_cleanup`]), then the run itself deleted `ttlSecondsAfterFinished` after it
//! finished.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use tracing::warn;

use super::Reconciler;
use crate::children::{delete_exact, delete_if_ours, Deleted};
use crate::context::POLL;
use crate::crd::{BenchmarkRun, CleanupPolicy, Phase};
use crate::resources;
use crate::run_rules::{self, cond};
use crate::worker_cleanup::{self, CleanupStep};
use crate::{Error, Result};

/// Objects named at most in a message (the rest are counted).
const NAMED_AT_MOST: usize = 5;

/// The `CleanedUp` reason while the pods wait for their workers' cleanup.
const WAITING: &str = "WaitingForWorkers";

impl Reconciler<'_> {
    /// A matrix run's children in flight stopped; cleanup per policy; then TTL.
    pub(crate) async fn finished(&mut self) -> Result<Action> {
        // A matrix run has no workers of its own: its combination in flight is its child run.
        if self.run.spec.matrix.is_some() {
            self.stop_children().await?;
        }
        let succeeded = self.draft.status.phase == Phase::Succeeded;
        let clean = match self.run.spec.cleanup {
            CleanupPolicy::Always => true,
            CleanupPolicy::OnSuccess => succeeded,
            CleanupPolicy::Never => false,
        };
        if !clean && run_rules::condition(&self.draft.status.conditions, cond::CLEANED_UP).is_none()
        {
            // Said in the same status write as the final phase, so that whoever sees the run
            // finished also sees why its pods are still there.
            self.draft.condition(
                cond::CLEANED_UP,
                false,
                "PodsKept",
                format!(
                    "worker pods kept ({:?} policy, run {})",
                    self.run.spec.cleanup,
                    self.draft.status.phase.as_str()
                ),
            );
        }
        // Settled once the pods are deleted (or kept); not while they wait for their workers.
        let settled = run_rules::condition(&self.draft.status.conditions, cond::CLEANED_UP)
            .is_some_and(|c| c.reason != WAITING);
        if clean && !settled {
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
            match worker_cleanup::step(since, self.draft.now, POLL, busy) {
                CleanupStep::Wait { busy, retry } => {
                    let msg = format!(
                        "waiting for workers {} to remove what they created before deleting their pods (at most {}s after the run finished)",
                        run_rules::bounded_list(&busy, NAMED_AT_MOST),
                        worker_cleanup::CLEANUP_BOUND.as_secs()
                    );
                    self.draft.condition(cond::CLEANED_UP, false, WAITING, msg);
                    return Ok(Action::requeue(retry));
                }
                CleanupStep::Delete { abandoned } if !abandoned.is_empty() => {
                    let msg = worker_cleanup::abandoned_message(
                        &self.run.spec.workload,
                        &abandoned,
                        "the run finished",
                    );
                    let d = &mut self.draft;
                    d.condition(
                        cond::CLEANUP_ABANDONED,
                        true,
                        "CleanupAbandoned",
                        msg.clone(),
                    );
                    d.event(EventType::Warning, "CleanupAbandoned", msg);
                }
                CleanupStep::Delete { .. } => {}
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
            let not_ours = if kept.is_empty() {
                String::new()
            } else {
                format!(
                    "; kept {}, not this run's",
                    run_rules::bounded_list(&kept, NAMED_AT_MOST)
                )
            };
            self.draft.condition(
                cond::CLEANED_UP,
                true,
                "PodsDeleted",
                format!(
                    "worker pods deleted ({:?} policy){not_ours}",
                    self.run.spec.cleanup
                ),
            );
            self.draft.event(
                EventType::Normal,
                "CleanedUp",
                format!("deleted {deleted} worker pods{not_ours}"),
            );
        }
        if let Some(ttl) = self.run.spec.ttl_seconds_after_finished {
            let finished = self
                .draft
                .status
                .finish_time
                .as_deref()
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(self.draft.now);
            // Bounded by the schema and validation; checked anyway (a panic would crash-loop).
            let Some(due) =
                chrono::Duration::try_seconds(ttl).and_then(|d| finished.checked_add_signed(d))
            else {
                warn!(
                    "{}/{}: ttlSecondsAfterFinished {ttl} is out of range; keeping the run",
                    self.ns, self.name
                );
                return Ok(Action::await_change());
            };
            if self.draft.now >= due {
                let api: Api<BenchmarkRun> = self.api();
                // This run, not one applied again under its name since this pass read it.
                let uid = self
                    .run
                    .uid()
                    .ok_or_else(|| Error::Invalid("the run has no uid".into()))?;
                delete_exact(&api, &self.name, &uid, DeleteParams::background()).await?;
                // Its metrics go in the pass of its deletion (the finalizer's).
                return Ok(Action::await_change());
            }
            return Ok(Action::requeue(
                (due - self.draft.now).to_std().unwrap_or(POLL),
            ));
        }
        Ok(Action::await_change())
    }
}
