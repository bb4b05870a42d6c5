//! The rules a pass decides by, pure: what a worker pod's status means, the run's next step,
//! the start's budget and skew, the conditions' types and how they are set, the figures the
//! status shows. No API server, no network, so unit tests cover them.

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_api::stats::OpStats;
use benchrun_api::Summary;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::crd::{OpReport, WorkerPhase, WorkerStatus};

/// Condition types.
pub mod cond {
    /// Every start request was answered before the common start time (False: raise
    /// `startDelay`; the skew then includes the late workers).
    pub const START_ON_TIME: &str = "StartRequestsOnTime";
    /// The spec is valid and within policy.
    pub const VALID: &str = "Valid";
    /// Every worker pod is scheduled.
    pub const SCHEDULED: &str = "WorkersScheduled";
    /// Every live worker is ready for the start.
    pub const READY: &str = "WorkersReady";
    /// The start time was sent to the workers.
    pub const STARTED: &str = "Started";
    /// The run finished: True with a result, False when it failed.
    pub const COMPLETE: &str = "Complete";
    /// The run failed: True with the failure's reason; False (`Succeeded`) when it succeeded.
    /// Absent while it runs. `kubectl wait --for=condition=Failed` ends on a failure.
    pub const FAILED: &str = "Failed";
    /// Some workers were lost or failed.
    pub const LOST: &str = "WorkersLost";
    /// True (`PodsDeleted`) once the cleanup policy deleted the worker pods; False
    /// (`PodsKept`) when the policy keeps them, False (`WaitingForWorkers`) while the pods
    /// wait for their workers to remove what they created.
    pub const CLEANED_UP: &str = "CleanedUp";
    /// True when the cleanup bound ([`crate::worker_cleanup::CLEANUP_BOUND`]) cut workers'
    /// removal of what they created short: names them and the prefixes they write under.
    pub const CLEANUP_ABANDONED: &str = "CleanupAbandoned";
    /// Every asked agent answers; False naming those that have not for
    /// [`AGENT_SILENCE`](super::AGENT_SILENCE) and their last error.
    pub const AGENTS_ANSWERING: &str = "AgentsAnswering";
    /// Every limit of `spec.thresholds` is met.
    pub const THRESHOLDS_MET: &str = "ThresholdsMet";
    /// The result regressed against `spec.baselineRef`.
    pub const REGRESSED: &str = "Regressed";
}

/// How long a worker's agent may not answer before the run says so (a NetworkPolicy, a
/// partitioned node, a hung process): well within a minute, well above a pass's blip.
pub const AGENT_SILENCE: Duration = Duration::from_secs(30);

/// What a worker pod's status means for the run.
#[derive(Clone, Debug, PartialEq)]
pub enum PodView {
    /// No such pod.
    Missing,
    /// Being deleted.
    Terminating,
    /// Waiting; with the scheduler's reason when it cannot place the pod.
    Pending {
        /// The scheduler's message and since when, if it cannot place the pod.
        unschedulable: Option<(String, Option<DateTime<Utc>>)>,
    },
    /// The kubelet cannot build the container: missing Secret or ConfigMap key, bad image...
    ConfigError(String),
    /// Running; the agent answers on this IP.
    Running {
        /// The pod's IP, once it has one.
        ip: Option<String>,
    },
    /// Exited 0.
    Succeeded,
    /// Stopped from outside (evicted, OOM-killed, node shut down): whatever the worker measured
    /// is gone. The kubelet's reason and message, and the worker's own termination message.
    Lost(String),
    /// Exited non-zero or was evicted; the termination message when there is one.
    Failed(String),
}

/// The IP a pod's agent answers on, once it has one: the one lookup every call to an agent
/// goes through.
pub fn pod_ip(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.pod_ip.as_deref()
}

/// Classify a worker pod (pure).
pub fn classify_pod(pod: Option<&Pod>) -> PodView {
    let Some(pod) = pod else {
        return PodView::Missing;
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return PodView::Terminating;
    }
    let Some(status) = pod.status.as_ref() else {
        return PodView::Pending {
            unschedulable: None,
        };
    };
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == crate::resources::CONTAINER);
    match status.phase.as_deref() {
        Some("Running") => PodView::Running {
            ip: pod_ip(pod).map(str::to_string),
        },
        Some("Succeeded") => PodView::Succeeded,
        Some("Failed") => {
            let term = container
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.as_ref());
            // The kubelet's reason for the whole pod (Evicted, Shutdown, ...), or an OOM kill
            // of the worker's container: the worker did not fail on its own, it was stopped.
            let stopped = status
                .reason
                .as_deref()
                .filter(|r| !r.is_empty())
                .map(|r| (r, status.message.as_deref().unwrap_or_default()))
                .or_else(|| {
                    term.and_then(|t| t.reason.as_deref())
                        .filter(|r| *r == "OOMKilled")
                        .map(|r| (r, "the worker exceeded its memory limit"))
                });
            if let Some((reason, message)) = stopped {
                let mut why = format!("{reason}: {}", message.trim());
                if let Some(own) = term
                    .and_then(|t| t.message.as_deref())
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                {
                    why.push_str(&format!(" (worker: {own})"));
                }
                return PodView::Lost(why);
            }
            let msg = term
                .and_then(|t| t.message.clone())
                .filter(|m| !m.trim().is_empty())
                .or_else(|| status.message.clone())
                .or_else(|| term.map(|t| format!("exited with code {}", t.exit_code)))
                .unwrap_or_else(|| "pod failed".into());
            PodView::Failed(msg.trim().to_string())
        }
        _ => {
            if let Some(w) = container
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
            {
                let reason = w.reason.as_deref().unwrap_or_default();
                let message = w.message.as_deref().unwrap_or("no message");
                if matches!(
                    reason,
                    "CreateContainerConfigError" | "CreateContainerError"
                ) {
                    return PodView::ConfigError(format!("{reason}: {message}"));
                }
                // An image that cannot be had: a mistyped tag, a private registry without its
                // pull secret. Retrying (ImagePullBackOff) rarely helps and would leave the run
                // Preparing until its deadline; say which image and what the kubelet said.
                if matches!(
                    reason,
                    "InvalidImageName" | "ErrImageNeverPull" | "ErrImagePull" | "ImagePullBackOff"
                ) {
                    let image = container.map(|c| c.image.as_str()).unwrap_or("?");
                    return PodView::ConfigError(format!("{reason}: image {image}: {message}"));
                }
            }
            let unschedulable = status.conditions.iter().flatten().find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            });
            PodView::Pending {
                unschedulable: unschedulable.map(|c| {
                    (
                        c.message.clone().unwrap_or_else(|| "unschedulable".into()),
                        c.last_transition_time.as_ref().map(from_time),
                    )
                }),
            }
        }
    }
}

/// k8s-openapi's time (jiff) from chrono, at microsecond precision.
pub fn to_time(t: DateTime<Utc>) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_microsecond(t.timestamp_micros()).unwrap_or_default())
}

/// An RFC 3339 time of the status (`startTime`, `finishTime`), if it parses.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// chrono from k8s-openapi's time.
pub fn from_time(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.0.as_microsecond()).unwrap_or_default()
}

/// Set a condition, keeping `lastTransitionTime` when the status does not change.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) {
    let status = if status { "True" } else { "False" };
    set_condition_status(conds, type_, status, reason, message, generation, now);
}

/// [`set_condition`] with the status as Kubernetes writes it (`True`, `False`, `Unknown`).
pub fn set_condition_status(
    conds: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: DateTime<Utc>,
) {
    let status = status.to_string();
    let message = message.into();
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = to_time(now);
            }
            c.status = status;
            c.reason = reason.into();
            c.message = message;
            c.observed_generation = generation;
        }
        None => conds.push(Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time: to_time(now),
        }),
    }
}

/// The condition of this type, if set.
pub fn condition<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// The worker's clock minus ours, assuming the request reached it halfway through the round
/// trip (NTP's estimate).
pub fn clock_offset_ms(
    sent: DateTime<Utc>,
    received: DateTime<Utc>,
    worker_time: DateTime<Utc>,
) -> f64 {
    let mid = sent + (received - sent) / 2;
    (worker_time - mid).num_microseconds().unwrap_or(0) as f64 / 1000.0
}

/// Spread of the workers' actual starts on the operator's clock (each corrected by its offset).
pub fn start_skew_ms(workers: &[WorkerStatus]) -> Option<f64> {
    let starts: Vec<f64> = workers
        .iter()
        .filter_map(|w| {
            let at = DateTime::parse_from_rfc3339(w.started_at.as_deref()?).ok()?;
            let ms = at.timestamp_micros() as f64 / 1000.0;
            Some(ms - w.clock_offset_ms.unwrap_or(0.0))
        })
        .collect();
    if starts.is_empty() {
        return None;
    }
    let max = starts.iter().cloned().fold(f64::MIN, f64::max);
    let min = starts.iter().cloned().fold(f64::MAX, f64::min);
    Some(((max - min) * 1000.0).round() / 1000.0)
}

/// Per-op results plus `all`, computed from the (merged) histograms.
pub fn op_results(summary: &Summary) -> BTreeMap<String, OpReport> {
    let mut out: BTreeMap<String, OpReport> = summary
        .ops
        .iter()
        .map(|(op, stats)| (op.to_string(), op_result(stats, summary.elapsed_seconds)))
        .collect();
    out.insert(
        "all".into(),
        op_result(&summary.total(), summary.elapsed_seconds),
    );
    out
}

/// Per-endpoint results (all ops at each `storage.endpoints` URL), computed from the merged
/// histograms like [`op_results`]; empty when the run had fewer than two endpoints, where
/// they would only repeat the row of all ops.
pub fn endpoint_results(summary: &Summary) -> BTreeMap<String, OpReport> {
    if summary.endpoints.len() < 2 {
        return BTreeMap::new();
    }
    summary
        .endpoints
        .iter()
        .map(|(url, stats)| (url.clone(), op_result(stats, summary.elapsed_seconds)))
        .collect()
}

fn op_result(stats: &OpStats, elapsed: f64) -> OpReport {
    let mut r = stats.report(elapsed);
    r.ops_per_sec = round2(r.ops_per_sec);
    r.mib_per_sec = round2(r.mib_per_sec);
    r
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `n/total` for the printer column: workers past the given phases.
pub fn workers_summary(workers: &[WorkerStatus]) -> String {
    use WorkerPhase::*;
    let live: Vec<_> = workers.iter().filter(|w| w.phase.is_live()).collect();
    let ok = live
        .iter()
        .filter(|w| matches!(w.phase, Ready | Running | Done | Collected))
        .count();
    let lost = workers.len() - live.len();
    if lost > 0 {
        format!("{ok}/{} ({lost} lost)", workers.len())
    } else {
        format!("{ok}/{}", workers.len())
    }
}

/// How many workers are in each phase.
pub fn phase_counts(workers: &[WorkerStatus]) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for w in workers {
        *out.entry(w.phase.as_str().to_string()).or_insert(0) += 1;
    }
    out
}

/// Start requests sent at once per wave are answered within this on a healthy network (a
/// local round trip is a few milliseconds; this leaves room for a loaded API-server node).
pub const START_WAVE_BUDGET: Duration = Duration::from_millis(200);
/// Fixed part of the start budget: writing the start time to the status before sending.
pub const START_BASE_BUDGET: Duration = Duration::from_secs(1);
/// Default `startDelay` for small fleets.
pub const DEFAULT_START_DELAY: Duration = Duration::from_secs(5);

/// Time the start requests to `workers` need at `parallelism` requests in flight: the status
/// write plus one wave budget per `parallelism` workers.
pub fn start_budget(workers: usize, parallelism: usize) -> Duration {
    let waves = workers.div_ceil(parallelism.max(1)) as u32;
    START_BASE_BUDGET + START_WAVE_BUDGET * waves
}

/// `startDelay` when the run sets none: 5 s, or twice the start budget for large fleets, so
/// that the last start request still arrives before the common start time.
pub fn default_start_delay(workers: usize, parallelism: usize) -> Duration {
    DEFAULT_START_DELAY.max(start_budget(workers, parallelism) * 2)
}

/// `1234 op/s, 56.7 MiB/s` for the printer column.
pub fn throughput_text(ops_per_sec: f64, mib_per_sec: Option<f64>) -> String {
    match mib_per_sec {
        Some(m) if m > 0.0 => format!("{ops_per_sec:.0} op/s, {m:.1} MiB/s"),
        _ => format!("{ops_per_sec:.0} op/s"),
    }
}

/// Whether a worker still counts for the run.
pub fn is_live(w: &WorkerStatus) -> bool {
    w.phase.is_live()
}

/// What the run does next, given its workers (the state machine's core, pure).
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Fail the run with this reason and message.
    Fail {
        /// The condition and event reason.
        reason: &'static str,
        /// Why, for people.
        message: String,
    },
    /// Every live worker is ready and no start time was given yet: give one.
    Start,
    /// Every live worker is collected: merge and succeed.
    Complete,
    /// Every live worker has finished; some summaries are still to be fetched.
    Collecting,
    /// Nothing to decide yet.
    Wait,
}

/// Workers named at most in the WorkersLost message.
pub const DEAD_NAMED_AT_MOST: usize = 10;
/// Characters of one worker's message kept in a run-level message.
const WORKER_MESSAGE_CHARS: usize = 200;

/// `msg` cut to [`WORKER_MESSAGE_CHARS`] characters (marked when cut).
fn clip_message(msg: &str) -> String {
    match msg.char_indices().nth(WORKER_MESSAGE_CHARS) {
        Some((i, _)) => format!("{}...", &msg[..i]),
        None => msg.to_string(),
    }
}

/// `a, b, c and 7 more`: at most `at_most` items named, the rest counted.
pub fn bounded_list(items: &[String], at_most: usize) -> String {
    bounded_list_by(items, at_most, ", ")
}

/// [`bounded_list`] with another separator.
pub fn bounded_list_by(items: &[String], at_most: usize, sep: &str) -> String {
    let named = items[..items.len().min(at_most)].join(sep);
    match items.len().saturating_sub(at_most) {
        0 => named,
        more => format!("{named}{sep}and {more} more"),
    }
}

/// Failed or lost workers as (reason, "w1 (pod p, node n): why; ..."), for the WorkersLost
/// condition; `None` when every worker is fine.
pub fn dead_workers(workers: &[WorkerStatus]) -> Option<(&'static str, String)> {
    let dead: Vec<_> = workers.iter().filter(|w| !is_live(w)).collect();
    if dead.is_empty() {
        return None;
    }
    let which: Vec<_> = dead
        .iter()
        .map(|w| {
            format!(
                "{} (pod {}, node {}): {}",
                w.name,
                w.pod,
                w.node.as_deref().unwrap_or("?"),
                clip_message(w.message.as_deref().unwrap_or("lost"))
            )
        })
        .collect();
    // Bounded: a condition message of every worker of a 1,000-worker run would not fit the
    // status (and nobody reads it); the rest are counted, each is in status.workers.
    let which = bounded_list_by(&which, DEAD_NAMED_AT_MOST, "; ");
    let reason = if dead.iter().any(|w| w.phase == WorkerPhase::Lost) {
        "WorkerLost"
    } else {
        "WorkerFailed"
    };
    Some((reason, which))
}

/// What the `Complete` condition says of a merged run: how many workers were merged into
/// ConfigMap `cm`, and which were lost or failed (bounded to [`DEAD_NAMED_AT_MOST`] names:
/// a 1,000-worker run may lose many; each is in `status.workers` and in `WorkersLost`).
pub fn merged_message(workers: &[WorkerStatus], cm: &str) -> String {
    let live = workers.iter().filter(|w| is_live(w)).count();
    let mut msg = format!("{live} workers collected and merged into ConfigMap {cm}");
    let lost: Vec<String> = workers
        .iter()
        .filter(|w| !is_live(w))
        .map(|w| w.name.clone())
        .collect();
    if !lost.is_empty() {
        msg.push_str(&format!(
            "; without {} workers lost or failed: {}",
            lost.len(),
            bounded_list(&lost, DEAD_NAMED_AT_MOST)
        ));
    }
    msg
}

/// Decide the next step from the workers, the failure policy and whether a start time exists.
pub fn next_step(
    workers: &[WorkerStatus],
    policy: crate::crd::FailurePolicy,
    started: bool,
) -> Next {
    use WorkerPhase::*;
    let live: Vec<_> = workers.iter().filter(|w| is_live(w)).collect();
    if let Some((reason, message)) = dead_workers(workers) {
        if policy == crate::crd::FailurePolicy::Abort || live.is_empty() {
            return Next::Fail { reason, message };
        }
    }
    if live.is_empty() {
        return Next::Wait;
    }
    if !started {
        return if live.iter().all(|w| w.phase == Ready) {
            Next::Start
        } else {
            Next::Wait
        };
    }
    if live.iter().all(|w| w.phase == Collected) {
        Next::Complete
    } else if live.iter().all(|w| w.phase == Collected || w.phase == Done) {
        Next::Collecting
    } else {
        Next::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
        PodCondition, PodStatus,
    };

    fn pod(status: PodStatus) -> Pod {
        Pod {
            status: Some(status),
            ..Default::default()
        }
    }

    fn container(state: ContainerState) -> Option<Vec<ContainerStatus>> {
        Some(vec![ContainerStatus {
            name: crate::resources::CONTAINER.into(),
            state: Some(state),
            ..Default::default()
        }])
    }

    #[test]
    fn classifies_pods() {
        assert_eq!(classify_pod(None), PodView::Missing);
        let p = pod(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some("10.88.0.5".into()),
            ..Default::default()
        });
        assert_eq!(
            classify_pod(Some(&p)),
            PodView::Running {
                ip: Some("10.88.0.5".into())
            }
        );
        let p = pod(PodStatus {
            phase: Some("Pending".into()),
            container_statuses: container(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("CreateContainerConfigError".into()),
                    message: Some("secret \"creds\" not found".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            classify_pod(Some(&p)),
            PodView::ConfigError("CreateContainerConfigError: secret \"creds\" not found".into())
        );
        let p = pod(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("persistentvolumeclaim \"data\" not found".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        match classify_pod(Some(&p)) {
            PodView::Pending {
                unschedulable: Some((m, _)),
            } => assert!(m.contains("persistentvolumeclaim")),
            other => panic!("{other:?}"),
        }
        let p = pod(PodStatus {
            phase: Some("Failed".into()),
            container_statuses: container(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 1,
                    message: Some("opening the target: no such dir\n".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            classify_pod(Some(&p)),
            PodView::Failed("opening the target: no such dir".into())
        );
        // Evicted by the kubelet: lost, with the kubelet's reason and the worker's message.
        let p = pod(PodStatus {
            phase: Some("Failed".into()),
            reason: Some("Evicted".into()),
            message: Some("Usage of EmptyDir volume \"data\" exceeds the limit \"256Mi\". ".into()),
            container_statuses: container(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 1,
                    message: Some("stopped by a signal in stage running before the operator collected the summary".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            classify_pod(Some(&p)),
            PodView::Lost("Evicted: Usage of EmptyDir volume \"data\" exceeds the limit \"256Mi\". (worker: stopped by a signal in stage running before the operator collected the summary)".into())
        );
        // OOM-killed container: lost, not a worker failure.
        let p = pod(PodStatus {
            phase: Some("Failed".into()),
            container_statuses: container(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("OOMKilled".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(
            classify_pod(Some(&p)),
            PodView::Lost("OOMKilled: the worker exceeded its memory limit".into())
        );
    }

    #[test]
    fn conditions_keep_transition_time() {
        let t0 = Utc::now();
        let t1 = t0 + chrono::Duration::seconds(10);
        let mut c = vec![];
        set_condition(&mut c, "Valid", true, "Ok", "fine", Some(1), t0);
        set_condition(&mut c, "Valid", true, "Ok", "still fine", Some(2), t1);
        assert_eq!(c.len(), 1);
        assert_eq!(from_time(&c[0].last_transition_time), trunc(t0));
        assert_eq!(c[0].observed_generation, Some(2));
        set_condition(&mut c, "Valid", false, "Bad", "no", Some(2), t1);
        assert_eq!(from_time(&c[0].last_transition_time), trunc(t1));
    }

    fn trunc(t: DateTime<Utc>) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap()
    }

    #[test]
    fn offset_and_skew() {
        let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let ms = |n| chrono::Duration::milliseconds(n);
        // Round trip 10ms, worker answered 105ms after our send: it is 100ms ahead.
        assert_eq!(clock_offset_ms(t0, t0 + ms(10), t0 + ms(105)), 100.0);
        let w = |start: DateTime<Utc>, off: f64| WorkerStatus {
            started_at: Some(start.to_rfc3339()),
            clock_offset_ms: Some(off),
            ..Default::default()
        };
        // Worker a is 100ms ahead and started "at" +100 on its clock: 0 on ours. Worker b is
        // exact and started at +3.
        let skew = start_skew_ms(&[w(t0 + ms(100), 100.0), w(t0 + ms(3), 0.0)]).unwrap();
        assert_eq!(skew, 3.0);
        assert_eq!(start_skew_ms(&[]), None);
    }

    fn w(name: &str, phase: WorkerPhase) -> WorkerStatus {
        WorkerStatus {
            name: name.into(),
            pod: format!("run-{name}"),
            node: Some("vm".into()),
            phase,
            ..Default::default()
        }
    }

    #[test]
    fn state_machine() {
        use crate::crd::FailurePolicy::{Abort, Continue};
        // Start only when every live worker is ready.
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Ready), w("w1", WorkerPhase::Preparing)],
                Abort,
                false
            ),
            Next::Wait
        );
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Ready), w("w1", WorkerPhase::Ready)],
                Abort,
                false
            ),
            Next::Start
        );
        // Never a second start time.
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Ready), w("w1", WorkerPhase::Ready)],
                Abort,
                true
            ),
            Next::Wait
        );
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Done), w("w1", WorkerPhase::Collected)],
                Abort,
                true
            ),
            Next::Collecting
        );
        assert_eq!(
            next_step(
                &[
                    w("w0", WorkerPhase::Collected),
                    w("w1", WorkerPhase::Collected)
                ],
                Abort,
                true
            ),
            Next::Complete
        );
        // A lost worker: Abort fails and names it; Continue goes on without it.
        let mut lost = w("w1", WorkerPhase::Lost);
        lost.message = Some("its pod was deleted".into());
        match next_step(&[w("w0", WorkerPhase::Running), lost.clone()], Abort, true) {
            Next::Fail { reason, message } => {
                assert_eq!(reason, "WorkerLost");
                assert!(
                    message.contains("w1 (pod run-w1, node vm): its pod was deleted"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Running), lost.clone()],
                Continue,
                true
            ),
            Next::Wait
        );
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Collected), lost.clone()],
                Continue,
                true
            ),
            Next::Complete
        );
        // A worker failing before the start under Continue: the others start without it.
        assert_eq!(
            next_step(
                &[w("w0", WorkerPhase::Ready), w("w1", WorkerPhase::Failed)],
                Continue,
                false
            ),
            Next::Start
        );
        // Nobody left: fail whatever the policy.
        assert!(matches!(
            next_step(&[w("w0", WorkerPhase::Failed)], Continue, false),
            Next::Fail {
                reason: "WorkerFailed",
                ..
            }
        ));
    }

    #[test]
    fn summaries_text() {
        let ws = |phase: WorkerPhase| WorkerStatus {
            phase,
            ..Default::default()
        };
        assert_eq!(
            workers_summary(&[ws(WorkerPhase::Ready), ws(WorkerPhase::Preparing)]),
            "1/2"
        );
        assert_eq!(
            workers_summary(&[ws(WorkerPhase::Collected), ws(WorkerPhase::Lost)]),
            "1/2 (1 lost)"
        );
        assert_eq!(throughput_text(1234.4, Some(5.55)), "1234 op/s, 5.5 MiB/s");
    }

    #[test]
    fn start_budget_grows_with_the_fleet() {
        assert_eq!(start_budget(2, 64), Duration::from_millis(1200));
        assert_eq!(start_budget(64, 64), Duration::from_millis(1200));
        assert_eq!(start_budget(65, 64), Duration::from_millis(1400));
        assert_eq!(start_budget(1000, 64), Duration::from_millis(4200));
        assert_eq!(start_budget(1000, 1), Duration::from_millis(201_000));
        // Parallelism 0 is treated as 1 rather than dividing by zero.
        assert_eq!(start_budget(3, 0), Duration::from_millis(1600));
        assert_eq!(default_start_delay(2, 64), Duration::from_secs(5));
        assert_eq!(default_start_delay(1000, 64), Duration::from_millis(8400));
        assert_eq!(default_start_delay(1000, 16), Duration::from_millis(27_200));
    }

    #[test]
    fn phase_counts_by_phase() {
        let ws = [
            w("a", WorkerPhase::Running),
            w("b", WorkerPhase::Running),
            w("c", WorkerPhase::Lost),
        ];
        assert_eq!(
            phase_counts(&ws),
            BTreeMap::from([("Lost".to_string(), 1), ("Running".to_string(), 2)])
        );
        assert!(phase_counts(&[]).is_empty());
    }

    #[test]
    fn an_image_that_cannot_be_pulled_is_named() {
        for reason in ["ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"] {
            let mut c = container(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message: Some("rpc error: not found".into()),
                }),
                ..Default::default()
            });
            c.as_mut().expect("one")[0].image = "localhost/benchrun-worker:typo".into();
            let p = pod(PodStatus {
                phase: Some("Pending".into()),
                container_statuses: c,
                ..Default::default()
            });
            assert_eq!(
                classify_pod(Some(&p)),
                PodView::ConfigError(format!(
                    "{reason}: image localhost/benchrun-worker:typo: rpc error: not found"
                ))
            );
        }
    }

    #[test]
    fn the_merged_message_names_a_bounded_number_of_lost_workers() {
        assert_eq!(
            merged_message(
                &[
                    w("w0", WorkerPhase::Collected),
                    w("w1", WorkerPhase::Collected)
                ],
                "bench-result"
            ),
            "2 workers collected and merged into ConfigMap bench-result"
        );
        let mut ws: Vec<WorkerStatus> = (0..200)
            .map(|i| w(&format!("w{i}"), WorkerPhase::Lost))
            .collect();
        ws[0].phase = WorkerPhase::Collected;
        ws[1].phase = WorkerPhase::Failed;
        let msg = merged_message(&ws, "bench-result");
        assert_eq!(
            msg,
            "1 workers collected and merged into ConfigMap bench-result; without 199 workers lost or failed: w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, and 189 more"
        );
    }

    #[test]
    fn run_level_messages_name_a_bounded_number_of_workers() {
        let names: Vec<String> = (0..3).map(|i| format!("w{i}")).collect();
        assert_eq!(bounded_list(&names, 5), "w0, w1, w2");
        assert_eq!(bounded_list(&names, 2), "w0, w1, and 1 more");
        let workers: Vec<WorkerStatus> = (0..1000)
            .map(|i| WorkerStatus {
                name: format!("w{i}"),
                pod: format!("bench-w{i}"),
                phase: WorkerPhase::Lost,
                message: Some("x".repeat(5000)),
                ..Default::default()
            })
            .collect();
        let (reason, msg) = dead_workers(&workers).expect("dead");
        assert_eq!(reason, "WorkerLost");
        assert!(msg.len() < 4096, "{} bytes", msg.len());
        assert!(msg.starts_with("w0 (pod bench-w0, node ?): xxx"), "{msg}");
        assert!(msg.ends_with("; and 990 more"), "{msg}");
    }
}
