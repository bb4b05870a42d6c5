//! The pass's decisions, pure: what the observations mean for each worker and for the run,
//! written into the pass's [`Draft`] of the status. No API server and no network here, so
//! every rule is unit-tested (below, and in [`crate::run_rules`]).

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_api::agent::{AgentStage, AgentStatus};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use crate::autoscaler::{self, ScaleUp, ScheduleWait};
use crate::context::POLL;
use crate::crd::{
    BenchmarkRun, BenchmarkRunSpec, BenchmarkRunStatus, Phase, Progress, WorkerPhase, WorkerStatus,
};
use crate::results::{self, WorkerFigures};
use crate::run_rules::{self, cond, PodView};
use crate::status::Draft;
use crate::Error;
use benchrun_api::Summary;

/// Whether the pass goes on.
#[derive(Debug, PartialEq)]
pub(crate) enum Admission {
    Go,
    /// Invalid or forbidden: failed, nothing to stop.
    Refused,
    /// Past its deadline: failed; its workers are to be stopped.
    TimedOut,
}

/// Admit the run: valid, within policy (`problems`: the reason and what is wrong), within its
/// deadline.
pub(crate) fn admit(
    d: &mut Draft,
    run: &BenchmarkRun,
    problems: Option<(&'static str, Vec<String>)>,
) -> Admission {
    if let Some((reason, errs)) = problems {
        let msg = errs.join("; ");
        d.condition(cond::VALID, false, reason, msg.clone());
        d.fail(reason, msg);
        return Admission::Refused;
    }
    if run_rules::condition(&d.status.conditions, cond::VALID).is_none() {
        d.condition(cond::VALID, true, "Valid", "the workload is valid");
    }
    let created: DateTime<Utc> = run
        .metadata
        .creation_timestamp
        .as_ref()
        .map(run_rules::from_time)
        .unwrap_or(d.now);
    let timeout = run.spec.deadline();
    if (d.now - created).to_std().unwrap_or_default() > timeout {
        let msg = timeout_message(run, &d.status, timeout);
        d.fail("Timeout", msg);
        return Admission::TimedOut;
    }
    Admission::Go
}

/// Why a run timed out, in the terms a user can act on: which setting gave the limit (their
/// `spec.timeout`, or the default derived from the workload) and where the run was when it
/// hit it (the run's phase and its workers' phases), so "raise the timeout" and "look at the
/// stuck workers" can be told apart.
fn timeout_message(run: &BenchmarkRun, status: &BenchmarkRunStatus, timeout: Duration) -> String {
    let limit = if run.spec.timeout.is_some() {
        format!("spec.timeout ({}s)", timeout.as_secs())
    } else {
        format!(
            "its default timeout of {}s (spec.timeout unset: duration + warm-up + 10 min, or 1 h \
             without a duration)",
            timeout.as_secs()
        )
    };
    let workers = status
        .worker_phases
        .iter()
        .map(|(phase, n)| format!("{n} {phase}"))
        .collect::<Vec<_>>()
        .join(", ");
    let at = if workers.is_empty() {
        format!("stalled in phase {}", status.phase.as_str())
    } else {
        format!(
            "stalled in phase {} (workers: {workers})",
            status.phase.as_str()
        )
    };
    format!("the run did not finish within {limit}: {at}")
}

/// Record the placement (`false`: no node fits, or the workload does not fit the number of
/// nodes placed on (`misfit`, from [`crate::validate::placed`]): the run failed).
pub(crate) fn placed(
    d: &mut Draft,
    workers: Vec<WorkerStatus>,
    result_cm: String,
    misfit: Vec<String>,
) -> bool {
    if workers.is_empty() {
        let msg = "no Ready, schedulable node matches workers.nodeSelector, workers.affinity and workers.tolerations".to_string();
        d.condition(cond::SCHEDULED, false, "NoMatchingNodes", msg.clone());
        d.fail("NoMatchingNodes", msg);
        return false;
    }
    if !misfit.is_empty() {
        let msg = misfit.join("; ");
        d.condition(cond::VALID, false, "InvalidForNodes", msg.clone());
        d.fail("InvalidForNodes", msg);
        return false;
    }
    let note = workers
        .iter()
        .map(|w| format!("{} on {}", w.name, w.node.as_deref().unwrap_or("any node")))
        .collect::<Vec<_>>()
        .join(", ");
    d.status.workers = workers;
    d.status.result_config_map = Some(result_cm);
    d.set_phase(Phase::Preparing, "WorkersPlaced", note);
    d.refresh_counts();
    true
}

/// Whether the run's objects are still to be created (pods of pending workers included).
pub(crate) fn creating(d: &Draft) -> bool {
    matches!(d.status.phase, Phase::Pending | Phase::Preparing)
}

/// Apply what the workers' pods and the persisted results (`persisted`: the workers whose
/// summaries earlier passes persisted without counting them, with their figures when they
/// could be read) say; the workers whose agents are to be asked, with their pods' IPs.
/// A worker pod unschedulable for `schedule_timeout` (`spec.workers.scheduleTimeout`) fails,
/// unless an autoscaler reports a scale-up for it (`scale_ups`, by pod name: see
/// [`crate::autoscaler`]).
pub(crate) fn from_pods(
    d: &mut Draft,
    pods: &BTreeMap<String, Pod>,
    persisted: BTreeMap<String, Option<WorkerFigures>>,
    schedule_timeout: std::time::Duration,
    scale_ups: &BTreeMap<String, ScaleUp>,
) -> Vec<(usize, String)> {
    let started = d.status.start_time.is_some();
    let mut ask = Vec::new();
    for i in 0..d.status.workers.len() {
        let w = d.status.workers[i].clone();
        let pod = pods.get(&w.pod);
        // The node a scheduled worker's pod was placed on (perNode workers are pinned from
        // the start), so that a lost worker is named with its node.
        if let Some(node) = pod.and_then(|p| p.spec.as_ref()?.node_name.as_ref()) {
            if w.node.as_ref() != Some(node) {
                d.status.workers[i].node = Some(node.clone());
            }
        }
        if let Some(figures) = persisted.get(&w.name) {
            // Persisted by an earlier pass that did not get to write the status.
            d.mark_collected(i, figures.as_ref());
            continue;
        }
        if !w.phase.is_live() || w.phase == WorkerPhase::Collected {
            continue;
        }
        let view = run_rules::classify_pod(pod);
        match view {
            PodView::Missing | PodView::Terminating => {
                if started {
                    d.lose(i, "its pod was deleted before its result was collected");
                } else if view == PodView::Missing && w.phase != WorkerPhase::Pending {
                    // Lost before the start: nothing measured yet, so a new pod is as good.
                    // Its old agent's silence is not the new one's.
                    d.status.workers[i].phase = WorkerPhase::Pending;
                    d.status.workers[i].unanswered_since = None;
                }
            }
            PodView::ConfigError(msg) => d.worker_failed(i, "WorkerConfigError", msg),
            PodView::Failed(msg) => d.worker_failed(i, "WorkerFailed", msg),
            PodView::Lost(why) => d.lose(i, &why),
            PodView::Succeeded => d.lose(i, "its pod exited before its result was collected"),
            PodView::Pending {
                unschedulable: Some((msg, since)),
            } => {
                let since = since.unwrap_or(d.now);
                let waited = (d.now - since).to_std().unwrap_or_default();
                let who = format!(
                    "worker {} ({})",
                    w.name,
                    w.node.as_deref().unwrap_or("any node")
                );
                let m = format!("{who} cannot be scheduled: the scheduler says: {msg}");
                match autoscaler::schedule_wait(waited, schedule_timeout, scale_ups.get(&w.pod)) {
                    ScheduleWait::GiveUp { autoscaler, bound } => {
                        // The autoscaler's word first: a run-level message keeps only the
                        // start of a worker's.
                        let why = match autoscaler {
                            Some(said) => format!(
                                "{who} cannot be scheduled: {said} ({bound}; the scheduler says: {msg})"
                            ),
                            None => format!("{m} ({bound})"),
                        };
                        d.worker_failed(i, "Unschedulable", why.clone());
                        d.condition(cond::SCHEDULED, false, "Unschedulable", why);
                    }
                    ScheduleWait::Waiting {
                        bound,
                        autoscaler,
                        extended,
                    } => {
                        let of = format!(
                            "waiting {}s of {}s, {}spec.workers.scheduleTimeout",
                            waited.as_secs(),
                            bound.as_secs(),
                            if extended {
                                format!("{} x ", autoscaler::SCALE_UP_WAIT_FACTOR)
                            } else {
                                String::new()
                            }
                        );
                        let (reason, text) = match autoscaler {
                            Some(said) if extended => (
                                "WaitingForNode",
                                format!("{who} is waiting for a node: {said} (the scheduler says: {msg}; {of})"),
                            ),
                            Some(said) => ("Unschedulable", format!("{m}; {said} ({of})")),
                            None => ("Unschedulable", format!("{m} ({of})")),
                        };
                        d.condition(cond::SCHEDULED, false, reason, text);
                    }
                }
            }
            PodView::Pending {
                unschedulable: None,
            } => {}
            PodView::Running { ip: Some(ip) } => ask.push((i, ip)),
            PodView::Running { ip: None } => {}
        }
    }
    let unschedulable = pods.values().any(|p| {
        matches!(
            run_rules::classify_pod(Some(p)),
            PodView::Pending {
                unschedulable: Some(_)
            }
        )
    });
    if !unschedulable && !pods.is_empty() {
        d.condition(
            cond::SCHEDULED,
            true,
            "Scheduled",
            "every worker pod is scheduled",
        );
    }
    ask
}

/// Apply the agents' answers to the start requests sent at `sent_at` for the start time
/// `at` (each: the worker, its clock offset in ms or the error, when the answer came): the
/// workers that accepted are Running; whether the last answer came before the start time
/// (`StartRequestsOnTime`), and `Started` once any worker runs.
pub(crate) fn starts_answered(
    d: &mut Draft,
    at: DateTime<Utc>,
    sent_at: DateTime<Utc>,
    answers: Vec<(usize, Result<f64, String>, DateTime<Utc>)>,
) {
    let mut last = None;
    let mut sent = 0;
    for (i, r, answered) in answers {
        match r {
            Ok(offset_ms) => {
                let w = &mut d.status.workers[i];
                w.clock_offset_ms = Some((offset_ms * 1000.0).round() / 1000.0);
                w.phase = WorkerPhase::Running;
                sent += 1;
                last = last.max(Some(answered));
            }
            Err(e) => tracing::warn!("start {}: {e}", d.status.workers[i].name),
        }
    }
    if let Some(last) = last {
        let took = (last - sent_at).num_milliseconds();
        let margin = (at - last).num_milliseconds();
        // What was measured replaces the estimate made before sending (whose warning
        // stays in the events); a late start measured on an earlier pass stays.
        let late_before = run_rules::condition(&d.status.conditions, cond::START_ON_TIME)
            .is_some_and(|c| c.reason == "StartedLate");
        if margin < 0 {
            let msg = format!(
                "{sent} start requests took {took} ms; the last answer came {} ms after the start time {}: raise startDelay",
                -margin,
                at.to_rfc3339()
            );
            d.condition(cond::START_ON_TIME, false, "StartedLate", msg.clone());
            d.event(EventType::Warning, "StartedLate", msg);
        } else if !late_before {
            d.condition(
                cond::START_ON_TIME,
                true,
                "OnTime",
                format!(
                    "{sent} start requests answered in {took} ms, {margin} ms before the start time"
                ),
            );
        }
    }
    let running = d
        .status
        .workers
        .iter()
        .any(|w| w.phase == WorkerPhase::Running);
    if running && run_rules::condition(&d.status.conditions, cond::STARTED).is_none() {
        d.condition(
            cond::STARTED,
            true,
            "Started",
            format!("start time {} sent to the workers", at.to_rfc3339()),
        );
    }
}

/// The merged result is persisted: fold it into the status and say what was merged (the
/// message the final condition carries). The verdict follows the baseline comparison:
/// [`verdict`].
pub(crate) fn merged(d: &mut Draft, merged: &Summary, result_cm: &str) -> String {
    results::fold_merged(&mut d.status, merged);
    d.status.progress = None;
    d.status.finish_time = Some(d.now.to_rfc3339());
    run_rules::merged_message(&d.status.workers, result_cm)
}

/// The run's verdict on its merged result: `ThresholdsNotMet` when a limit of `thresholds`
/// is missed (the result is kept), else Succeeded. `msg`: what [`merged`] said.
pub(crate) fn verdict(
    d: &mut Draft,
    thresholds: &[crate::crd::thresholds::Threshold],
    merged: &Summary,
    msg: String,
    beside: Beside,
) {
    let missed = crate::thresholds::verdict(d, thresholds, merged, beside.checks);
    // A lifecycle's error first: the thresholds it leaves without figures would only hide it.
    if let Some((reason, why)) = beside.failure {
        d.fail(reason, format!("{msg}; control plane: {why}"));
        return;
    }
    if let Some(missed) = missed {
        d.fail(
            "ThresholdsNotMet",
            format!("{msg}; thresholds not met: {missed}"),
        );
        return;
    }
    let throughput = d.status.throughput.clone().unwrap_or_default();
    d.succeed(msg.clone(), format!("{msg}; {throughput}"));
}

/// What a control-plane section run beside the workers adds to the run's verdict (nothing
/// for a run without one).
#[derive(Clone, Debug, Default)]
pub(crate) struct Beside {
    /// Its thresholds, checked against its figures.
    pub(crate) checks: Vec<crate::crd::thresholds::ThresholdCheck>,
    /// Why it fails the run (reason, message), thresholds aside.
    pub(crate) failure: Option<(&'static str, String)>,
}

/// The persisted summaries do not merge (they will not on a later pass either): the run
/// fails saying which; the data stays.
pub(crate) fn merge_failed(d: &mut Draft, why: String) {
    d.fail("MergeFailed", why);
}

/// A worker's agent's answer to a pass.
pub(crate) enum Answer {
    /// No answer (not listening yet, or a network blip): asked again next pass.
    Unreachable(String),
    /// Where its agent is.
    Status(AgentStatus),
}

/// The ops and errors the agents reported, summed, when any answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Tally {
    pub(crate) answered: bool,
    pub(crate) ops: u64,
    pub(crate) errors: u64,
}

/// Apply the agents' answers: each worker's phase from its agent's stage. The progress so
/// far, and the workers whose summaries are to be collected (done, not collected yet).
pub(crate) fn from_agents(d: &mut Draft, answers: Vec<(usize, Answer)>) -> (Tally, Vec<usize>) {
    let mut tally = Tally::default();
    let mut collect = Vec::new();
    let mut silent = Vec::new();
    let asked = !answers.is_empty();
    for (i, answer) in answers {
        let status = match answer {
            Answer::Unreachable(e) => {
                tracing::debug!("worker {}: {e}", d.status.workers[i].name);
                let now = d.now;
                let w = &mut d.status.workers[i];
                let since = w
                    .unanswered_since
                    .as_deref()
                    .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(now);
                if w.unanswered_since.is_none() {
                    w.unanswered_since = Some(now.to_rfc3339());
                }
                let quiet = (now - since).to_std().unwrap_or_default();
                if quiet >= run_rules::AGENT_SILENCE {
                    silent.push(format!(
                        "{} (pod {}, node {}) for {}s: {e}",
                        w.name,
                        w.pod,
                        w.node.as_deref().unwrap_or("?"),
                        quiet.as_secs()
                    ));
                }
                continue;
            }
            Answer::Status(status) => status,
        };
        d.status.workers[i].unanswered_since = None;
        tally.answered = true;
        tally.ops += status.ops;
        tally.errors += status.errors;
        d.status.workers[i].phase = match status.stage {
            AgentStage::Preparing => WorkerPhase::Preparing,
            AgentStage::Ready => WorkerPhase::Ready,
            AgentStage::Running => WorkerPhase::Running,
            AgentStage::CleaningUp => WorkerPhase::Done,
            AgentStage::Done => {
                collect.push(i);
                WorkerPhase::Done
            }
            AgentStage::Failed => {
                let msg = status.error.clone().unwrap_or_else(|| "failed".into());
                d.worker_failed(i, "WorkerFailed", msg);
                continue;
            }
        };
    }
    agents_answering(d, asked, &silent);
    (tally, collect)
}

/// Say which agents have not answered for [`run_rules::AGENT_SILENCE`], and with what error (the
/// run does not fail for it: a cut that heals loses nothing); True again once all answer.
fn agents_answering(d: &mut Draft, asked: bool, silent: &[String]) {
    if !silent.is_empty() {
        let msg = format!(
            "agents not answering: {}",
            run_rules::bounded_list_by(silent, run_rules::DEAD_NAMED_AT_MOST, "; ")
        );
        d.condition(cond::AGENTS_ANSWERING, false, "AgentUnreachable", msg);
    } else if asked
        && run_rules::condition(&d.status.conditions, cond::AGENTS_ANSWERING)
            .is_some_and(|c| c.status == "False")
    {
        d.condition(
            cond::AGENTS_ANSWERING,
            true,
            "Answering",
            "every agent asked answers",
        );
    }
}

/// The nodes to read this pass: those of the live workers whose agents did not answer (an
/// answering agent is never lost, see [`crate::lost`]), each once.
pub(crate) fn nodes_to_read(d: &Draft) -> Vec<String> {
    let mut nodes: Vec<String> = d
        .status
        .workers
        .iter()
        .filter(|w| w.phase.is_live() && w.phase != WorkerPhase::Collected)
        .filter(|w| w.unanswered_since.is_some())
        .filter_map(|w| w.node.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// Mark lost the workers whose agents are silent on a node that is gone or NotReady past
/// [`crate::lost::NODE_LOST_AFTER`], or past the run's expected end and its grace (`nodes`:
/// the health of the nodes read this pass; a node that could not be read is judged by the
/// expected end alone). What happens to the run then is [`run_step`]'s: `Continue` merges
/// the others, `Abort` fails naming the lost worker and its node.
pub(crate) fn from_nodes(
    d: &mut Draft,
    spec: &BenchmarkRunSpec,
    nodes: &BTreeMap<String, crate::lost::NodeHealth>,
) {
    let end = d
        .status
        .start_time
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .and_then(|t| crate::lost::expected_end(spec, t.with_timezone(&Utc)));
    for i in 0..d.status.workers.len() {
        let w = &d.status.workers[i];
        if !w.phase.is_live() || w.phase == WorkerPhase::Collected {
            continue;
        }
        let node = w.node.as_ref().and_then(|n| nodes.get(n));
        if let Some(why) = crate::lost::lost_worker(w, node, end, d.now) {
            d.lose(i, &why);
        }
    }
}

/// What became of a worker's summary when the pass collected it.
pub(crate) enum Collected {
    /// Persisted in its result object (the summary itself dropped): count it.
    Persisted(WorkerFigures),
    /// Not to be had now (no answer, or the answer cut off mid-body): ask again on the next
    /// pass, up to [`SUMMARY_READS`] times in a row; the worker keeps it meanwhile.
    NotYet(String),
    /// Unusable (what it sent is kept, never counted): the worker has no result.
    Invalid(String),
    /// Fetched but not persisted: not counted, asked for again.
    PersistFailed(Error),
}

/// Reads of one worker's summary failing in a row on the network before the worker fails
/// (`SummaryUnreadable`): a pass apart each (seconds), so a reset or a blip costs nothing,
/// while a body that never gets through (each read cut by the call's timeout) is named
/// within a minute or so instead of at the run's deadline.
pub(crate) const SUMMARY_READS: u32 = 5;

/// What applying the collected outcomes leaves for the pass to do.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The first error persisting a summary (the pass reports it and the next asks again).
    pub(crate) error: Option<Error>,
    /// The workers given up on in this pass (`SummaryUnreadable`): their agents, still
    /// holding the summary that could not be read, are to be told to exit as every other
    /// failed worker's are (a worker whose summary was persisted or refused was told so by
    /// its collection).
    pub(crate) shut_down: Vec<usize>,
}

/// Apply what collecting gave, every outcome, then say what is left to do ([`Applied`]).
pub(crate) fn collected(d: &mut Draft, outcomes: Vec<(usize, Collected)>) -> Applied {
    let mut error = None;
    let mut shut_down = Vec::new();
    for (i, outcome) in outcomes {
        let name = d.status.workers[i].name.clone();
        match outcome {
            Collected::Persisted(figures) => {
                d.mark_collected(i, Some(&figures));
                let note = format!(
                    "collected worker {name}: {:.0} op/s, p99 {:.3}ms",
                    figures.ops_per_sec, figures.p99_ms
                );
                d.event(EventType::Normal, "Collected", note);
                // The result counts; only the worker's op-log is missing: say why, loudly.
                if let Some(why) = figures.oplog.as_ref().and_then(|o| o.error.as_ref()) {
                    let msg = format!("worker {name}: op-log not stored: {why}");
                    d.event(EventType::Warning, "OplogNotStored", msg);
                }
            }
            Collected::NotYet(e) => {
                let w = &mut d.status.workers[i];
                let failures = w.summary_read_failures.unwrap_or(0).saturating_add(1);
                w.summary_read_failures = Some(failures);
                if failures >= SUMMARY_READS {
                    let msg = format!(
                        "its summary could not be read in {failures} attempts, a pass apart: {e}"
                    );
                    d.worker_failed(i, "SummaryUnreadable", msg);
                    shut_down.push(i);
                } else {
                    tracing::debug!("summary of {name} (attempt {failures}): {e}");
                }
            }
            Collected::Invalid(message) => d.worker_failed(i, "InvalidSummary", message),
            Collected::PersistFailed(e) => {
                error.get_or_insert(e);
            }
        }
    }
    Applied { error, shut_down }
}

/// What the run does next (after [`run_step`] wrote its decision into the draft).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RunStep {
    /// Nothing to do this pass.
    Wait,
    /// The run failed: ask its workers to stop.
    Stop,
    /// Record this start time, then send it to every Ready worker.
    Start(DateTime<Utc>),
    /// Send the recorded start time to workers still waiting for it.
    Resend(DateTime<Utc>),
    /// Every live worker is collected: merge and finish.
    Complete,
}

/// Decide the run's next step from its workers: fail, start, progress, collect, complete.
pub(crate) fn run_step(
    d: &mut Draft,
    spec: &BenchmarkRunSpec,
    parallelism: usize,
    progress_interval: Duration,
    tally: Tally,
) -> RunStep {
    if d.status.phase.is_finished() {
        return RunStep::Stop;
    }
    if let Some((reason, which)) = run_rules::dead_workers(&d.status.workers) {
        d.condition(cond::LOST, true, reason, which);
    }
    let recorded = d
        .status
        .start_time
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    let step =
        match run_rules::next_step(&d.status.workers, spec.failure_policy, recorded.is_some()) {
            run_rules::Next::Fail { reason, message } => {
                d.fail(reason, message);
                return RunStep::Stop;
            }
            run_rules::Next::Start => match start_time(d, spec, parallelism) {
                Some(at) => RunStep::Start(at),
                None => return RunStep::Wait,
            },
            run_rules::Next::Complete => RunStep::Complete,
            run_rules::Next::Collecting => {
                d.set_phase(Phase::Collecting, "Collecting", "every worker has finished");
                RunStep::Wait
            }
            run_rules::Next::Wait => match recorded {
                Some(at) => RunStep::Resend(at),
                None => RunStep::Wait,
            },
        };
    if let Some(start) = recorded {
        progress(d, start, progress_interval, tally);
    }
    step
}

/// One start time for every live worker, recorded in the draft with the phase `Running`;
/// `None` when the delay is out of range (the run failed).
fn start_time(d: &mut Draft, spec: &BenchmarkRunSpec, parallelism: usize) -> Option<DateTime<Utc>> {
    let live = d
        .status
        .workers
        .iter()
        .filter(|w| run_rules::is_live(w))
        .count();
    let budget = run_rules::start_budget(live, parallelism);
    let delay = match spec.start_delay.map(|d| d.0) {
        Some(delay) => {
            if delay < budget {
                let msg = format!(
                    "startDelay {:.1}s is shorter than the {:.1}s that start requests to {live} workers need at {parallelism} in flight; the late workers start late (raise startDelay, or --worker-parallelism)",
                    delay.as_secs_f64(),
                    budget.as_secs_f64(),
                );
                d.condition(
                    cond::START_ON_TIME,
                    false,
                    "StartDelayTooShort",
                    msg.clone(),
                );
                d.event(EventType::Warning, "StartDelayTooShort", msg);
            }
            delay
        }
        None => run_rules::default_start_delay(live, parallelism),
    };
    // Bounded by validation; checked anyway, since a panic here would crash-loop the operator
    // on this run.
    let Some(at) = chrono::Duration::from_std(delay)
        .ok()
        .and_then(|delay| d.now.checked_add_signed(delay))
    else {
        d.fail(
            "InvalidWorkload",
            format!("spec.startDelay: {delay:?} is out of range"),
        );
        return None;
    };
    d.status.start_time = Some(at.to_rfc3339());
    d.condition(
        cond::READY,
        true,
        "AllReady",
        format!("{live} workers ready"),
    );
    d.set_phase(
        Phase::Running,
        "Starting",
        format!("{live} workers start at {}", at.to_rfc3339()),
    );
    Some(at)
}

/// `status.progress`, rewritten once per progress interval, not on every pass: each write is
/// a request to the API server of the cluster being measured.
fn progress(d: &mut Draft, start: DateTime<Utc>, interval: Duration, tally: Tally) {
    let elapsed = (d.now - start).num_milliseconds().max(0) as f64 / 1000.0;
    let due = d
        .status
        .progress
        .as_ref()
        .is_none_or(|p| elapsed - p.elapsed_seconds >= interval.as_secs_f64());
    if !tally.answered || elapsed <= 0.0 || !due {
        return;
    }
    let ops_per_sec = ((tally.ops as f64 / elapsed) * 10.0).round() / 10.0;
    d.status.throughput = Some(run_rules::throughput_text(ops_per_sec, None));
    d.status.progress = Some(Progress {
        elapsed_seconds: elapsed,
        ops: tally.ops,
        errors: tally.errors,
        ops_per_sec,
    });
}

/// A pass's error that the run must show rather than retry in silence: written into the
/// draft, with when to look again. `None` for errors that are retried (network, conflicts).
pub(crate) fn refusal(d: &mut Draft, e: &Error) -> Option<Action> {
    match e {
        Error::Rejected { what, message } => {
            // An object built from the run's spec is invalid: report it on the run, once.
            let msg = format!("the API server rejected {what}: {message}");
            d.condition(cond::VALID, false, "Rejected", msg.clone());
            d.fail("Rejected", msg);
        }
        Error::NotOurs { earlier_run, .. } => {
            // Never adopted. An earlier run's objects go with it (garbage collection): wait
            // for them, within the run's timeout; anything else is for the user to remove.
            let msg = format!("{e}");
            if *earlier_run {
                d.condition(cond::READY, false, "WaitingForEarlierRun", msg);
            } else {
                d.fail("NameTaken", format!("{msg}: delete or rename it"));
            }
        }
        _ => return None,
    }
    Some(Action::requeue(POLL))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BenchmarkRunStatus, FailurePolicy};
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};

    const SPEC: &str = r#"
workload:
  target: file:///data/bench
  duration: 5s
  ops: [{op: get}]
workers: {count: 2}
"#;

    fn spec() -> BenchmarkRunSpec {
        serde_yaml::from_str(SPEC).expect("spec")
    }

    /// `spec.workers.scheduleTimeout` by default.
    const SCHEDULE: std::time::Duration = crate::crd::DEFAULT_SCHEDULE_TIMEOUT;

    fn unschedulable_pod(name: &str, since: DateTime<Utc>) -> (String, Pod) {
        let pod = Pod {
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    message: Some("0/2 nodes are available: 2 Insufficient cpu.".into()),
                    last_transition_time: Some(run_rules::to_time(since)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        (name.to_string(), pod)
    }

    #[test]
    fn an_agent_silent_past_its_bound_is_named_with_its_error_and_cleared_when_it_answers() {
        let mut d = draft(&[WorkerPhase::Running, WorkerPhase::Running]);
        let cut = || Answer::Unreachable("connect timed out".into());
        // First silence: recorded, not said yet (a blip).
        from_agents(&mut d, vec![(0, cut()), (1, agent(AgentStage::Running, 5))]);
        assert_eq!(
            d.status.workers[0].unanswered_since,
            Some(now().to_rfc3339())
        );
        assert!(run_rules::condition(&d.status.conditions, cond::AGENTS_ANSWERING).is_none());
        // 30 s later, still silent: named, with the error.
        d.now = now() + chrono::Duration::seconds(30);
        from_agents(&mut d, vec![(0, cut()), (1, agent(AgentStage::Running, 9))]);
        let c = run_rules::condition(&d.status.conditions, cond::AGENTS_ANSWERING).expect("said");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "AgentUnreachable")
        );
        assert_eq!(
            c.message,
            "agents not answering: w0 (pod bench-w0, node ?) for 30s: connect timed out"
        );
        assert_eq!(
            d.status.workers[0].phase,
            WorkerPhase::Running,
            "not failed for it"
        );
        // It answers again: cleared.
        from_agents(&mut d, vec![(0, agent(AgentStage::Running, 7))]);
        assert_eq!(d.status.workers[0].unanswered_since, None);
        let c = run_rules::condition(&d.status.conditions, cond::AGENTS_ANSWERING).expect("said");
        assert_eq!(c.status, "True");
    }

    #[test]
    fn an_unschedulable_worker_waits_its_schedule_timeout_saying_what_the_scheduler_said() {
        let pods = BTreeMap::from([unschedulable_pod(
            "bench-w0",
            now() - chrono::Duration::seconds(90),
        )]);
        // 90 s of the default 300 s: waiting (an autoscaler takes minutes for a node).
        let mut d = draft(&[WorkerPhase::Pending]);
        from_pods(&mut d, &pods, BTreeMap::new(), SCHEDULE, &BTreeMap::new());
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Pending);
        let c = run_rules::condition(&d.status.conditions, cond::SCHEDULED).expect("condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "Unschedulable")
        );
        assert_eq!(
            c.message,
            "worker w0 (any node) cannot be scheduled: the scheduler says: 0/2 nodes are available: 2 Insufficient cpu. (waiting 90s of 300s, spec.workers.scheduleTimeout)"
        );
        // Past a 60 s timeout: failed, naming the field.
        let mut d = draft(&[WorkerPhase::Pending]);
        from_pods(
            &mut d,
            &pods,
            BTreeMap::new(),
            std::time::Duration::from_secs(60),
            &BTreeMap::new(),
        );
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Failed);
        let msg = d.status.workers[0].message.as_deref().unwrap_or_default();
        assert!(
            msg.ends_with("(for 60s, spec.workers.scheduleTimeout)"),
            "{msg}"
        );
    }

    #[test]
    fn a_scale_up_keeps_an_unschedulable_worker_waiting_past_its_timeout_and_a_refusal_ends_it() {
        // Unschedulable for 90 s, timeout 60 s: cluster-autoscaler is bringing up a node.
        let pods = BTreeMap::from([unschedulable_pod(
            "bench-w0",
            now() - chrono::Duration::seconds(90),
        )]);
        let timeout = std::time::Duration::from_secs(60);
        let up = BTreeMap::from([(
            "bench-w0".to_string(),
            ScaleUp::Triggered {
                by: "cluster-autoscaler",
                message: "pod triggered scale-up: [{pool 1->2 (max: 3)}]".into(),
            },
        )]);
        let mut d = draft(&[WorkerPhase::Pending]);
        from_pods(&mut d, &pods, BTreeMap::new(), timeout, &up);
        assert_eq!(
            d.status.workers[0].phase,
            WorkerPhase::Pending,
            "still waiting"
        );
        let c = run_rules::condition(&d.status.conditions, cond::SCHEDULED).expect("condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "WaitingForNode")
        );
        assert_eq!(
            c.message,
            "worker w0 (any node) is waiting for a node: cluster-autoscaler triggered a \
             scale-up: pod triggered scale-up: [{pool 1->2 (max: 3)}] (the scheduler says: 0/2 \
             nodes are available: 2 Insufficient cpu.; waiting 90s of 180s, 3 x \
             spec.workers.scheduleTimeout)"
        );
        // The autoscaler then says it cannot: the worker fails with its message.
        let no = BTreeMap::from([(
            "bench-w0".to_string(),
            ScaleUp::Refused("pod didn't trigger scale-up: 1 max node group size reached".into()),
        )]);
        let mut d = draft(&[WorkerPhase::Pending]);
        from_pods(&mut d, &pods, BTreeMap::new(), timeout, &no);
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Failed);
        let msg = d.status.workers[0].message.as_deref().unwrap_or_default();
        assert_eq!(
            msg,
            "worker w0 (any node) cannot be scheduled: cluster-autoscaler did not trigger a \
             scale-up: pod didn't trigger scale-up: 1 max node group size reached (for 60s, \
             spec.workers.scheduleTimeout; the scheduler says: 0/2 nodes are available: 2 \
             Insufficient cpu.)"
        );
    }

    #[test]
    fn answered_starts_run_their_workers_and_say_whether_they_came_in_time() {
        let at = now() + chrono::Duration::seconds(5);
        let mut d = draft(&[WorkerPhase::Ready, WorkerPhase::Ready]);
        let answered = now() + chrono::Duration::milliseconds(40);
        starts_answered(
            &mut d,
            at,
            now(),
            vec![
                (0, Ok(1.23456), answered),
                (1, Err("connection refused".into()), answered),
            ],
        );
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Running);
        assert_eq!(d.status.workers[0].clock_offset_ms, Some(1.235));
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Ready, "asked again");
        let c = run_rules::condition(&d.status.conditions, cond::START_ON_TIME).expect("said");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            (
                "True",
                "OnTime",
                "1 start requests answered in 40 ms, 4960 ms before the start time"
            )
        );
        let c = run_rules::condition(&d.status.conditions, cond::STARTED).expect("started");
        assert_eq!(
            c.message,
            format!("start time {} sent to the workers", at.to_rfc3339())
        );
        // The other answers after the start time: late, said and kept.
        let late = at + chrono::Duration::milliseconds(300);
        starts_answered(&mut d, at, now(), vec![(1, Ok(0.0), late)]);
        let c = run_rules::condition(&d.status.conditions, cond::START_ON_TIME).expect("said");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "StartedLate")
        );
        assert!(
            c.message.contains("300 ms after the start time"),
            "{}",
            c.message
        );
        starts_answered(&mut d, at, now(), vec![]);
        let c = run_rules::condition(&d.status.conditions, cond::START_ON_TIME).expect("said");
        assert_eq!(c.reason, "StartedLate", "a late start stays reported");
        // No worker accepted: not Started.
        let mut d = draft(&[WorkerPhase::Ready]);
        starts_answered(&mut d, at, now(), vec![(0, Err("reset".into()), answered)]);
        assert!(run_rules::condition(&d.status.conditions, cond::STARTED).is_none());
        assert!(run_rules::condition(&d.status.conditions, cond::START_ON_TIME).is_none());
    }

    #[test]
    fn the_verdict_succeeds_or_fails_on_thresholds_keeping_the_result() {
        let merged = Summary {
            target: "file:///data".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            elapsed_seconds: 10.0,
            ..Default::default()
        };
        let mut d = draft(&[WorkerPhase::Collected]);
        let msg = super::merged(&mut d, &merged, "bench-result");
        assert_eq!(d.status.finish_time, Some(now().to_rfc3339()));
        assert_eq!(d.status.progress, None);
        verdict(&mut d, &[], &merged, msg.clone(), Beside::default());
        assert_eq!(d.status.phase, Phase::Succeeded);
        let c = run_rules::condition(&d.status.conditions, cond::COMPLETE).expect("complete");
        assert_eq!(
            (c.status.as_str(), c.message.as_str()),
            ("True", msg.as_str())
        );

        let limits: Vec<crate::crd::thresholds::Threshold> =
            serde_yaml::from_str("[{op: all, minOpsPerSec: 1000}]").expect("thresholds");
        let mut d = draft(&[WorkerPhase::Collected]);
        let msg = super::merged(&mut d, &merged, "bench-result");
        verdict(&mut d, &limits, &merged, msg.clone(), Beside::default());
        assert_eq!(d.status.phase, Phase::Failed);
        let c = run_rules::condition(&d.status.conditions, cond::FAILED).expect("failed");
        assert_eq!(c.reason, "ThresholdsNotMet");
        assert!(d.status.finish_time.is_some(), "the result is kept");

        // A control-plane section beside the workers: its checks join the data plane's; a
        // lifecycle's error fails the run under its own reason, the checks still recorded.
        let cp_check = crate::crd::thresholds::ThresholdCheck {
            op: "provision".into(),
            limit: "maxP99".into(),
            want: "<= 1s".into(),
            got: "2000.000ms".into(),
            met: false,
        };
        let mut d = draft(&[WorkerPhase::Collected]);
        let msg = super::merged(&mut d, &merged, "bench-result");
        let beside = Beside {
            checks: vec![cp_check.clone()],
            failure: None,
        };
        verdict(&mut d, &[], &merged, msg.clone(), beside);
        assert_eq!(d.status.phase, Phase::Failed);
        assert_eq!(d.status.thresholds, vec![cp_check.clone()]);
        let c = run_rules::condition(&d.status.conditions, cond::FAILED).expect("failed");
        assert_eq!(c.reason, "ThresholdsNotMet");
        let mut d = draft(&[WorkerPhase::Collected]);
        let msg = super::merged(&mut d, &merged, "bench-result");
        let beside = Beside {
            checks: vec![cp_check.clone()],
            failure: Some(("ControlPlaneErrors", "1 of 4 lifecycles failed".into())),
        };
        verdict(&mut d, &[], &merged, msg.clone(), beside);
        let c = run_rules::condition(&d.status.conditions, cond::FAILED).expect("failed");
        assert_eq!(c.reason, "ControlPlaneErrors");
        assert!(c
            .message
            .ends_with("; control plane: 1 of 4 lifecycles failed"));
        assert_eq!(d.status.thresholds, vec![cp_check]);

        let mut d = draft(&[WorkerPhase::Collected]);
        merge_failed(&mut d, "w0: unknown format".into());
        assert_eq!(d.status.phase, Phase::Failed);
        let c = run_rules::condition(&d.status.conditions, cond::FAILED).expect("failed");
        assert_eq!(
            (c.reason.as_str(), c.message.as_str()),
            ("MergeFailed", "w0: unknown format")
        );
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-25T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
    }

    /// A draft with workers `w0`, `w1`... in these phases (pods `bench-w0`...).
    fn draft(phases: &[WorkerPhase]) -> Draft {
        let workers = phases
            .iter()
            .enumerate()
            .map(|(i, &phase)| WorkerStatus {
                name: format!("w{i}"),
                pod: format!("bench-w{i}"),
                phase,
                ..Default::default()
            })
            .collect();
        let status = BenchmarkRunStatus {
            phase: Phase::Preparing,
            workers,
            ..Default::default()
        };
        Draft::new(status, Some(1), now())
    }

    fn running_pod(name: &str, ip: &str, node: &str) -> (String, Pod) {
        let pod = Pod {
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        (name.to_string(), pod)
    }

    fn agent(stage: AgentStage, ops: u64) -> Answer {
        Answer::Status(AgentStatus {
            worker_id: "w".into(),
            stage,
            error: (stage == AgentStage::Failed).then(|| "disk full".to_string()),
            start_at: None,
            started_at: None,
            ops,
            bytes: 0,
            errors: 1,
            worker_time: now(),
            summary_fetched: false,
            seconds: None,
            stop_at: None,
        })
    }

    fn figures() -> WorkerFigures {
        WorkerFigures {
            ops_per_sec: 10.0,
            p99_ms: 2.5,
            errors: 0,
            started_at: now().to_rfc3339(),
            oplog: None,
        }
    }

    #[test]
    fn running_pods_are_asked_and_their_nodes_recorded() {
        let mut d = draft(&[WorkerPhase::Pending, WorkerPhase::Pending]);
        let pods = BTreeMap::from([running_pod("bench-w1", "10.0.0.7", "node-b")]);
        let ask = from_pods(&mut d, &pods, BTreeMap::new(), SCHEDULE, &BTreeMap::new());
        assert_eq!(ask, vec![(1, "10.0.0.7".to_string())]);
        assert_eq!(d.status.workers[1].node.as_deref(), Some("node-b"));
        // w0 has no pod yet, before the start: it stays pending, to be created.
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Pending);
    }

    #[test]
    fn a_pod_gone_before_the_start_is_recreated_and_after_it_is_lost() {
        let mut d = draft(&[WorkerPhase::Ready]);
        d.status.workers[0].unanswered_since = Some(now().to_rfc3339());
        assert!(from_pods(
            &mut d,
            &BTreeMap::new(),
            BTreeMap::new(),
            SCHEDULE,
            &BTreeMap::new()
        )
        .is_empty());
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Pending);
        assert_eq!(d.status.workers[0].unanswered_since, None);

        let mut d = draft(&[WorkerPhase::Running]);
        d.status.start_time = Some(now().to_rfc3339());
        from_pods(
            &mut d,
            &BTreeMap::new(),
            BTreeMap::new(),
            SCHEDULE,
            &BTreeMap::new(),
        );
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Lost);
        assert_eq!(d.events.len(), 1, "{:?}", d.events);
        assert_eq!(d.events[0].1, "WorkerLost");
    }

    #[test]
    fn a_summary_persisted_by_an_earlier_pass_counts_without_asking() {
        let mut d = draft(&[WorkerPhase::Done]);
        d.status.start_time = Some(now().to_rfc3339());
        let pods = BTreeMap::from([running_pod("bench-w0", "10.0.0.7", "node-a")]);
        let persisted = BTreeMap::from([("w0".to_string(), Some(figures()))]);
        assert!(from_pods(&mut d, &pods, persisted, SCHEDULE, &BTreeMap::new()).is_empty());
        let w = &d.status.workers[0];
        assert_eq!(w.phase, WorkerPhase::Collected);
        assert_eq!(w.p99_ms, Some(2.5));
    }

    #[test]
    fn agents_set_phases_and_finished_ones_are_collected() {
        let mut d = draft(&[
            WorkerPhase::Ready,
            WorkerPhase::Running,
            WorkerPhase::Running,
        ]);
        let answers = vec![
            (0, agent(AgentStage::Running, 5)),
            (1, agent(AgentStage::Done, 7)),
            (2, agent(AgentStage::Failed, 0)),
        ];
        let (tally, collect) = from_agents(&mut d, answers);
        assert_eq!(collect, vec![1]);
        assert_eq!(
            tally,
            Tally {
                answered: true,
                ops: 12,
                errors: 3
            }
        );
        let phases: Vec<_> = d.status.workers.iter().map(|w| w.phase).collect();
        assert_eq!(
            phases,
            [WorkerPhase::Running, WorkerPhase::Done, WorkerPhase::Failed]
        );
        assert_eq!(d.status.workers[2].message.as_deref(), Some("disk full"));
    }

    #[test]
    fn a_summary_that_could_not_be_persisted_does_not_count() {
        let mut d = draft(&[WorkerPhase::Done, WorkerPhase::Done]);
        let outcomes = vec![
            (0, Collected::Persisted(figures())),
            (
                1,
                Collected::PersistFailed(Error::Invalid("conflict".into())),
            ),
        ];
        let err = collected(&mut d, outcomes).error;
        assert!(matches!(err, Some(Error::Invalid(_))));
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Collected);
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Done);
    }

    #[test]
    fn a_summary_cut_off_is_asked_again_and_collected_and_one_never_read_fails_bounded() {
        let reset = || {
            Collected::NotYet(
                "http://10.0.0.7:8080: reading summary: connection reset by peer".into(),
            )
        };
        // Cut off once: not failed, asked again; the next pass collects it.
        let mut d = draft(&[WorkerPhase::Done]);
        assert!(collected(&mut d, vec![(0, reset())]).error.is_none());
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Done);
        assert_eq!(d.status.workers[0].summary_read_failures, Some(1));
        assert!(
            collected(&mut d, vec![(0, Collected::Persisted(figures()))])
                .error
                .is_none()
        );
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Collected);
        assert_eq!(d.status.workers[0].summary_read_failures, None);
        // Cut off on every pass: failed on the bound's pass, naming the last error.
        let mut d = draft(&[WorkerPhase::Done]);
        for _ in 1..SUMMARY_READS {
            let applied = collected(&mut d, vec![(0, reset())]);
            assert_eq!(d.status.workers[0].phase, WorkerPhase::Done);
            assert!(applied.shut_down.is_empty(), "still asked: {applied:?}");
        }
        // Given up on: failed, and its agent told to exit like any failed worker's.
        let applied = collected(&mut d, vec![(0, reset())]);
        assert_eq!(applied.shut_down, vec![0]);
        let w = &d.status.workers[0];
        assert_eq!(w.phase, WorkerPhase::Failed);
        assert_eq!(
            w.message.as_deref(),
            Some("its summary could not be read in 5 attempts, a pass apart: http://10.0.0.7:8080: reading summary: connection reset by peer")
        );
        assert!(d
            .events
            .iter()
            .any(|(_, reason, _)| reason == "SummaryUnreadable"));
        // An invalid body fails at once.
        let mut d = draft(&[WorkerPhase::Done]);
        collected(
            &mut d,
            vec![(0, Collected::Invalid("not a summary".into()))],
        );
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Failed);
    }

    #[test]
    fn a_failed_oplog_upload_keeps_the_result_and_warns() {
        let mut d = draft(&[WorkerPhase::Done]);
        let mut f = figures();
        f.oplog = Some(crate::crd::oplog::WorkerOplog {
            uri: None,
            records: 40,
            dropped: 0,
            error: Some("uploading to s3://b/o/r/w0.oplog.gz: HTTP 403".into()),
        });
        assert!(collected(&mut d, vec![(0, Collected::Persisted(f))])
            .error
            .is_none());
        let w = &d.status.workers[0];
        assert_eq!(w.phase, WorkerPhase::Collected);
        assert_eq!(w.oplog.as_ref().map(|o| o.records), Some(40));
        assert!(
            d.events
                .iter()
                .any(|(t, reason, msg)| *t == EventType::Warning
                    && reason == "OplogNotStored"
                    && msg.ends_with(
                        "op-log not stored: uploading to s3://b/o/r/w0.oplog.gz: HTTP 403"
                    )),
            "{:?}",
            d.events
        );
    }

    #[test]
    fn every_live_worker_ready_gives_one_start_time() {
        let mut d = draft(&[WorkerPhase::Ready, WorkerPhase::Ready]);
        let step = run_step(
            &mut d,
            &spec(),
            64,
            Duration::from_secs(5),
            Tally::default(),
        );
        let at = now() + chrono::Duration::seconds(5);
        assert_eq!(step, RunStep::Start(at));
        assert_eq!(d.status.phase, Phase::Running);
        assert_eq!(d.status.start_time, Some(at.to_rfc3339()));
        // Recorded: the next pass resends it instead of choosing another.
        let mut later = Draft::new(d.status.clone(), Some(1), now());
        later.status.workers[1].phase = WorkerPhase::Running;
        let step = run_step(
            &mut later,
            &spec(),
            64,
            Duration::from_secs(5),
            Tally::default(),
        );
        assert_eq!(step, RunStep::Resend(at));
    }

    #[test]
    fn a_lost_worker_fails_an_aborting_run_and_stops_the_rest() {
        let mut d = draft(&[WorkerPhase::Running, WorkerPhase::Lost]);
        d.status.start_time = Some(now().to_rfc3339());
        let mut s = spec();
        s.failure_policy = FailurePolicy::Abort;
        assert_eq!(
            run_step(&mut d, &s, 64, Duration::from_secs(5), Tally::default()),
            RunStep::Stop
        );
        assert_eq!(d.status.phase, Phase::Failed);
        assert!(run_rules::condition(&d.status.conditions, cond::LOST).is_some());
    }

    #[test]
    fn progress_is_written_once_per_interval() {
        let start = now() - chrono::Duration::seconds(10);
        let mut d = draft(&[WorkerPhase::Running]);
        d.status.start_time = Some(start.to_rfc3339());
        let tally = Tally {
            answered: true,
            ops: 1000,
            errors: 0,
        };
        run_step(&mut d, &spec(), 64, Duration::from_secs(5), tally);
        let p = d.status.progress.clone().expect("progress");
        assert_eq!((p.elapsed_seconds, p.ops_per_sec), (10.0, 100.0));
        // Two seconds later: within the interval, unchanged.
        let mut d = Draft::new(d.status, Some(1), now() + chrono::Duration::seconds(2));
        let more = Tally { ops: 5000, ..tally };
        run_step(&mut d, &spec(), 64, Duration::from_secs(5), more);
        assert_eq!(d.status.progress, Some(p));
    }

    #[test]
    fn every_live_worker_collected_completes() {
        let mut d = draft(&[WorkerPhase::Collected, WorkerPhase::Failed]);
        d.status.start_time = Some(now().to_rfc3339());
        let mut s = spec();
        s.failure_policy = FailurePolicy::Continue;
        let step = run_step(&mut d, &s, 64, Duration::from_secs(5), Tally::default());
        assert_eq!(step, RunStep::Complete);
        assert!(run_rules::condition(&d.status.conditions, cond::LOST).is_some());
    }

    /// w0 collected, w1 running on `vm2` whose agent has not answered for 5 s; the run
    /// started a minute ago.
    fn one_silent_on_vm2() -> Draft {
        let mut d = draft(&[WorkerPhase::Collected, WorkerPhase::Running]);
        d.status.phase = Phase::Running;
        d.status.start_time = Some((now() - chrono::Duration::seconds(60)).to_rfc3339());
        d.status.workers[0].node = Some("vm".into());
        d.status.workers[1].node = Some("vm2".into());
        d.status.workers[1].unanswered_since =
            Some((now() - chrono::Duration::seconds(5)).to_rfc3339());
        d
    }

    fn vm2_not_ready_for(secs: i64) -> BTreeMap<String, crate::lost::NodeHealth> {
        BTreeMap::from([(
            "vm2".to_string(),
            crate::lost::NodeHealth::NotReady {
                status: "Unknown".into(),
                since: now() - chrono::Duration::seconds(secs),
                message: "Kubelet stopped posting node status.".into(),
            },
        )])
    }

    #[test]
    fn only_the_nodes_of_silent_workers_are_read() {
        let mut d = one_silent_on_vm2();
        assert_eq!(nodes_to_read(&d), vec!["vm2".to_string()]);
        d.status.workers[1].unanswered_since = None;
        assert!(nodes_to_read(&d).is_empty());
    }

    #[test]
    fn a_worker_on_a_lost_node_is_lost_and_continue_merges_the_others() {
        let mut s = spec();
        s.failure_policy = FailurePolicy::Continue;
        // NotReady for 20 s: still waited for.
        let mut d = one_silent_on_vm2();
        from_nodes(&mut d, &s, &vm2_not_ready_for(20));
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Running);
        // For 45 s: lost, and the run completes with the collected worker.
        from_nodes(&mut d, &s, &vm2_not_ready_for(45));
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Lost);
        let step = run_step(&mut d, &s, 64, Duration::from_secs(5), Tally::default());
        assert_eq!(step, RunStep::Complete);
        let lost = run_rules::condition(&d.status.conditions, cond::LOST).expect("WorkersLost");
        assert_eq!(lost.reason, "WorkerLost");
        assert!(
            lost.message.starts_with(
                "w1 (pod bench-w1, node vm2): its node vm2 is NotReady (Ready=Unknown for 45s"
            ),
            "{}",
            lost.message
        );
    }

    #[test]
    fn a_worker_on_a_lost_node_fails_an_aborting_run_naming_it_and_its_node() {
        let mut s = spec();
        s.failure_policy = FailurePolicy::Abort;
        let mut d = one_silent_on_vm2();
        from_nodes(&mut d, &s, &vm2_not_ready_for(45));
        let step = run_step(&mut d, &s, 64, Duration::from_secs(5), Tally::default());
        assert_eq!(step, RunStep::Stop);
        assert_eq!(d.status.phase, Phase::Failed);
        let c = run_rules::condition(&d.status.conditions, cond::COMPLETE).expect("Complete");
        assert_eq!(c.reason, "WorkerLost");
        assert!(
            c.message.contains("w1 (pod bench-w1, node vm2)"),
            "{}",
            c.message
        );
    }

    #[test]
    fn a_silent_agent_past_the_runs_end_is_lost_even_on_a_ready_node() {
        let s = spec(); // duration 5s
        let mut d = one_silent_on_vm2();
        // Silent 5 s, 55 s past the end: waited for (the grace is 120 s).
        from_nodes(&mut d, &s, &BTreeMap::new());
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Running);
        // Three minutes later, still silent: lost, with no node read at all.
        d.now = now() + chrono::Duration::seconds(180);
        from_nodes(&mut d, &s, &BTreeMap::new());
        assert_eq!(d.status.workers[1].phase, WorkerPhase::Lost);
        let msg = d.status.workers[1].message.as_deref().unwrap_or_default();
        assert!(
            msg.contains("the run should have ended 235s ago (node vm2)"),
            "{msg}"
        );
        // A collected worker is never judged again.
        assert_eq!(d.status.workers[0].phase, WorkerPhase::Collected);
    }

    #[test]
    fn a_rejected_child_fails_the_run_and_an_earlier_runs_object_is_waited_for() {
        let mut d = draft(&[WorkerPhase::Pending]);
        let e = Error::Rejected {
            what: "PersistentVolumeClaim bench-w0".into(),
            message: "quantities must match".into(),
        };
        assert!(refusal(&mut d, &e).is_some());
        assert_eq!(d.status.phase, Phase::Failed);
        let valid = run_rules::condition(&d.status.conditions, cond::VALID).expect("Valid");
        assert!(valid.message.contains("quantities must match"), "{valid:?}");

        let mut d = draft(&[WorkerPhase::Pending]);
        let e = Error::NotOurs {
            what: "ConfigMap bench-workload".into(),
            owner: "the earlier run's".into(),
            earlier_run: true,
        };
        assert!(refusal(&mut d, &e).is_some());
        assert_eq!(d.status.phase, Phase::Preparing);
        let ready = run_rules::condition(&d.status.conditions, cond::READY).expect("WorkersReady");
        assert_eq!(ready.reason, "WaitingForEarlierRun");
        // Anything else is retried, not shown.
        assert!(refusal(&mut d, &Error::Invalid("network".into())).is_none());
    }

    #[test]
    fn a_run_past_its_deadline_fails_and_stops() {
        let mut run = BenchmarkRun::new("bench", spec());
        let created = now() - chrono::Duration::hours(48);
        run.metadata.creation_timestamp = Some(run_rules::to_time(created));
        let mut d = draft(&[WorkerPhase::Running]);
        d.status.phase = Phase::Running;
        d.status.worker_phases = [("Running".to_string(), 2), ("Pending".to_string(), 1)].into();
        assert_eq!(admit(&mut d, &run, None), Admission::TimedOut);
        assert_eq!(d.status.phase, Phase::Failed);
        // The message names the setting that gave the limit and where the run stalled.
        let failed = |d: &Draft| {
            run_rules::condition(&d.status.conditions, cond::FAILED)
                .expect("Failed condition")
                .message
                .clone()
        };
        let msg = failed(&d);
        assert!(msg.contains("spec.timeout unset"), "{msg}");
        assert!(msg.contains("stalled in phase Running"), "{msg}");
        assert!(msg.contains("1 Pending, 2 Running"), "{msg}");
        let mut timed = run.clone();
        timed.spec.timeout = Some(benchrun_api::units::HumanDuration(Duration::from_secs(90)));
        let mut d = draft(&[WorkerPhase::Running]);
        d.status.phase = Phase::Preparing;
        assert_eq!(admit(&mut d, &timed, None), Admission::TimedOut);
        let msg = failed(&d);
        assert!(
            msg.contains("within spec.timeout (90s): stalled in phase Preparing"),
            "{msg}"
        );
        let mut d = draft(&[WorkerPhase::Running]);
        let problems = Some(("InvalidWorkload", vec!["spec.x: bad".to_string()]));
        assert_eq!(admit(&mut d, &run, problems), Admission::Refused);
        let valid = run_rules::condition(&d.status.conditions, cond::VALID).expect("Valid");
        assert_eq!(
            (valid.status.as_str(), valid.message.as_str()),
            ("False", "spec.x: bad")
        );
    }
}
