//! A finished run: worker pods (and per-worker claims) deleted per `spec.cleanup`, then the run
//! itself deleted `ttlSecondsAfterFinished` after it finished.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::Api;
use tracing::warn;

use super::Reconciler;
use crate::context::POLL;
use crate::crd::{BenchmarkRun, CleanupPolicy, Phase};
use crate::resources;
use crate::state::{self, cond};
use crate::Result;

impl Reconciler<'_> {
    /// Cleanup per policy, then TTL.
    pub(crate) async fn finished(&mut self) -> Result<Action> {
        let succeeded = self.draft.status.phase == Phase::Succeeded;
        let clean = match self.run.spec.cleanup {
            CleanupPolicy::Always => true,
            CleanupPolicy::OnSuccess => succeeded,
            CleanupPolicy::Never => false,
        };
        if !clean && state::condition(&self.draft.status.conditions, cond::CLEANED_UP).is_none() {
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
        if clean && state::condition(&self.draft.status.conditions, cond::CLEANED_UP).is_none() {
            // By the names in the status, not from the pod store: a pod created in the pass
            // that failed the run may not be in the store yet.
            let api = self.api::<Pod>();
            let mut deleted = 0;
            for p in self.draft.status.workers.iter().map(|w| &w.pod) {
                match api.delete(p, &DeleteParams::default()).await {
                    Ok(_) => deleted += 1,
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
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
                    match pvcs
                        .delete(
                            &resources::claim_name(&self.name, &w.name),
                            &DeleteParams::default(),
                        )
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            self.draft.condition(
                cond::CLEANED_UP,
                true,
                "PodsDeleted",
                format!("worker pods deleted ({:?} policy)", self.run.spec.cleanup),
            );
            self.draft.event(
                EventType::Normal,
                "CleanedUp",
                format!("deleted {deleted} worker pods"),
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
                match api.delete(&self.name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
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
