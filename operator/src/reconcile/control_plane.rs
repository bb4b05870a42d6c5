//! A control-plane run's pass (`spec.controlPlane`): start its task once the run is recorded
//! `Running`, read its outcome into the status, fail a run whose task this process does not
//! have (the operator restarted mid-run), and stop it (task aborted, objects swept) when the
//! run finishes early or is deleted.
//!
//! A run with a workload too (data-plane load during the control operations) follows the
//! workers' pass; its control-plane task starts with the workers, at their start instant
//! ([`Reconciler::control_plane_beside_start`]), and the run completes only once the task
//! ended, its outcome part of the verdict ([`Reconciler::control_plane_beside`]).

use chrono::{DateTime, Utc};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;

use super::decide::{Admission, Beside};
use super::Reconciler;
use crate::context::POLL;
use crate::control_plane::{self, figures, Outcome, Task};
use crate::crd::control_plane::{ControlPlaneSpec, ControlPlaneStatus};
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
                None,
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
                if let Some((reason, why)) = failure_of(st, outcome.failure.as_deref()) {
                    self.draft.fail(reason, why);
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

    /// Start the control-plane task of a run with workers: its watches list now, its first
    /// lifecycle starts at the workers' start instant `at` (just recorded).
    pub(crate) fn control_plane_beside_start(&self, at: DateTime<Utc>) {
        let delay = (at - Utc::now()).to_std().unwrap_or_default();
        let task = control_plane::execute(
            self.ctx.client.clone(),
            self.run.clone(),
            self.ctx.config.worker_image.clone(),
            self.ctx.metrics.clone(),
            Some(tokio::time::Instant::now() + delay),
        );
        self.ctx
            .control_plane
            .start(&self.run.uid().unwrap_or_default(), task);
    }

    /// The control-plane task of a run with workers, once they were told their start: its
    /// figures go into the status as soon as it ended (before the workers may have); a
    /// process that does not have the task (the operator restarted since the start) and no
    /// figures recorded fails the run, as a control-plane run does.
    pub(crate) async fn control_plane_beside(&mut self, cp: &ControlPlaneSpec) -> BesideState {
        if self.draft.status.start_time.is_none() {
            return BesideState::Pending;
        }
        let uid = self.run.uid().unwrap_or_default();
        let (status, failure) = match self.ctx.control_plane.task(&uid).await {
            Task::Running => return BesideState::Pending,
            Task::Done(Outcome { status, failure }) => (status, failure),
            // Ended before the restart, its figures recorded: they are the result.
            Task::Missing => match self.draft.status.control_plane.clone() {
                Some(status) => (status, None),
                None => {
                    self.draft.fail(
                        OPERATOR_RESTARTED,
                        "the operator restarted while the run's control-plane operations were \
                         in flight: their measurements were lost with the process; the claims \
                         and pods they created are deleted. Create the run again."
                            .into(),
                    );
                    return BesideState::Lost;
                }
            },
        };
        // Said once: in the pass that first records the figures.
        let first = self.draft.status.control_plane.is_none();
        let mut status = status;
        if status.after_load_ms.is_none() {
            status.after_load_ms = self.after_load_ms(&status);
        }
        if first {
            if let Some(ms) = status.after_load_ms.filter(|ms| *ms > 0.0) {
                self.draft.event(
                    EventType::Warning,
                    "ControlPlaneOutlastedLoad",
                    format!(
                        "the last {:.1} s of the control operations ran after the data-plane load had ended: give workload.duration at least {:.0} s more",
                        ms / 1000.0,
                        (ms / 1000.0).ceil()
                    ),
                );
            }
        }
        self.draft.status.control_plane = Some(status.clone());
        BesideState::Ended(Beside {
            checks: figures::evaluate(cp, &status),
            failure: failure_of(&status, failure.as_deref()),
        })
    }

    /// How much of the control operations' span came after the workers' load ended (their
    /// start, plus `warmup`, plus `duration`), ms, 0 when none did; `None` when a start time
    /// or the duration is missing.
    fn after_load_ms(&self, st: &ControlPlaneStatus) -> Option<f64> {
        let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
        let load_start = parse(self.draft.status.start_time.as_deref()?)?;
        let w = &self.run.spec.workload;
        let load = w.duration?.0 + w.warmup.map(|d| d.0).unwrap_or_default();
        let duration = chrono::Duration::from_std(load).ok()?;
        let cp_start = parse(st.start_time.as_deref()?)?;
        let cp_end = cp_start + chrono::Duration::microseconds((st.elapsed_ms * 1000.0) as i64);
        let after = cp_end - (load_start + duration);
        Some((after.num_microseconds()? as f64 / 1000.0).max(0.0))
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

/// Where a control-plane section beside the workers is.
pub(crate) enum BesideState {
    /// Not started, or its lifecycles still in flight.
    Pending,
    /// Its task was lost: the run failed in this pass.
    Lost,
    /// Ended: what it adds to the verdict.
    Ended(Beside),
}

/// Why a control-plane outcome fails its run (reason, message), thresholds aside: a
/// lifecycle's error, or the run's own failure (`failure`: the watches did not list, the sweep
/// left objects behind).
fn failure_of(st: &ControlPlaneStatus, failure: Option<&str>) -> Option<(&'static str, String)> {
    if let Some(e) = &st.first_error {
        let msg = format!(
            "{} of {} lifecycles failed; first: {e}",
            st.failed, st.requested
        );
        return Some(("ControlPlaneErrors", msg));
    }
    failure.map(|f| ("ControlPlaneFailed", f.to_string()))
}
