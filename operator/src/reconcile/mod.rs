//! One level-triggered reconcile pass over one `BenchmarkRun`.
//!
//! The pass reads as observe, decide, act, in stages, each stage's decisions pure
//! ([`decide`], on a [`Draft`] of the status) and each stage's effects in [`act`]:
//!
//! 1. **admit**: the spec is valid, within policy and within its deadline;
//! 2. **place** the workers, once, and record the placement before any pod exists;
//! 3. **create** the run's objects (idempotent);
//! 4. **observe** the pods (from the controller's store) and the results persisted by earlier
//!    passes; **decide** what they mean for each worker and which agents to ask;
//! 5. **observe** those agents (all at once, bounded); **decide** from their answers;
//!    **act**: collect the finished workers' summaries (each persisted before it counts, then
//!    its worker may exit); **decide** from what was collected;
//! 6. **decide** the run's next step (fail, start, collect, complete) and **act** on it;
//! 7. write the status (once, when it changed) and publish the pass's events.
//!
//! Decisions that must survive a restart are written to the status *before* acting on them
//! (worker placement, the start time); summaries are written to result ConfigMaps before the
//! status counts them. So a restart at any moment repeats only idempotent steps.
//!
//! # RBAC the operator needs
//! - `benchmarkruns`: get, list, watch, create, delete, patch (create: a matrix run's
//!   combinations, list: a matrix run's children by label, delete: TTL and a failed matrix
//!   run's child in flight, patch: the finalizer); `benchmarkruns/status`: get, patch
//! - `benchmarkschedules`: get, list, watch; `benchmarkschedules/status`: patch (the schedule
//!   controller, [`crate::schedule`]; its runs are created and deleted under `benchmarkruns`)
//! - `pods`: get, list, watch, create, delete; `persistentvolumeclaims`: get, list, watch,
//!   create, delete, patch (get: an existing claim is checked to be the run's; list, watch: a
//!   control-plane run's claims, by label; patch: a control-plane run's `expand` of its own
//!   claims); `volumesnapshots`: list, watch, create, delete (snapshot.storage.k8s.io; a
//!   control-plane run's `snapshot` of its own claims)
//! - `persistentvolumes`: get, list, watch; `storageclasses`: get; `volumeattachments`: list,
//!   watch (storage.k8s.io; control-plane runs: a claim's volume seen created, attached,
//!   detached and deleted, whether its class binds on first consumer; chart value
//!   `rbac.controlPlane`)
//! - `configmaps`: get, list, create, patch (list: the per-worker result objects of a run, by
//!   label); `secrets`: **create only** (the per-run token; never
//!   get/list, so credentials referenced by runs stay unreadable to the operator)
//! - `nodes`: list (perNode placement; and, by name with a field selector, the nodes of
//!   workers whose agents do not answer, to tell a lost node); `events.k8s.io/events`:
//!   create, patch; core `events`: list (by field selector, the Events of an unschedulable
//!   worker pod: an autoscaler's `TriggeredScaleUp`, `NotTriggerScaleUp`, `Nominated`)
//! - `networkpolicies`: create (with `--worker-network-policy`: one per run, see `netpol.rs`)
//!
//! With `--leader-elect`, also get, create and update on Leases (coordination.k8s.io) in the
//! lease's namespace only: a Role, not part of the cluster-wide list above (see `leader.rs`).
//!
//! The operator reaches each worker at `<pod IP>:8080`; the workers' `/v1/*` endpoints accept
//! only the per-run token (HMAC-SHA256 of the run UID under the operator's key).

mod act;
mod baseline;
mod cleanup_rules;
mod control_plane;
pub(crate) mod decide;
pub mod deletion;
mod finish;
mod observe;
mod place;
mod search;
mod stable;
mod sweep;

use std::sync::Arc;

use chrono::Utc;
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use tracing::info;

use crate::client::WorkerClient;
use crate::context::{Context, POLL};
use crate::crd::{BenchmarkRun, BenchmarkRunStatus};
use crate::status::{publish_events, write_status, Draft, Written};
use crate::{resources, validate, Error, Result};
use control_plane::BesideState;
use decide::{Admission, Beside, RunStep};

/// One pass over one run: the run as read, the status it builds, and the operator's context.
/// Its effects are in [`act`] and in the modules of the run's other stages: [`place`],
/// [`finish`] (cleanup and TTL), [`deletion`] (the finalizer), [`sweep`] (a matrix run's
/// pass), [`baseline`] (the comparison with `spec.baselineRef`).
pub(crate) struct Reconciler<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) ns: String,
    pub(crate) name: String,
    pub(crate) run: &'a BenchmarkRun,
    pub(crate) draft: Draft,
    /// The status as last written in this pass, if it was: the final write is skipped when
    /// nothing changed since.
    written: Option<BenchmarkRunStatus>,
    /// The run's version this pass writes over: the one it read, then its own last write.
    /// Every status write is conditional on it ([`write_status`]).
    version: Option<String>,
    /// A write found the run changed since this pass read it: the pass's decisions are
    /// dropped (nothing more is written or said), and the next pass decides on the new run.
    superseded: bool,
}

/// One pass over one run.
pub async fn reconcile(run: Arc<BenchmarkRun>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile();
    let ns = run
        .namespace()
        .ok_or_else(|| Error::Invalid("BenchmarkRun without namespace".into()))?;
    let name = run.name_any();
    let old = run.status.clone().unwrap_or_default();
    let mut r = Reconciler {
        ctx: &ctx,
        ns: ns.clone(),
        name: name.clone(),
        run: &run,
        draft: Draft::new(old.clone(), run.metadata.generation, Utc::now()),
        written: None,
        version: run.metadata.resource_version.clone(),
        superseded: false,
    };
    if run.metadata.deletion_timestamp.is_some() {
        let action = r.finalize().await;
        publish_events(&ctx, &run, &r.draft.events).await;
        return action;
    }
    if !deletion::has_finalizer(&run) {
        // Before anything is created: a run deleted from here on is cleaned up.
        // The pass's status writes are conditional on the version this patch made.
        r.version = deletion::add_finalizer(&r.api(), &run).await?;
    }
    let mut action = r.pass().await;
    if r.superseded {
        return superseded(&ns, &name);
    }
    if let Err(e) = &action {
        if let Some(requeue) = decide::refusal(&mut r.draft, e) {
            action = Ok(requeue);
        }
    }
    // A run that finished in this pass is cleaned up in it, so the write that says it
    // finished also says what became of its pods (idempotent where the pass did it already;
    // no later pass is needed, as none comes from this pass's own write).
    if action.is_ok() && r.draft.status.phase.is_finished() && !old.phase.is_finished() {
        action = r.finished().await;
    }
    // The status is written even when the pass failed half-way: what was learnt stays learnt.
    // One write per pass, unless one was needed earlier (placement, start time); then only
    // when something changed since.
    if r.superseded {
        return superseded(&ns, &name);
    }
    if r.draft.status != *r.written.as_ref().unwrap_or(&old) && !r.persist().await? {
        return superseded(&ns, &name);
    }
    let status = &r.draft.status;
    ctx.metrics.observe(&ns, &name, status);
    if status.phase != old.phase {
        info!(
            "{ns}/{name}: {} -> {}",
            old.phase.as_str(),
            status.phase.as_str()
        );
    }
    publish_events(&ctx, &run, &r.draft.events).await;
    action
}

impl Reconciler<'_> {
    /// The pass over a run that is not being deleted.
    async fn pass(&mut self) -> Result<Action> {
        self.draft.status.observed_generation = self.run.metadata.generation;
        if self.draft.status.phase.is_finished() {
            return self.finished().await;
        }
        // 1. Admit.
        let problems = self.problems();
        let admission = decide::admit(&mut self.draft, self.run, problems);
        // A control-plane run creates claims and pods of its own, no workers (with a workload
        // too, the workers' pass below runs its control-plane task beside them).
        if let Some(cp) = self.run.spec.control_plane.clone() {
            if crate::crd::is_control_plane_only(&self.run.spec.workload) {
                return self.control_plane(&cp, admission).await;
            }
        }
        match admission {
            Admission::Go => {}
            Admission::Refused => return Ok(Action::requeue(POLL)),
            Admission::TimedOut => {
                self.stop_workers().await;
                return Ok(Action::requeue(POLL));
            }
        }
        // A matrix run places no workers itself: its combinations are child runs.
        if let Some(m) = self.run.spec.matrix.clone() {
            return self.sweep(&m).await;
        }
        // Nor does a maximum-accelerators search: its probes are child runs.
        if let Some(plan) = crate::search::plan(&self.run.spec) {
            return self.search(plan).await;
        }
        // 2. Place, once. Not left to the pass's one write at the end: the placement must be
        // recorded before the pods that follow it exist, or a restart in between would place
        // again (on nodes that may have changed) beside pods already created for the first.
        if self.draft.status.workers.is_empty() {
            let workers = self.place().await?;
            let result_cm = resources::result_cm_name(&self.name);
            let misfit = validate::placed(&self.run.spec, workers.len());
            if !decide::placed(&mut self.draft, workers, result_cm, misfit) {
                return Ok(Action::requeue(POLL));
            }
            if !self.persist().await? {
                return Ok(Action::requeue(SUPERSEDED_RETRY));
            }
        }
        // 3. Create.
        if decide::creating(&self.draft) {
            self.ensure_objects().await?;
            crate::failpoint::hit(crate::failpoint::AFTER_PODS_CREATED);
        }
        // 4. The pods and the persisted results.
        let pods = self.pods();
        let persisted = self.persisted().await?;
        let scale_ups = self.scale_ups(&pods).await;
        let ask = decide::from_pods(
            &mut self.draft,
            &pods,
            persisted,
            self.run.spec.workers.schedule_timeout(),
            &scale_ups,
        );
        // 5. The agents.
        let token = self.token()?;
        let answers = self.ask_agents(ask, &token).await;
        // `stopWhenStable` across the workers: once their merged throughput is steady, every
        // one stops at one instant, recorded before any is told (a restart resends it).
        let margin = stable::margin(self.draft.status.workers.len(), self.parallelism());
        if let Some(stop) = stable::decide(
            &mut self.draft,
            &self.run.spec,
            &answers,
            Utc::now(),
            margin,
        ) {
            if stop.new && !self.persist().await? {
                return Ok(Action::requeue(SUPERSEDED_RETRY));
            }
            self.send_stops(&stop, &pods, &token).await;
        }
        let (tally, collect) = decide::from_agents(&mut self.draft, answers);
        // The nodes of the silent workers: a worker on a lost node is lost, not waited for
        // until the deadline (its pod may never be evicted).
        let nodes = self.nodes(decide::nodes_to_read(&self.draft)).await;
        decide::from_nodes(&mut self.draft, &self.run.spec, &nodes);
        let outcomes = self.collect(collect, &token, &pods).await;
        // What was collected is applied; a summary that could not be persisted is asked for
        // again on the next pass; a worker given up on is told to exit.
        let applied = decide::collected(&mut self.draft, outcomes);
        self.shut_down(&applied.shut_down, &token, &pods).await;
        if let Some(e) = applied.error {
            self.draft.refresh_counts();
            return Err(e);
        }
        // 6. The run.
        let (parallelism, interval) = (self.parallelism(), self.ctx.config.progress_interval);
        let step = decide::run_step(
            &mut self.draft,
            &self.run.spec,
            parallelism,
            interval,
            tally,
        );
        // A control-plane section beside the workers: the run completes once both ended.
        let beside = match self.run.spec.control_plane.clone() {
            None => BesideState::Ended(Beside::default()),
            Some(_) if matches!(step, RunStep::Start(_) | RunStep::Stop) => BesideState::Pending,
            Some(cp) => self.control_plane_beside(&cp).await,
        };
        if let BesideState::Lost = beside {
            self.stop_workers().await;
            self.draft.refresh_counts();
            return Ok(Action::requeue(POLL));
        }
        match step {
            RunStep::Wait => {}
            RunStep::Stop => self.stop_workers().await,
            RunStep::Start(at) => {
                // Not left to the pass's one write at the end: the start time must be
                // recorded before any worker receives it, so a restart resends the same
                // instant instead of choosing another for the workers that did not get it.
                // Conditional on the version read: of two operator processes deciding on the
                // same run, one records its start time and tells the agents; the other's write
                // fails, and its next pass resends the recorded one.
                crate::failpoint::hit(crate::failpoint::START_DECIDED);
                if !self.persist().await? {
                    return Ok(Action::requeue(SUPERSEDED_RETRY));
                }
                crate::failpoint::hit(crate::failpoint::AFTER_START_WRITTEN);
                if self.run.spec.control_plane.is_some() {
                    self.control_plane_beside_start(at);
                }
                self.send_starts(&pods, at, &token).await;
            }
            // Anyone still waiting (an operator restarted between the two writes).
            RunStep::Resend(at) => self.send_starts(&pods, at, &token).await,
            // The workers are done; a control-plane section still in flight is waited for.
            RunStep::Complete => match beside {
                BesideState::Ended(b) => self.complete(b).await?,
                BesideState::Pending | BesideState::Lost => {}
            },
        }
        // A run that finished here is cleaned up by `reconcile`, in this pass.
        self.draft.refresh_counts();
        Ok(Action::requeue(POLL))
    }

    /// What is wrong with the spec: invalid (the schema cannot say everything) or outside the
    /// operator's policy. `Forbidden` only when the spec is otherwise valid.
    fn problems(&self) -> Option<(&'static str, Vec<String>)> {
        let mut errs = validate::run(&self.run.spec, &self.name);
        let mut reason = "InvalidWorkload";
        let policy = &self.ctx.config.policy;
        if let Err(more) = policy.check(&self.run.spec, &self.ctx.config.worker_image) {
            if errs.is_empty() {
                reason = "Forbidden";
            }
            errs.extend(more);
        }
        (!errs.is_empty()).then_some((reason, errs))
    }

    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    pub(crate) fn generation(&self) -> Option<i64> {
        self.run.metadata.generation
    }

    /// The workers' bearer token for this run.
    pub(crate) fn token(&self) -> Result<String> {
        let uid = self
            .run
            .uid()
            .ok_or_else(|| Error::Invalid("the run has no uid".into()))?;
        Ok(resources::worker_token(&self.ctx.config.key, &uid))
    }

    pub(crate) fn parallelism(&self) -> usize {
        self.ctx.config.worker_parallelism.max(1)
    }

    pub(crate) fn worker_client(&self, ip: &str, token: &str) -> WorkerClient {
        WorkerClient::new(
            self.ctx.http.clone(),
            &format!("{ip}:{}", self.ctx.config.agent_port),
            token,
        )
    }

    /// Write the status now, before an action a restart must find recorded (see the callers),
    /// if the run is still the version this pass read or last wrote: whether it was written.
    /// When not, the pass is superseded (see [`Reconciler::superseded`]).
    pub(crate) async fn persist(&mut self) -> Result<bool> {
        let written = write_status(
            self.ctx,
            &self.ns,
            &self.name,
            &self.draft.status,
            self.version.as_deref(),
        )
        .await?;
        match written {
            Written::At(rv) => {
                self.version = rv;
                self.written = Some(self.draft.status.clone());
                Ok(true)
            }
            Written::Conflict => {
                self.superseded = true;
                Ok(false)
            }
        }
    }
}

/// How soon a superseded pass is retried (the watch brings the new version at once; this is
/// the bound when it does not).
const SUPERSEDED_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The end of a pass whose decisions were taken on an old copy of the run.
fn superseded(ns: &str, name: &str) -> Result<Action> {
    info!("{ns}/{name}: changed since this pass read it; deciding again on the new version");
    Ok(Action::requeue(SUPERSEDED_RETRY))
}
