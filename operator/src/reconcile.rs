//! One level-triggered reconcile pass over one `BenchmarkRun`, deciding through the pure state
//! machine in [`crate::state`].
//!
//! Each pass reads the run, its pods and its result ConfigMap, asks the workers where they are,
//! acts, and writes the whole status by server-side apply. Decisions that must survive a
//! restart are written to the status *before* acting on them (worker placement, the start
//! time); summaries are written to the result ConfigMap before the status counts them. So a
//! restart at any moment repeats only idempotent steps.
//!
//! # RBAC the operator needs
//! - `benchmarkruns`: get, list, watch, create, delete, patch (create: a matrix run's
//!   combinations, delete: TTL, patch: the finalizer); `benchmarkruns/status`: get, patch
//! - `pods`: get, list, watch, create, delete; `persistentvolumeclaims`: get, create, delete
//!   (get: an existing claim is checked to be the run's)
//! - `configmaps`: get, list, create, patch (list: the per-worker result objects of a run, by
//!   label); `secrets`: **create only** (the per-run token; never
//!   get/list, so credentials referenced by runs stay unreadable to the operator)
//! - `nodes`: list (perNode); `events.k8s.io/events`: create, patch
//! - `networkpolicies`: create (with `--worker-network-policy`: one per run, see `netpol.rs`)
//!
//! With `--leader-elect`, also get, create and update on Leases (coordination.k8s.io) in the
//! lease's namespace only: a Role, not part of the cluster-wide list above (see `leader.rs`).
//!
//! The operator reaches each worker at `<pod IP>:8080`; the workers' `/v1/*` endpoints accept
//! only the per-run token (HMAC-SHA256 of the run UID under the operator's key).

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

use crate::client::{fan_out, WorkerClient};
use crate::context::{Context, POLL};
use crate::crd::matrix::{CombinationRow, MatrixStatus};
use crate::crd::{BenchmarkRun, Phase, Progress, WorkerStatus};
use crate::resources;
use crate::state::{self, cond, worker_phase as wp, PodView};
use crate::status::{write_status, Reconciler};
use crate::workers::{probe, Collected, Probe};
use crate::{baseline, deletion, netpol, results, sweep, thresholds, validate, Error, Result};

/// One pass over one run.
pub async fn reconcile(run: Arc<BenchmarkRun>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile();
    let ns = run
        .namespace()
        .ok_or_else(|| Error::Invalid("BenchmarkRun without namespace".into()))?;
    let name = run.name_any();
    let mut r = Reconciler {
        ctx: &ctx,
        ns: ns.clone(),
        name: name.clone(),
        run: &run,
        status: run.status.clone().unwrap_or_default(),
        now: Utc::now(),
        events: Vec::new(),
        written: None,
    };
    if run.metadata.deletion_timestamp.is_some() {
        let action = r.finalize().await;
        r.publish_events().await;
        return action;
    }
    if !deletion::has_finalizer(&run) {
        // Before anything is created: a run deleted from here on is cleaned up.
        deletion::add_finalizer(&r.api(), &run).await?;
    }
    let old = r.status.clone();
    let mut action = r.step().await;
    match &action {
        Err(Error::Rejected { what, message }) => {
            // An object built from the run's spec is invalid: report it on the run, once.
            let msg = format!("the API server rejected {what}: {message}");
            r.condition(cond::VALID, false, "Rejected", msg.clone());
            r.fail("Rejected", msg);
            action = Ok(Action::requeue(POLL));
        }
        Err(e @ Error::NotOurs { earlier_run, .. }) => {
            // Never adopted. An earlier run's objects go with it (garbage collection): wait
            // for them, within the run's timeout; anything else is for the user to remove.
            let msg = format!("{e}");
            if *earlier_run {
                r.condition(cond::READY, false, "WaitingForEarlierRun", msg);
            } else {
                r.fail("NameTaken", format!("{msg}: delete or rename it"));
            }
            action = Ok(Action::requeue(POLL));
        }
        _ => {}
    }
    // A run that finished in this pass is cleaned up in it, so the write that says it
    // finished also says what became of its pods (idempotent where the step did it already;
    // no later pass is needed, as none comes from this pass's own write).
    if action.is_ok() && r.status.phase.is_finished() && !old.phase.is_finished() {
        action = r.finished().await;
    }
    // The status is written even when the step failed half-way: what was learnt stays learnt.
    // One write per pass, unless one was needed earlier (placement, start time); then only
    // when something changed since.
    let status = r.status.clone();
    if status != *r.written.as_ref().unwrap_or(&old) {
        write_status(&ctx, &ns, &name, &status).await?;
    }
    ctx.metrics.observe(&ns, &name, &status);
    if status.phase != old.phase {
        info!(
            "{ns}/{name}: {} -> {}",
            old.phase.as_str(),
            status.phase.as_str()
        );
    }
    r.publish_events().await;
    action
}

impl Reconciler<'_> {
    pub(crate) async fn step(&mut self) -> Result<Action> {
        self.status.observed_generation = self.generation();
        if self.status.phase.is_finished() {
            return self.finished().await;
        }
        // 1. The spec must be valid (the schema cannot say everything) and within policy.
        let mut errs = validate::run(&self.run.spec, &self.name);
        let mut reason = "InvalidWorkload";
        if let Err(more) = self
            .ctx
            .config
            .policy
            .check(&self.run.spec, &self.ctx.config.worker_image)
        {
            if errs.is_empty() {
                reason = "Forbidden";
            }
            errs.extend(more);
        }
        if !errs.is_empty() {
            let msg = errs.join("; ");
            self.condition(cond::VALID, false, reason, msg.clone());
            self.fail(reason, msg);
            return Ok(Action::requeue(POLL));
        }
        if state::condition(&self.status.conditions, cond::VALID).is_none() {
            self.condition(cond::VALID, true, "Valid", "the workload is valid");
        }
        // 2. Deadline.
        let created: DateTime<Utc> = self
            .run
            .metadata
            .creation_timestamp
            .as_ref()
            .map(state::from_time)
            .unwrap_or(self.now);
        let timeout = self.run.spec.deadline();
        if (self.now - created).to_std().unwrap_or_default() > timeout {
            let msg = format!(
                "the run did not finish within its timeout of {}",
                humantime_secs(timeout)
            );
            self.fail("Timeout", msg);
            self.stop_workers().await;
            return Ok(Action::requeue(POLL));
        }
        // A matrix run places no workers itself: its combinations are child runs.
        if let Some(m) = self.run.spec.matrix.clone() {
            return self.sweep(&m).await;
        }
        // 3. Placement, decided once and written before any pod exists.
        if self.status.workers.is_empty() {
            let workers = self.place().await?;
            if workers.is_empty() {
                let msg = "no Ready, schedulable node matches workers.nodeSelector, workers.affinity and workers.tolerations".to_string();
                self.condition(cond::SCHEDULED, false, "NoMatchingNodes", msg.clone());
                self.fail("NoMatchingNodes", msg);
                return Ok(Action::requeue(POLL));
            }
            let note = workers
                .iter()
                .map(|w| format!("{} on {}", w.name, w.node.as_deref().unwrap_or("any node")))
                .collect::<Vec<_>>()
                .join(", ");
            self.status.workers = workers;
            self.status.result_config_map = Some(resources::result_cm_name(&self.name));
            self.set_phase(Phase::Preparing, "WorkersPlaced", note);
            self.refresh_counts();
            // Not left to the pass's one write at the end: the placement must be recorded
            // before the pods that follow it exist, or a restart in between would place again
            // (on nodes that may have changed) beside pods already created for the first.
            self.persist().await?;
        }
        // 4. Owned objects (idempotent creates).
        if self.status.phase == Phase::Preparing || self.status.phase == Phase::Pending {
            self.ensure_objects().await?;
            crate::failpoint::hit(crate::failpoint::AFTER_PODS_CREATED);
        }
        // 5. Observe pods and workers.
        let pods = self.pods();
        let cms = self.api::<ConfigMap>();
        // Summaries exist only after the start; before, there is nothing to list.
        let persisted = if self.status.start_time.is_some() {
            results::persisted_workers(&cms, self.run).await?
        } else {
            Default::default()
        };
        let token = self.token()?;
        let mut progress = Progress::default();
        let mut any_status = false;
        let mut probes: Vec<(usize, WorkerClient)> = Vec::new();
        for i in 0..self.status.workers.len() {
            let w = self.status.workers[i].clone();
            // The node a scheduled worker's pod was placed on (perNode workers are pinned
            // from the start), so that a lost worker is named with its node.
            if let Some(node) = pods
                .get(&w.pod)
                .and_then(|p| p.spec.as_ref())
                .and_then(|s| s.node_name.as_ref())
            {
                if w.node.as_ref() != Some(node) {
                    self.status.workers[i].node = Some(node.clone());
                }
            }
            if persisted.contains(&w.name) && w.phase != wp::COLLECTED {
                // Persisted by an earlier pass that did not get to write the status.
                let text = results::load_worker(&cms, self.run, &w.name).await?;
                self.mark_collected(i, text.as_deref());
                continue;
            }
            if !state::is_live(&w) || w.phase == wp::COLLECTED {
                continue;
            }
            let view = state::classify_pod(pods.get(&w.pod));
            match view.clone() {
                PodView::Missing | PodView::Terminating => {
                    if self.status.start_time.is_some() {
                        self.lose(i, "its pod was deleted before its result was collected");
                    } else if view == PodView::Missing && w.phase != wp::PENDING {
                        // Lost before the start: nothing measured yet, so a new pod is as good.
                        self.status.workers[i].phase = wp::PENDING.into();
                    }
                }
                PodView::ConfigError(msg) => self.worker_failed(i, "WorkerConfigError", msg),
                PodView::Failed(msg) => self.worker_failed(i, "WorkerFailed", msg),
                PodView::Lost(why) => self.lose(i, &why),
                PodView::Succeeded => {
                    self.lose(i, "its pod exited before its result was collected")
                }
                PodView::Pending { unschedulable } => {
                    if let Some((msg, since)) = unschedulable {
                        let m = format!(
                            "worker {} ({}) cannot be scheduled: {msg}",
                            w.name,
                            w.node.as_deref().unwrap_or("any node")
                        );
                        self.condition(cond::SCHEDULED, false, "Unschedulable", m.clone());
                        let since = since.unwrap_or(self.now);
                        if (self.now - since).to_std().unwrap_or_default()
                            >= state::UNSCHEDULABLE_GRACE
                        {
                            self.worker_failed(i, "Unschedulable", m);
                        }
                    }
                }
                PodView::Running { ip } => {
                    let Some(ip) = ip else { continue };
                    probes.push((i, self.worker_client(&ip, &token)));
                }
            }
        }
        // Every running worker is asked at once (bounded): one that does not answer costs one
        // timeout beside the others, not one before each of them.
        let run = self.run;
        let outcomes: Vec<(usize, Probe)> = fan_out(probes, self.parallelism(), |(i, client)| {
            let cms = cms.clone();
            let name = self.status.workers[i].name.clone();
            async move { (i, probe(client, cms, run, name).await) }
        })
        .await;
        let mut persist_error = None;
        for (i, outcome) in outcomes {
            match outcome {
                // Not listening yet, or a network blip: ask again next pass.
                Probe::Unreachable(e) => {
                    tracing::debug!("worker {}: {e}", self.status.workers[i].name)
                }
                Probe::Status { status, collected } => {
                    any_status = true;
                    progress.ops += status.ops;
                    progress.errors += status.errors;
                    if let Some(e) = self.observe_agent(i, &status, collected) {
                        persist_error.get_or_insert(e);
                    }
                }
            }
        }
        // What was collected is applied above; a summary that could not be persisted is asked
        // for again on the next pass.
        if let Some(e) = persist_error {
            self.refresh_counts();
            return Err(e);
        }
        if self.status.phase.is_finished() {
            self.refresh_counts();
            self.stop_workers().await;
            return Ok(Action::requeue(POLL));
        }
        let unschedulable = pods.values().any(|p| {
            matches!(
                state::classify_pod(Some(p)),
                PodView::Pending {
                    unschedulable: Some(_)
                }
            )
        });
        if !unschedulable && !pods.is_empty() {
            self.condition(
                cond::SCHEDULED,
                true,
                "Scheduled",
                "every worker pod is scheduled",
            );
        }
        // 6. The state machine: failure policy, start, completion.
        if let Some((reason, which)) = state::dead_workers(&self.status.workers) {
            self.condition(cond::LOST, true, reason, which);
        }
        let started = self.status.start_time.is_some();
        let next = state::next_step(&self.status.workers, self.run.spec.failure_policy, started);
        if let state::Next::Fail { reason, message } = &next {
            self.fail(reason, message.clone());
            self.refresh_counts();
            self.stop_workers().await;
            return Ok(Action::requeue(POLL));
        }
        // 7. Start: one start time for every live worker, written before it is sent.
        if next == state::Next::Start {
            let live = self
                .status
                .workers
                .iter()
                .filter(|w| state::is_live(w))
                .count();
            let budget = state::start_budget(live, self.parallelism());
            let delay = match self.run.spec.start_delay.map(|d| d.0) {
                Some(d) => {
                    if d < budget {
                        let msg = format!(
                            "startDelay {} is shorter than the {} that start requests to {live} workers need at {} in flight; the late workers start late (raise startDelay, or --worker-parallelism)",
                            humantime_ms(d),
                            humantime_ms(budget),
                            self.parallelism()
                        );
                        self.condition(
                            cond::START_ON_TIME,
                            false,
                            "StartDelayTooShort",
                            msg.clone(),
                        );
                        self.event(EventType::Warning, "StartDelayTooShort", msg);
                    }
                    d
                }
                None => state::default_start_delay(live, self.parallelism()),
            };
            // Bounded by validation; checked anyway, since a panic here would crash-loop the
            // operator on this run.
            let Some(at) = chrono::Duration::from_std(delay)
                .ok()
                .and_then(|d| self.now.checked_add_signed(d))
            else {
                self.fail(
                    "InvalidWorkload",
                    format!("spec.startDelay: {delay:?} is out of range"),
                );
                return Ok(Action::requeue(POLL));
            };
            self.status.start_time = Some(at.to_rfc3339());
            self.condition(
                cond::READY,
                true,
                "AllReady",
                format!("{live} workers ready"),
            );
            self.set_phase(
                Phase::Running,
                "Starting",
                format!("{live} workers start at {}", at.to_rfc3339()),
            );
            // Not left to the pass's one write at the end: the start time must be recorded
            // before any worker receives it, so a restart resends the same instant instead of
            // choosing another for the workers that did not get the first.
            self.persist().await?;
            crate::failpoint::hit(crate::failpoint::AFTER_START_WRITTEN);
            self.send_starts(&pods, &token).await;
        } else if started {
            // Resend to anyone still waiting (an operator restarted between the two writes).
            self.send_starts(&pods, &token).await;
        }
        // 8. Progress and completion.
        let live: Vec<_> = self
            .status
            .workers
            .iter()
            .filter(|w| state::is_live(w))
            .cloned()
            .collect();
        if let Some(start) = self
            .status
            .start_time
            .as_deref()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        {
            let elapsed = (self.now - start.with_timezone(&Utc))
                .num_milliseconds()
                .max(0) as f64
                / 1000.0;
            // Progress is rewritten once per progress interval, not on every pass: each
            // write is a request to the API server of the cluster being measured.
            let due = self.status.progress.as_ref().is_none_or(|p| {
                elapsed - p.elapsed_seconds >= self.ctx.config.progress_interval.as_secs_f64()
            });
            if any_status && elapsed > 0.0 && due {
                progress.elapsed_seconds = elapsed;
                progress.ops_per_sec = ((progress.ops as f64 / elapsed) * 10.0).round() / 10.0;
                self.status.throughput = Some(state::throughput_text(progress.ops_per_sec, None));
                self.status.progress = Some(progress);
            }
        }
        if self.status.start_time.is_some() {
            match state::next_step(&self.status.workers, self.run.spec.failure_policy, true) {
                state::Next::Complete => self.complete(&live).await?,
                state::Next::Collecting => {
                    self.set_phase(Phase::Collecting, "Collecting", "every worker has finished")
                }
                _ => {}
            }
        }
        // A run that finished here is cleaned up by `reconcile`, in this pass.
        self.refresh_counts();
        Ok(Action::requeue(POLL))
    }

    pub(crate) async fn ensure_objects(&mut self) -> Result<()> {
        let run = self.run;
        create_unique(
            &self.api::<Secret>(),
            &resources::token_secret(run, &self.token()?)?,
        )
        .await?;
        create_if_absent(
            &self.api::<ConfigMap>(),
            &resources::workload_config_map(run)?,
            run,
        )
        .await?;
        create_if_absent(
            &self.api::<ConfigMap>(),
            &resources::result_config_map(run)?,
            run,
        )
        .await?;
        if let Some(ingress) = &self.ctx.config.worker_ingress {
            create_unique(
                &self.api::<NetworkPolicy>(),
                &netpol::worker_policy(run, ingress)?,
            )
            .await?;
        }
        let pods = self.api::<Pod>();
        for w in self.status.workers.clone() {
            if !state::is_live(&w) || w.phase != wp::PENDING {
                continue;
            }
            if let Some(pvc) = resources::worker_claim(run, &w.name)? {
                create_if_absent(&self.api::<PersistentVolumeClaim>(), &pvc, run).await?;
            }
            let pod = resources::worker_pod(run, &w, &self.ctx.config.worker_image)?;
            if create_if_absent(&pods, &pod, run).await? {
                self.event(
                    EventType::Normal,
                    "CreatedWorker",
                    format!("created pod {} for worker {}", w.pod, w.name),
                );
            }
        }
        Ok(())
    }

    /// Update a worker from its agent's status and what [`probe`] did with its summary; an
    /// error when the summary could not be persisted (it is asked for again next pass).
    pub(crate) fn observe_agent(
        &mut self,
        i: usize,
        st: &benchrun_api::agent::AgentStatus,
        collected: Option<Collected>,
    ) -> Option<Error> {
        use benchrun_api::agent::AgentStage as S;
        let phase = match st.stage {
            S::Preparing => wp::PREPARING,
            S::Ready => wp::READY,
            S::Running => wp::RUNNING,
            S::CleaningUp | S::Done => wp::DONE,
            S::Failed => {
                let msg = st.error.clone().unwrap_or_else(|| "failed".into());
                self.worker_failed(i, "WorkerFailed", msg);
                return None;
            }
        };
        self.status.workers[i].phase = phase.into();
        let name = self.status.workers[i].name.clone();
        match collected? {
            Collected::Persisted(figures) => {
                let w = &mut self.status.workers[i];
                w.phase = wp::COLLECTED.into();
                results::fold_worker(w, &figures);
                let note = format!(
                    "collected worker {name}: {:.0} op/s, p99 {:.3}ms",
                    w.ops_per_sec.unwrap_or_default(),
                    w.p99_ms.unwrap_or_default()
                );
                self.event(EventType::Normal, "Collected", note);
                None
            }
            Collected::NotYet(e) => {
                // Ask again on the next pass; the worker keeps its summary meanwhile.
                tracing::debug!("summary of {name}: {e}");
                None
            }
            Collected::Invalid(message) => {
                self.worker_failed(i, "InvalidSummary", message);
                None
            }
            Collected::PersistFailed(e) => Some(e),
        }
    }

    /// Every live worker is collected: merge, persist, succeed.
    pub(crate) async fn complete(&mut self, live: &[WorkerStatus]) -> Result<()> {
        let names: Vec<&str> = live.iter().map(|w| w.name.as_str()).collect();
        // A persisted summary that does not merge will not merge on the next pass either:
        // fail now and say which, rather than retry until the timeout. The data stays.
        let merged = match results::merge_persisted(&self.api(), self.run, &names).await {
            Ok(m) => m,
            Err(Error::Result(e)) => {
                self.fail("MergeFailed", e);
                self.stop_workers().await;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let text = serde_json::to_string(&merged)?;
        results::persist_merged(&self.api::<ConfigMap>(), &self.name, &text).await?;
        results::fold_merged(&mut self.status, &merged);
        self.status.progress = None;
        self.status.finish_time = Some(self.now.to_rfc3339());
        let lost: Vec<_> = self
            .status
            .workers
            .iter()
            .filter(|w| !state::is_live(w))
            .map(|w| w.name.clone())
            .collect();
        let msg = if lost.is_empty() {
            format!(
                "{} workers collected and merged into ConfigMap {}",
                live.len(),
                resources::result_cm_name(&self.name)
            )
        } else {
            format!(
                "{} workers collected and merged into ConfigMap {}; without lost workers {}",
                live.len(),
                resources::result_cm_name(&self.name),
                lost.join(", ")
            )
        };
        self.compare_with_baseline(&merged).await;
        if let Some(missed) = self.check_thresholds(&merged) {
            // The result is kept (persisted above, in the status); only the verdict fails.
            self.fail(
                "ThresholdsNotMet",
                format!("{msg}; thresholds not met: {missed}"),
            );
            return Ok(());
        }
        self.condition(cond::COMPLETE, true, "Succeeded", msg.clone());
        self.set_phase(
            Phase::Succeeded,
            "Succeeded",
            format!(
                "{msg}; {}",
                self.status.throughput.clone().unwrap_or_default()
            ),
        );
        Ok(())
    }

    /// One pass of a matrix run: start the next combination's child run once the one before
    /// it finished, fill the table, and finish when every combination has.
    pub(crate) async fn sweep(&mut self, m: &benchrun_api::matrix::Matrix) -> Result<Action> {
        let (planned, baseline) = match sweep::plan(&self.run.spec, m) {
            Ok(p) => p,
            Err(errs) => {
                let msg = errs.join("; ");
                self.condition(cond::VALID, false, "InvalidWorkload", msg.clone());
                self.fail("InvalidWorkload", msg);
                return Ok(Action::requeue(POLL));
            }
        };
        let n = planned.len();
        let mut ms = self.status.matrix.clone().unwrap_or_else(|| MatrixStatus {
            progress: String::new(),
            total: n as u32,
            baseline: baseline as u32 + 1,
            combinations: planned
                .iter()
                .enumerate()
                .map(|(k, p)| CombinationRow {
                    name: p.combination.to_string(),
                    run: sweep::child_name(&self.name, k),
                    ..Default::default()
                })
                .collect(),
        });
        if self.status.phase == Phase::Pending {
            self.set_phase(
                Phase::Running,
                "Sweeping",
                format!("{n} combinations, one at a time"),
            );
        }
        let uid = self.run.uid().unwrap_or_default();
        let runs: Api<BenchmarkRun> = self.api();
        let mut current = None;
        'combos: for (k, p) in planned.iter().enumerate() {
            if ms.combinations[k].phase.is_finished() {
                continue;
            }
            // The combination's children in order (warm-up, repeats): start the first that
            // does not exist, wait for the first that has not finished.
            let mut repeats = vec![];
            for (name, slot) in sweep::slots(&self.name, k, m) {
                let Some(child) = runs.get_opt(&name).await? else {
                    let spec = match (slot, m.warmup) {
                        (sweep::Slot::Warmup, Some(w)) => sweep::warmup_spec(&self.run.spec, p, w),
                        _ => sweep::child_spec(&self.run.spec, p),
                    };
                    let mut child = BenchmarkRun::new(&name, spec);
                    child.metadata.namespace = Some(self.ns.clone());
                    child.metadata.owner_references =
                        self.run.controller_owner_ref(&()).map(|o| vec![o]);
                    child.metadata.labels =
                        Some([(sweep::MATRIX_LABEL.to_string(), self.name.clone())].into());
                    create_if_absent(&runs, &child, self.run).await?;
                    let what = match slot {
                        sweep::Slot::Warmup => "warm-up".to_string(),
                        sweep::Slot::Repeat(j) => {
                            format!("repeat {} of {}", j + 1, m.repeats.max(1))
                        }
                    };
                    self.event(
                        EventType::Normal,
                        "CombinationStarted",
                        format!(
                            "combination {} of {n} ({}), {what}, as run {name}",
                            k + 1,
                            ms.combinations[k].name
                        ),
                    );
                    current = Some(k);
                    break 'combos;
                };
                let ours = child
                    .owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true));
                if !ours {
                    let msg = format!(
                        "run {name} exists and is not this run's combination {}: delete or rename it",
                        k + 1
                    );
                    self.fail("NameTaken", msg);
                    return Ok(Action::requeue(POLL));
                }
                let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
                if !phase.is_finished() {
                    ms.combinations[k].phase = if phase == Phase::Pending {
                        Phase::Preparing
                    } else {
                        phase
                    };
                    current = Some(k);
                    break 'combos;
                }
                // A warm-up is not measured: how it ended does not count.
                if let sweep::Slot::Repeat(_) = slot {
                    repeats.push(child);
                }
            }
            // Every child of the combination finished: the median repeat stands for it.
            ms.combinations[k].runs = repeats.iter().map(|r| r.name_any()).collect();
            let failed = repeats
                .iter()
                .find(|r| r.status.as_ref().map(|s| s.phase) != Some(Phase::Succeeded));
            let Some(i) = sweep::representative(&repeats) else {
                continue;
            };
            let child = failed.unwrap_or(&repeats[i]).clone();
            let name = child.name_any();
            ms.combinations[k].run = name.clone();
            let phase = child.status.as_ref().map(|s| s.phase).unwrap_or_default();
            let merged = self
                .api::<ConfigMap>()
                .get_opt(&resources::result_cm_name(&name))
                .await?
                .and_then(|cm| cm.data?.remove(resources::MERGED_KEY))
                .and_then(|t| serde_json::from_str::<benchrun_api::Summary>(&t).ok());
            sweep::fill_row(&mut ms.combinations[k], &child, merged.as_ref());
            self.event(
                EventType::Normal,
                "CombinationFinished",
                format!(
                    "combination {} of {n} ({}): {}",
                    k + 1,
                    ms.combinations[k].name,
                    phase.as_str()
                ),
            );
        }
        sweep::compare_rows(&mut ms.combinations, baseline);
        match current {
            Some(k) => {
                ms.progress = format!("combination {} of {n}", k + 1);
                self.status.workers_summary = Some(format!("{k}/{n} combinations"));
            }
            None => {
                ms.progress = format!("{n} combinations done");
                self.status.workers_summary = Some(format!("{n}/{n} combinations"));
                let failed: Vec<String> = ms
                    .combinations
                    .iter()
                    .filter(|c| c.phase != Phase::Succeeded)
                    .map(|c| format!("{} ({})", c.run, c.name))
                    .collect();
                if failed.is_empty() {
                    let msg = format!("{n} combinations finished; the table is in status.matrix");
                    self.condition(cond::COMPLETE, true, "Succeeded", msg.clone());
                    self.status.finish_time = Some(self.now.to_rfc3339());
                    self.set_phase(Phase::Succeeded, "Succeeded", msg);
                } else {
                    self.fail(
                        "CombinationsFailed",
                        format!(
                            "{} of {n} combinations did not succeed: {}",
                            failed.len(),
                            failed.join(", ")
                        ),
                    );
                }
            }
        }
        self.status.matrix = Some(ms);
        Ok(Action::requeue(POLL))
    }

    /// Evaluate `spec.thresholds` into the status and `ThresholdsMet`; the misses, if any.
    pub(crate) fn check_thresholds(&mut self, merged: &benchrun_api::Summary) -> Option<String> {
        if self.run.spec.thresholds.is_empty() {
            return None;
        }
        let checks = thresholds::evaluate(&self.run.spec.thresholds, merged);
        let missed: Vec<String> = checks
            .iter()
            .filter(|c| !c.met)
            .map(|c| c.describe())
            .collect();
        let n = checks.len();
        self.status.thresholds = checks;
        if missed.is_empty() {
            self.condition(
                cond::THRESHOLDS_MET,
                true,
                "ThresholdsMet",
                format!("all {n} limits met"),
            );
            None
        } else {
            let text = missed.join("; ");
            self.condition(
                cond::THRESHOLDS_MET,
                false,
                "ThresholdsNotMet",
                text.clone(),
            );
            Some(text)
        }
    }

    /// Compare with `spec.baselineRef` into the status and `Regressed`. A baseline that cannot
    /// be read leaves `Regressed=Unknown` with the reason; it never fails the run.
    pub(crate) async fn compare_with_baseline(&mut self, merged: &benchrun_api::Summary) {
        let Some(r) = self.run.spec.baseline_ref.clone() else {
            return;
        };
        let g = self.generation();
        match baseline::load(&r, &self.api(), &self.api()).await {
            Ok(base) => {
                let mut b = baseline::compare(merged, &base, r.tolerance());
                b.source = r.source();
                let regressed = !b.regressions.is_empty();
                let msg = if regressed {
                    format!(
                        "against {} (tolerance {}%): {}",
                        b.source,
                        b.tolerance_percent,
                        b.regressions.join("; ")
                    )
                } else {
                    format!(
                        "within {}% of {} on every op",
                        b.tolerance_percent, b.source
                    )
                };
                let reason = if regressed {
                    "Regressed"
                } else {
                    "WithinTolerance"
                };
                self.condition(cond::REGRESSED, regressed, reason, msg.clone());
                if regressed {
                    self.event(EventType::Warning, "Regressed", msg);
                }
                self.status.baseline = Some(b);
            }
            Err(e) => {
                state::set_condition_status(
                    &mut self.status.conditions,
                    cond::REGRESSED,
                    "Unknown",
                    "BaselineUnavailable",
                    format!("cannot compare: {e}"),
                    g,
                    self.now,
                );
                self.event(
                    EventType::Warning,
                    "BaselineUnavailable",
                    format!("cannot compare with the baseline: {e}"),
                );
            }
        }
    }
}

/// Create `obj` for `run`; one that exists already is fine if it is the run's (returns whether
/// it was created). Names are fixed, so a run deleted and applied again before garbage
/// collection removed the first one's objects would otherwise adopt them (a workload of the
/// old spec, a result object with the old results).
pub(crate) async fn create_if_absent<K>(api: &Api<K>, obj: &K, run: &BenchmarkRun) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    if create(api, obj).await? {
        return Ok(true);
    }
    let what = format!("{} {}", K::kind(&Default::default()), obj.name_any());
    let Some(existing) = api.get_opt(&obj.name_any()).await? else {
        // Deleted in between: created on the next pass.
        return Err(Error::Invalid(format!("{what} was deleted meanwhile")));
    };
    ours(run, existing.owner_references(), what)?;
    Ok(false)
}

/// Create `obj`, whose name carries its run's UID (objects the operator may create but not
/// read: the token Secret, the NetworkPolicy), so one that exists is the run's.
pub(crate) async fn create_unique<K>(api: &Api<K>, obj: &K) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    create(api, obj).await
}

/// Create `obj`: whether it was created (false: the name is taken).
async fn create<K>(api: &Api<K>, obj: &K) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        // The API server refused the object itself (a field of the run it was built from, a
        // quota): retrying cannot help, the run must say so. Timeouts (408) and throttling
        // (429) are retried.
        Err(kube::Error::Api(e))
            if (400..500).contains(&e.code) && e.code != 408 && e.code != 429 =>
        {
            Err(Error::Rejected {
                what: format!("{} {}", K::kind(&Default::default()), obj.name_any()),
                message: e.message,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether an object with these owners is `run`'s; an error that says whose it is if not.
pub(crate) fn ours(
    run: &BenchmarkRun,
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    what: String,
) -> Result<()> {
    if owners
        .iter()
        .any(|o| Some(&o.uid) == run.metadata.uid.as_ref())
    {
        return Ok(());
    }
    let earlier = owners
        .iter()
        .find(|o| o.kind == "BenchmarkRun" && o.name == run.name_any());
    let owner = match (earlier, owners.first()) {
        (Some(o), _) => format!(
            "it is the earlier run {}'s (uid {}), which Kubernetes is deleting",
            o.name, o.uid
        ),
        (None, Some(o)) => format!("it is owned by {} {}", o.kind, o.name),
        (None, None) => "it has no owner".into(),
    };
    Err(Error::NotOurs {
        what,
        owner,
        earlier_run: earlier.is_some(),
    })
}

fn humantime_secs(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

fn humantime_ms(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}
