//! The controller: one level-triggered reconcile per `BenchmarkRun`.
//!
//! Each pass reads the run, its pods and its result ConfigMap, asks the workers where they are,
//! acts, and writes the whole status by server-side apply. Decisions that must survive a
//! restart are written to the status *before* acting on them (worker placement, the start
//! time); summaries are written to the result ConfigMap before the status counts them. So a
//! restart at any moment repeats only idempotent steps.
//!
//! # RBAC the operator needs
//! - `benchmarkruns`: get, list, watch, create, delete (create: a matrix run's combinations,
//!   delete: TTL); `benchmarkruns/status`: get, patch
//! - `pods`: get, list, watch, create, delete; `persistentvolumeclaims`: create, delete
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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, Controller};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, warn};

use crate::client::{fan_out, SummaryError, WorkerClient};
use crate::crd::{BenchmarkRun, BenchmarkRunStatus, CleanupPolicy, Phase, Progress, WorkerStatus};
use crate::metrics::Metrics;
use crate::resources::{self, MANAGER, RUN_LABEL};
use crate::state::{self, cond, worker_phase as wp, PodView};
use crate::sweep::{self, CombinationRow, MatrixStatus};
use crate::{baseline, decode, netpol, results, thresholds, Error, Result};

/// Default of `--worker-parallelism`: calls to workers in flight at once per run.
pub const DEFAULT_WORKER_PARALLELISM: usize = 64;
/// Default of `--worker-timeout`: longest call to one worker (status, start, summary,
/// shutdown). A dead worker costs this once per pass, beside the others, not before them.
pub const DEFAULT_WORKER_TIMEOUT: Duration = Duration::from_secs(10);
/// Events of one reason in one pass beyond which they are published as one event with a
/// count (a fleet of 1,000 would otherwise write 1,000 "Collected" events one by one).
const EVENTS_PER_REASON: usize = 5;
/// How often an active run is looked at even when nothing changes (workers are polled, not
/// watched).
const POLL: Duration = Duration::from_secs(2);

/// What the operator was started with.
#[derive(Clone, Debug)]
pub struct Config {
    /// Key for the per-run worker tokens (HMAC); must stay the same across restarts.
    pub key: Vec<u8>,
    /// Worker image when a run names none.
    pub worker_image: String,
    /// Watch only this namespace (tests); `None` for all.
    pub namespace: Option<String>,
    /// Port of the worker agents.
    pub agent_port: u16,
    /// What runs may ask for (worker images, hostPath).
    pub policy: crate::policy::Policy,
    /// With a value, each run gets a NetworkPolicy letting only these peers reach its workers.
    pub worker_ingress: Option<crate::netpol::WorkerIngress>,
    /// Calls to one run's workers in flight at once (status, start, summary, shutdown).
    pub worker_parallelism: usize,
    /// Longest call to one worker.
    pub worker_timeout: Duration,
}

/// Shared by every reconcile.
pub struct Context {
    pub client: Client,
    pub config: Config,
    pub metrics: Arc<Metrics>,
    pub http: reqwest::Client,
    pub reporter: Reporter,
}

impl Context {
    pub fn new(client: Client, config: Config, metrics: Arc<Metrics>) -> Self {
        let http = WorkerClient::http(config.worker_timeout);
        Self {
            client,
            config,
            metrics,
            http,
            reporter: Reporter {
                controller: MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        }
    }
}

/// Run the controller until `shutdown` completes.
///
/// Runs are watched untyped and decoded one by one ([`crate::decode`]): a run the Rust type
/// cannot read is reported on itself instead of failing the watch of every run.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ar = decode::api_resource();
    let (runs, pods): (Api<DynamicObject>, Api<Pod>) = match &config.namespace {
        Some(ns) => (
            Api::namespaced_with(client.clone(), ns, &ar),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all_with(client.clone(), &ar), Api::all(client.clone())),
    };
    let ctx = Arc::new(Context::new(client, config, metrics));
    Controller::new_with(runs, watcher::Config::default(), ar)
        .owns(
            pods,
            watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGER}")),
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile_object, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!("reconcile: {e}");
            }
        })
        .await;
}

fn error_policy(run: Arc<DynamicObject>, err: &Error, ctx: Arc<Context>) -> Action {
    warn!("reconcile {} failed: {err}", run.name_any());
    ctx.metrics.error(err.metric_label());
    Action::requeue(Duration::from_secs(5))
}

/// Decode the run, then reconcile it; a run that does not decode is reported on itself.
async fn reconcile_object(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action> {
    match decode::decode(&obj) {
        Ok(run) => reconcile(Arc::new(run), ctx).await,
        Err(message) => {
            ctx.metrics.error("decode");
            decode::report(&obj, &message, &ctx).await?;
            Ok(Action::await_change())
        }
    }
}

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
    };
    let old = r.status.clone();
    let mut action = r.step().await;
    if let Err(Error::Rejected { what, message }) = &action {
        // An object built from the run's spec is invalid: report it on the run, once.
        let msg = format!("the API server rejected {what}: {message}");
        r.condition(cond::VALID, false, "Rejected", msg.clone());
        r.fail("Rejected", msg);
        action = Ok(Action::requeue(POLL));
    }
    // The status is written even when the step failed half-way: what was learnt stays learnt.
    let status = r.status.clone();
    if status != old {
        write_status(&ctx.client, &ns, &name, &status).await?;
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

async fn write_status(
    client: &Client,
    ns: &str,
    name: &str,
    status: &BenchmarkRunStatus,
) -> Result<()> {
    let api: Api<BenchmarkRun> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({
        "apiVersion": "benchrun.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

struct Reconciler<'a> {
    ctx: &'a Context,
    ns: String,
    name: String,
    run: &'a BenchmarkRun,
    status: BenchmarkRunStatus,
    now: DateTime<Utc>,
    events: Vec<(EventType, String, String)>,
}

impl Reconciler<'_> {
    fn generation(&self) -> Option<i64> {
        self.run.metadata.generation
    }

    fn condition(&mut self, type_: &str, ok: bool, reason: &str, message: impl Into<String>) {
        let g = self.generation();
        state::set_condition(
            &mut self.status.conditions,
            type_,
            ok,
            reason,
            message,
            g,
            self.now,
        );
    }

    fn event(&mut self, t: EventType, reason: &str, note: impl Into<String>) {
        self.events.push((t, reason.into(), note.into()));
    }

    async fn publish_events(&self) {
        if self.events.is_empty() {
            return;
        }
        let recorder = Recorder::new(self.ctx.client.clone(), self.ctx.reporter.clone());
        let reference = self.run.object_ref(&());
        for (t, reason, note) in &group_events(&self.events, EVENTS_PER_REASON) {
            let ev = Event {
                type_: *t,
                reason: reason.clone(),
                note: Some(note.chars().take(1000).collect()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = recorder.publish(&ev, &reference).await {
                warn!("event {reason} for {}/{}: {e}", self.ns, self.name);
            }
        }
    }

    fn set_phase(&mut self, phase: Phase, reason: &str, note: impl Into<String>) {
        if self.status.phase != phase {
            self.status.phase = phase;
            let t = if phase == Phase::Failed {
                EventType::Warning
            } else {
                EventType::Normal
            };
            self.event(t, reason, note);
        }
    }

    /// Fail the run: condition `Complete=False` with the reason, event, finish time.
    fn fail(&mut self, reason: &str, message: String) {
        self.condition(cond::COMPLETE, false, reason, message.clone());
        self.status.finish_time = Some(self.now.to_rfc3339());
        self.status.progress = None;
        self.set_phase(Phase::Failed, reason, message);
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.ctx.client.clone(), &self.ns)
    }

    fn token(&self) -> Result<String> {
        let uid = self
            .run
            .uid()
            .ok_or_else(|| Error::Invalid("the run has no uid".into()))?;
        Ok(resources::worker_token(&self.ctx.config.key, &uid))
    }

    async fn step(&mut self) -> Result<Action> {
        self.status.observed_generation = self.generation();
        if self.status.phase.is_finished() {
            return self.finished().await;
        }
        // 1. The spec must be valid (the schema cannot say everything) and within policy.
        let mut errs = self.run.spec.validate().err().unwrap_or_default();
        if self.name.len() > resources::MAX_RUN_NAME {
            // The name becomes the value of the benchrun.dev/run label on everything the run owns.
            errs.push(format!(
                "metadata.name: at most {} characters, since it becomes a label value (got {})",
                resources::MAX_RUN_NAME,
                self.name.len()
            ));
        }
        if let Some(b) = &self.run.spec.baseline_ref {
            errs.extend(b.validate(&self.name));
        }
        errs.extend(sweep::validate(&self.run.spec, &self.name));
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
        let timeout = state::timeout(&self.run.spec);
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
            write_status(&self.ctx.client, &self.ns, &self.name, &self.status).await?;
        }
        // 4. Owned objects (idempotent creates).
        if self.status.phase == Phase::Preparing || self.status.phase == Phase::Pending {
            self.ensure_objects().await?;
            crate::failpoint::hit(crate::failpoint::AFTER_PODS_CREATED);
        }
        // 5. Observe pods and workers.
        let pods = self.pods().await?;
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
            write_status(&self.ctx.client, &self.ns, &self.name, &self.status).await?;
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
            if any_status && elapsed > 0.0 {
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
        self.refresh_counts();
        if self.status.phase.is_finished() {
            return self.finished().await;
        }
        Ok(Action::requeue(POLL))
    }

    /// Resolve workers: one per matching node (perNode), or `count` placed by the scheduler.
    async fn place(&mut self) -> Result<Vec<WorkerStatus>> {
        let spec = &self.run.spec.workers;
        let mk = |i: usize, node: Option<String>| {
            let name = format!("w{i}");
            WorkerStatus {
                pod: resources::pod_name(&self.name, &name),
                name,
                node,
                phase: wp::PENDING.into(),
                ..Default::default()
            }
        };
        if !spec.per_node() {
            let n = spec.count.unwrap_or(1).max(1) as usize;
            return Ok((0..n).map(|i| mk(i, None)).collect());
        }
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        let mut lp = ListParams::default();
        if let Some(sel) = &spec.node_selector {
            lp = lp.labels(
                &sel.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        let mut names: Vec<String> = nodes
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|n| {
                node_eligible(
                    n,
                    spec.tolerations.as_deref().unwrap_or_default(),
                    spec.affinity.as_ref(),
                )
            })
            .map(|n| n.name_any())
            .collect();
        names.sort();
        Ok(names
            .into_iter()
            .enumerate()
            .map(|(i, n)| mk(i, Some(n)))
            .collect())
    }

    async fn ensure_objects(&mut self) -> Result<()> {
        let run = self.run;
        create_if_absent(
            &self.api::<Secret>(),
            &resources::token_secret(run, &self.token()?)?,
        )
        .await?;
        create_if_absent(
            &self.api::<ConfigMap>(),
            &resources::workload_config_map(run)?,
        )
        .await?;
        create_if_absent(
            &self.api::<ConfigMap>(),
            &resources::result_config_map(run)?,
        )
        .await?;
        if let Some(ingress) = &self.ctx.config.worker_ingress {
            create_if_absent(
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
                create_if_absent(&self.api::<PersistentVolumeClaim>(), &pvc).await?;
            }
            let pod = resources::worker_pod(run, &w, &self.ctx.config.worker_image)?;
            if create_if_absent(&pods, &pod).await? {
                self.event(
                    EventType::Normal,
                    "CreatedWorker",
                    format!("created pod {} for worker {}", w.pod, w.name),
                );
            }
        }
        Ok(())
    }

    async fn pods(&self) -> Result<BTreeMap<String, Pod>> {
        let lp = ListParams::default().labels(&format!("{RUN_LABEL}={}", self.name));
        Ok(self
            .api::<Pod>()
            .list(&lp)
            .await?
            .items
            .into_iter()
            // Only pods this run controls (a re-created run of the same name must not adopt).
            .filter(|p| {
                p.owner_references()
                    .iter()
                    .any(|o| Some(&o.uid) == self.run.metadata.uid.as_ref())
            })
            .map(|p| (p.name_any(), p))
            .collect())
    }

    fn worker_failed(&mut self, i: usize, reason: &str, msg: String) {
        let w = &mut self.status.workers[i];
        if w.phase == wp::FAILED {
            return;
        }
        w.phase = wp::FAILED.into();
        w.message = Some(msg.clone());
        let note = format!("worker {} (pod {}): {msg}", w.name, w.pod);
        self.event(EventType::Warning, reason, note);
    }

    fn lose(&mut self, i: usize, why: &str) {
        let w = &mut self.status.workers[i];
        if w.phase == wp::LOST {
            return;
        }
        w.phase = wp::LOST.into();
        w.message = Some(why.into());
        let note = format!(
            "worker {} (pod {}, node {}): {why}",
            w.name,
            w.pod,
            w.node.as_deref().unwrap_or("?")
        );
        self.event(EventType::Warning, "WorkerLost", note);
    }

    fn mark_collected(&mut self, i: usize, json: Option<&str>) {
        let w = &mut self.status.workers[i];
        w.phase = wp::COLLECTED.into();
        if let Some(s) = json.and_then(|j| serde_json::from_str::<benchrun_api::Summary>(j).ok()) {
            results::fold_worker(w, &s);
        }
    }

    /// Update a worker from its agent's status and what [`probe`] did with its summary; an
    /// error when the summary could not be persisted (it is asked for again next pass).
    fn observe_agent(
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
            Collected::Persisted(summary) => {
                let w = &mut self.status.workers[i];
                w.phase = wp::COLLECTED.into();
                results::fold_worker(w, &summary);
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

    fn parallelism(&self) -> usize {
        self.ctx.config.worker_parallelism.max(1)
    }

    fn worker_client(&self, ip: &str, token: &str) -> WorkerClient {
        WorkerClient::new(
            self.ctx.http.clone(),
            &format!("{ip}:{}", self.ctx.config.agent_port),
            token,
        )
    }

    /// `workersSummary` and `workerPhases` from the workers' phases.
    fn refresh_counts(&mut self) {
        self.status.workers_summary = Some(state::workers_summary(&self.status.workers));
        self.status.worker_phases = state::phase_counts(&self.status.workers);
    }

    /// Send the start time to every Ready worker at once (bounded), and say whether the last
    /// answer came back before the start time.
    async fn send_starts(&mut self, pods: &BTreeMap<String, Pod>, token: &str) {
        let Some(at) = self
            .status
            .start_time
            .as_deref()
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map(|t| t.with_timezone(&Utc))
        else {
            return;
        };
        let mut jobs = Vec::new();
        for (i, w) in self.status.workers.iter().enumerate() {
            if w.phase != wp::READY {
                continue;
            }
            let Some(ip) = pods
                .get(&w.pod)
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.pod_ip.clone())
            else {
                continue;
            };
            jobs.push((i, self.worker_client(&ip, token)));
        }
        if jobs.is_empty() {
            return;
        }
        let sent_at = Utc::now();
        let answers = fan_out(jobs, self.parallelism(), |(i, client)| async move {
            let r = client.start(at).await;
            (i, r, Utc::now())
        })
        .await;
        let mut last = None;
        let mut sent = 0;
        for (i, r, answered) in answers {
            match r {
                Ok(started) => {
                    let w = &mut self.status.workers[i];
                    w.clock_offset_ms = Some((started.clock_offset_ms * 1000.0).round() / 1000.0);
                    w.phase = wp::RUNNING.into();
                    sent += 1;
                    last = last.max(Some(answered));
                }
                Err(e) => warn!("start {}: {e}", self.status.workers[i].name),
            }
        }
        if let Some(last) = last {
            let took = (last - sent_at).num_milliseconds();
            let margin = (at - last).num_milliseconds();
            // What was measured replaces the estimate made before sending (whose warning
            // stays in the events); a late start measured on an earlier pass stays.
            let late_before = state::condition(&self.status.conditions, cond::START_ON_TIME)
                .is_some_and(|c| c.reason == "StartedLate");
            if margin < 0 {
                let msg = format!(
                    "{sent} start requests took {took} ms; the last answer came {} ms after the start time {}: raise startDelay",
                    -margin,
                    at.to_rfc3339()
                );
                self.condition(cond::START_ON_TIME, false, "StartedLate", msg.clone());
                self.event(EventType::Warning, "StartedLate", msg);
            } else if !late_before {
                self.condition(
                    cond::START_ON_TIME,
                    true,
                    "OnTime",
                    format!("{sent} start requests answered in {took} ms, {margin} ms before the start time"),
                );
            }
        }
        let n = self
            .status
            .workers
            .iter()
            .filter(|w| w.phase == wp::RUNNING)
            .count();
        if n > 0 && state::condition(&self.status.conditions, cond::STARTED).is_none() {
            self.condition(
                cond::STARTED,
                true,
                "Started",
                format!("start time {} sent to the workers", at.to_rfc3339()),
            );
        }
    }

    /// Every live worker is collected: merge, persist, succeed.
    async fn complete(&mut self, live: &[WorkerStatus]) -> Result<()> {
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
    async fn sweep(&mut self, m: &benchrun_api::matrix::Matrix) -> Result<Action> {
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
                    create_if_absent(&runs, &child).await?;
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
    fn check_thresholds(&mut self, merged: &benchrun_api::Summary) -> Option<String> {
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
    async fn compare_with_baseline(&mut self, merged: &benchrun_api::Summary) {
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

    /// Ask every reachable worker to stop (the run failed); pods go per cleanup policy.
    async fn stop_workers(&self) {
        let Ok(token) = self.token() else { return };
        let Ok(pods) = self.pods().await else { return };
        let clients: Vec<_> = pods
            .values()
            .filter_map(|p| p.status.as_ref().and_then(|s| s.pod_ip.clone()))
            .map(|ip| self.worker_client(&ip, &token))
            .collect();
        fan_out(clients, self.parallelism(), |c| async move {
            let _ = c.shutdown().await;
        })
        .await;
    }

    /// Cleanup per policy, then TTL.
    async fn finished(&mut self) -> Result<Action> {
        let succeeded = self.status.phase == Phase::Succeeded;
        let clean = match self.run.spec.cleanup {
            CleanupPolicy::Always => true,
            CleanupPolicy::OnSuccess => succeeded,
            CleanupPolicy::Never => false,
        };
        if !clean && state::condition(&self.status.conditions, cond::CLEANED_UP).is_none() {
            // Said in the same status write as the final phase, so that whoever sees the run
            // finished also sees why its pods are still there.
            self.condition(
                cond::CLEANED_UP,
                false,
                "PodsKept",
                format!(
                    "worker pods kept ({:?} policy, run {})",
                    self.run.spec.cleanup,
                    self.status.phase.as_str()
                ),
            );
        }
        if clean && state::condition(&self.status.conditions, cond::CLEANED_UP).is_none() {
            let pods = self.pods().await?;
            let api = self.api::<Pod>();
            for p in pods.keys() {
                match api.delete(p, &DeleteParams::default()).await {
                    Ok(_) => {}
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
                for w in &self.status.workers {
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
            self.condition(
                cond::CLEANED_UP,
                true,
                "PodsDeleted",
                format!("worker pods deleted ({:?} policy)", self.run.spec.cleanup),
            );
            self.event(
                EventType::Normal,
                "CleanedUp",
                format!("deleted {} worker pods", pods.len()),
            );
        }
        if let Some(ttl) = self.run.spec.ttl_seconds_after_finished {
            let finished = self
                .status
                .finish_time
                .as_deref()
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(self.now);
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
            if self.now >= due {
                let api: Api<BenchmarkRun> = self.api();
                match api.delete(&self.name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                self.ctx.metrics.forget(&self.ns, &self.name);
                return Ok(Action::await_change());
            }
            return Ok(Action::requeue((due - self.now).to_std().unwrap_or(POLL)));
        }
        Ok(Action::await_change())
    }
}

/// Create `obj`; an existing one is fine (returns whether it was created).
async fn create_if_absent<K>(api: &Api<K>, obj: &K) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        // The apiserver refused the object itself (a field of the run it was built from):
        // retrying cannot help, the run must say so.
        Err(kube::Error::Api(e)) if e.code == 422 => Err(Error::Rejected {
            what: format!("{} {}", K::kind(&Default::default()), obj.name_any()),
            message: e.message,
        }),
        Err(e) => Err(e.into()),
    }
}

/// A node takes a perNode worker when it is Ready, schedulable, its taints are tolerated and
/// the required node-affinity terms match its labels.
pub fn node_eligible(
    node: &Node,
    tolerations: &[k8s_openapi::api::core::v1::Toleration],
    affinity: Option<&k8s_openapi::api::core::v1::Affinity>,
) -> bool {
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return false;
    }
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if !ready {
        return false;
    }
    for taint in spec.taints.iter().flatten() {
        if taint.effect == "PreferNoSchedule" {
            continue;
        }
        let tolerated = tolerations.iter().any(|t| {
            let key_ok = match t.key.as_deref() {
                None | Some("") => t.operator.as_deref() == Some("Exists"),
                Some(k) => k == taint.key,
            };
            let value_ok = t.operator.as_deref() == Some("Exists")
                || t.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default();
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == taint.effect);
            key_ok && value_ok && effect_ok
        });
        if !tolerated {
            return false;
        }
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let Some(terms) = affinity
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| &r.node_selector_terms)
    else {
        return true;
    };
    terms.iter().any(|term| {
        term.match_expressions.iter().flatten().all(|req| {
            let v = labels.get(&req.key);
            let vals = req.values.clone().unwrap_or_default();
            match req.operator.as_str() {
                "In" => v.is_some_and(|v| vals.contains(v)),
                "NotIn" => v.is_none_or(|v| !vals.contains(v)),
                "Exists" => v.is_some(),
                "DoesNotExist" => v.is_none(),
                _ => true,
            }
        }) && term.match_fields.iter().flatten().all(|req| {
            let vals = req.values.clone().unwrap_or_default();
            let name = node.name_any();
            req.key != "metadata.name"
                || match req.operator.as_str() {
                    "In" => vals.contains(&name),
                    "NotIn" => !vals.contains(&name),
                    _ => true,
                }
        })
    })
}

fn humantime_secs(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

fn humantime_ms(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// What became of a worker's summary in [`probe`].
enum Collected {
    /// Persisted in its result object: count it.
    Persisted(Box<benchrun_api::Summary>),
    /// Not to be had now (no answer, not ready): ask again.
    NotYet(String),
    /// Unusable (kept, not counted): the worker has no result.
    Invalid(String),
    /// Fetched but not persisted: not counted, asked for again.
    PersistFailed(Error),
}

/// One worker's answer to a pass.
enum Probe {
    Unreachable(String),
    Status {
        status: benchrun_api::agent::AgentStatus,
        collected: Option<Collected>,
    },
}

/// Ask one worker where it is; when it is done, fetch its summary, persist it (before anything
/// counts it) and let the worker exit. Runs concurrently with the other workers' probes, so it
/// touches no shared state: the reconciler applies the outcome afterwards.
async fn probe(
    client: WorkerClient,
    cms: Api<ConfigMap>,
    run: &BenchmarkRun,
    name: String,
) -> Probe {
    use benchrun_api::agent::AgentStage;
    let status = match client.status().await {
        Ok(s) => s,
        Err(e) => return Probe::Unreachable(e),
    };
    if status.stage != AgentStage::Done {
        return Probe::Status {
            status,
            collected: None,
        };
    }
    let collected = match client.summary().await {
        Ok((text, summary)) => match results::persist_worker(&cms, run, &name, &text).await {
            Ok(()) => {
                crate::failpoint::hit(crate::failpoint::AFTER_PERSIST);
                Collected::Persisted(Box::new(summary))
            }
            Err(e) => Collected::PersistFailed(e),
        },
        Err(SummaryError::Unreachable(e)) => Collected::NotYet(e),
        // Keep what the worker sent (never counted), then say why this worker has no result
        // instead of asking until the timeout.
        Err(SummaryError::Invalid { message, body }) => match body {
            Some(body) => match results::persist_rejected(&cms, run, &name, &body).await {
                Ok(()) => Collected::Invalid(message),
                Err(e) => Collected::PersistFailed(e),
            },
            None => Collected::Invalid(message),
        },
    };
    // Collected or given up on: the worker may exit.
    if matches!(collected, Collected::Persisted(_) | Collected::Invalid(_)) {
        if let Err(e) = client.shutdown().await {
            tracing::debug!("shutdown {name}: {e}");
        }
    }
    Probe::Status {
        status,
        collected: Some(collected),
    }
}

/// The events of one pass, with more than `max` of one reason folded into one event that
/// counts them and quotes the first few.
fn group_events(
    events: &[(EventType, String, String)],
    max: usize,
) -> Vec<(EventType, String, String)> {
    let mut order: Vec<&str> = Vec::new();
    let mut by_reason: BTreeMap<&str, Vec<&(EventType, String, String)>> = BTreeMap::new();
    for e in events {
        if !by_reason.contains_key(e.1.as_str()) {
            order.push(&e.1);
        }
        by_reason.entry(&e.1).or_default().push(e);
    }
    let mut out = Vec::new();
    for reason in order {
        let group = &by_reason[reason];
        if group.len() <= max {
            out.extend(group.iter().map(|e| (*e).clone()));
            continue;
        }
        let first: Vec<&str> = group.iter().take(max).map(|e| e.2.as_str()).collect();
        out.push((
            group[0].0,
            reason.to_string(),
            format!("{} workers: {}; ...", group.len(), first.join("; ")),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint, Toleration};

    fn node(name: &str, ready: bool, taint: Option<&str>) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: taint.map(|k| {
                    vec![Taint {
                        key: k.into(),
                        effect: "NoSchedule".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn eligible_nodes() {
        assert!(node_eligible(&node("a", true, None), &[], None));
        assert!(!node_eligible(&node("a", false, None), &[], None));
        assert!(!node_eligible(
            &node("a", true, Some("dedicated")),
            &[],
            None
        ));
        let tol = Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        assert!(node_eligible(
            &node("a", true, Some("dedicated")),
            &[tol],
            None
        ));
    }

    #[test]
    fn many_events_of_one_reason_become_one() {
        let ev = |r: &str, n: usize| (EventType::Normal, r.to_string(), format!("note {n}"));
        let mut events: Vec<_> = (0..8).map(|n| ev("Collected", n)).collect();
        events.insert(3, ev("Starting", 0));
        let out = group_events(&events, 5);
        assert_eq!(
            out,
            vec![
                (
                    EventType::Normal,
                    "Collected".to_string(),
                    "8 workers: note 0; note 1; note 2; note 3; note 4; ...".to_string()
                ),
                ev("Starting", 0),
            ]
        );
        let few: Vec<_> = (0..5).map(|n| ev("Collected", n)).collect();
        assert_eq!(group_events(&few, 5), few);
    }
}
