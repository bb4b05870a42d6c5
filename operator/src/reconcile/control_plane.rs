//! A control-plane run's pass (`spec.controlPlane`): start its task once the run is recorded
//! `Running`, read its outcome into the status, fail a run whose task this process does not
//! have (the operator restarted mid-run), and stop it (task aborted, objects swept) when the
//! run finishes early or is deleted.

use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::decide::Admission;
use super::Reconciler;
use crate::context::POLL;
use crate::control_plane::{self, figures, Task};
use crate::crd::control_plane::ControlPlaneSpec;
use crate::crd::Phase;
use crate::run_rules::cond;
use crate::Result;

/// Reason of a control-plane run the operator lost track of.
pub const OPERATOR_RESTARTED: &str = "OperatorRestarted";

impl Reconciler<'_> {
    /// One pass over a control-plane run that has not finished.
    pub(crate) async fn control_plane(
        &mut self,
        cp: &ControlPlaneSpec,
        admission: Admission,
    ) -> Result<Action> {
        let uid = self.run.uid().unwrap_or_default();
        if admission != Admission::Go {
            // Refused or past its deadline: `reconcile` cleans up the run it just failed.
            return Ok(Action::requeue(POLL));
        }
        if self.draft.status.phase == Phase::Pending {
            // Recorded before the task starts: a restart from here on finds a Running run with
            // no task and fails it, instead of starting a second set of lifecycles beside
            // objects the first may have created.
            self.draft.set_phase(
                Phase::Running,
                "Started",
                match cp.rate_per_second {
                    None => format!(
                        "{} claims, {} at a time: {}",
                        cp.count,
                        cp.concurrency(),
                        cp.operations.join(", ")
                    ),
                    Some(r) => format!(
                        "{} claims at {r}/s, at most {} in flight: {}",
                        cp.count,
                        cp.concurrency(),
                        cp.operations.join(", ")
                    ),
                },
            );
            self.draft.status.start_time = Some(self.draft.now.to_rfc3339());
            if !self.persist().await? {
                return Ok(Action::requeue(POLL));
            }
            let image = self.ctx.config.worker_image.clone();
            let task = control_plane::execute(
                self.ctx.client.clone(),
                self.run.clone(),
                image,
                self.ctx.metrics.clone(),
            );
            self.ctx.control_plane.start(&uid, task);
            return Ok(Action::requeue(POLL));
        }
        match self.ctx.control_plane.task(&uid).await {
            Task::Running => Ok(Action::requeue(POLL)),
            Task::Missing => {
                self.draft.fail(
                    OPERATOR_RESTARTED,
                    "the operator restarted while the control-plane run was in flight: its \
                     measurements were lost with the process; the claims and pods it created \
                     are deleted. Create the run again."
                        .into(),
                );
                Ok(Action::requeue(POLL))
            }
            Task::Done(outcome) => {
                self.draft.status.control_plane = Some(outcome.status.clone());
                let checks = figures::evaluate(cp, &outcome.status);
                let missed: Vec<String> = checks
                    .iter()
                    .filter(|c| !c.met)
                    .map(|c| c.describe())
                    .collect();
                if !checks.is_empty() {
                    let n = checks.len();
                    self.draft.status.thresholds = checks;
                    if missed.is_empty() {
                        let msg = format!("all {n} limits met");
                        self.draft
                            .condition(cond::THRESHOLDS_MET, true, "ThresholdsMet", msg);
                    } else {
                        self.draft.condition(
                            cond::THRESHOLDS_MET,
                            false,
                            "ThresholdsNotMet",
                            missed.join("; "),
                        );
                    }
                }
                let st = &outcome.status;
                if let Some(e) = &st.first_error {
                    let msg = format!(
                        "{} of {} lifecycles failed; first: {e}",
                        st.failed, st.requested
                    );
                    self.draft.fail("ControlPlaneErrors", msg);
                } else if let Some(f) = &outcome.failure {
                    self.draft.fail("ControlPlaneFailed", f.clone());
                } else if !missed.is_empty() {
                    self.draft.fail("ThresholdsNotMet", missed.join("; "));
                } else {
                    let msg = format!(
                        "{} claims through {}",
                        st.completed,
                        cp.operations.join(", ")
                    );
                    self.draft.succeed(msg.clone(), msg);
                }
                self.draft.status.finish_time = Some(self.draft.now.to_rfc3339());
                // Recorded before the outcome is forgotten: a pass whose write is superseded
                // reads it again.
                if self.persist().await? {
                    self.ctx.control_plane.forget(&uid);
                }
                Ok(Action::requeue(POLL))
            }
        }
    }

    /// Stop a control-plane run's task (if this process runs one) and delete what the run
    /// created. Bounded by the run's per-operation timeout; what is left then goes with the
    /// run, by its owner references.
    pub(crate) async fn control_plane_stop(&mut self) {
        let uid = self.run.uid().unwrap_or_default();
        self.ctx.control_plane.forget(&uid);
        let bound = self
            .run
            .spec
            .control_plane
            .as_ref()
            .map(|c| c.timeout())
            .unwrap_or_default()
            .min(std::time::Duration::from_secs(30));
        if let Err(e) = control_plane::sweep(&self.ctx.client, self.run, bound).await {
            tracing::warn!("{}/{}: {e}", self.ns, self.name);
        }
    }
}
