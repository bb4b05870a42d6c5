//! `stopWhenStable` across a run of several workers: each agent counts its measured stage's
//! ops per second (on `/v1/status`) and does not stop on its own (`--stable-by-run`); the
//! operator sums the seconds all workers have counted, applies the worker's own rule
//! (`benchrun_api::stable`) and, once steady, tells every agent to end its measured stage at
//! one instant (`POST /v1/stop-at`), so the merged result is of stages of one length.
//!
//! The decision is recorded in `status.stable` before any agent is told: a restarted operator
//! (or a lost answer) resends that instant to the agents still running without it, never
//! another. An agent that predates this ignores the flag and stops on its own, serving no
//! seconds: the run then never decides, and behaves as before.

use std::collections::BTreeMap;

use benchrun_api::agent::AgentStage;
use benchrun_api::stable::{self, SecondCounts, StableDecision};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;

use super::decide::Answer;
use super::Reconciler;
use crate::client::fan_out;
use crate::crd::{BenchmarkRunSpec, RunStable};
use crate::state;
use crate::status::Draft;

/// What the pass does about the run's stability: the stop instant and why, and the workers
/// (by index) to tell.
#[derive(Debug, PartialEq)]
pub(crate) struct StopAll {
    pub(crate) at: DateTime<Utc>,
    pub(crate) decision: StableDecision,
    pub(crate) tell: Vec<usize>,
    /// Decided in this pass: to be recorded before anyone is told.
    pub(crate) new: bool,
}

/// Decide from the agents' answers (pure). Only for a run of several workers with
/// `stopWhenStable`, started: the first time every live worker is running and has counted
/// seconds, and the merged seconds hold a steady window, the run stops at `now + margin`
/// (recorded in `status.stable`); afterwards, the agents still running without that instant
/// are told again. `now` is when the answers are in (not the pass's start: asking the agents
/// took some of the margin).
pub(crate) fn decide(
    d: &mut Draft,
    spec: &BenchmarkRunSpec,
    answers: &[(usize, Answer)],
    now: DateTime<Utc>,
    margin: std::time::Duration,
) -> Option<StopAll> {
    let rule = spec.workload.stop_when_stable.as_ref()?;
    let workers = &d.status.workers;
    if workers.len() < 2 || d.status.start_time.is_none() {
        return None;
    }
    let running: BTreeMap<usize, _> = answers
        .iter()
        .filter_map(|(i, a)| match a {
            Answer::Status(s) if s.stage == AgentStage::Running => Some((*i, s)),
            _ => None,
        })
        .collect();
    if let Some(rs) = &d.status.stable {
        let at = DateTime::parse_from_rfc3339(&rs.stop_at)
            .ok()?
            .with_timezone(&Utc);
        let tell: Vec<usize> = running
            .iter()
            .filter(|(_, s)| s.stop_at != Some(at))
            .map(|(i, _)| *i)
            .collect();
        return (!tell.is_empty()).then(|| StopAll {
            at,
            decision: decision_of(rs),
            tell,
            new: false,
        });
    }
    // Every live worker must be measuring and counting: a worker not yet started, already
    // done, or an older agent (no seconds) leaves the decision undone.
    let live: Vec<usize> = (0..workers.len())
        .filter(|&i| state::is_live(&workers[i]))
        .collect();
    let mut seconds: Vec<SecondCounts> = Vec::with_capacity(live.len());
    for i in &live {
        seconds.push(running.get(i)?.seconds.clone()?);
    }
    let (end, figures) = stable::decide(rule, &seconds)?;
    let start = DateTime::parse_from_rfc3339(d.status.start_time.as_deref()?)
        .ok()?
        .with_timezone(&Utc);
    let warmup = spec
        .workload
        .warmup
        .map_or(std::time::Duration::ZERO, |w| w.0);
    let steady_at =
        start + chrono::Duration::from_std(warmup + std::time::Duration::from_secs(end)).ok()?;
    let at = now + chrono::Duration::from_std(margin).ok()?;
    let decision = StableDecision {
        decided_by: stable::BY_RUN.into(),
        workers: live.len() as u32,
        steady_at,
        figures,
    };
    d.status.stable = Some(RunStable {
        stop_at: at.to_rfc3339(),
        steady_at: steady_at.to_rfc3339(),
        workers: decision.workers,
        window_seconds: decision.figures.window_seconds,
        band_percent: decision.figures.band_percent,
        mean_ops_per_second: decision.figures.mean_ops_per_second,
        min_ops_per_second: decision.figures.min_ops_per_second,
        max_ops_per_second: decision.figures.max_ops_per_second,
    });
    d.event(
        EventType::Normal,
        "Stable",
        format!(
            "{} workers together: {}; every worker stops at {}",
            decision.workers,
            decision.figures.reason(),
            at.to_rfc3339()
        ),
    );
    Some(StopAll {
        at,
        decision,
        tell: live,
        new: true,
    })
}

/// The decision recorded in the status, as the agents are told it.
fn decision_of(rs: &RunStable) -> StableDecision {
    StableDecision {
        decided_by: stable::BY_RUN.into(),
        workers: rs.workers,
        steady_at: DateTime::parse_from_rfc3339(&rs.steady_at)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default(),
        figures: stable::StableFigures {
            window_seconds: rs.window_seconds,
            band_percent: rs.band_percent,
            mean_ops_per_second: rs.mean_ops_per_second,
            min_ops_per_second: rs.min_ops_per_second,
            max_ops_per_second: rs.max_ops_per_second,
        },
    }
}

/// How far ahead of the decision the run stops: the status write and the stop requests to
/// every worker must come first (the start requests' budget, and never less than
/// [`MIN_MARGIN`]). An agent told late would stop at once, later than the others.
pub(crate) fn margin(workers: usize, parallelism: usize) -> std::time::Duration {
    state::start_budget(workers, parallelism).max(MIN_MARGIN)
}

/// The shortest lead of the stop instant over the decision.
pub(crate) const MIN_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

impl Reconciler<'_> {
    /// Tell these workers' agents the run's stop instant, all at once (bounded). One that
    /// does not get it is told again on the next pass (its status lacks the instant).
    pub(crate) async fn send_stops(
        &self,
        stop: &StopAll,
        pods: &BTreeMap<String, Pod>,
        token: &str,
    ) {
        let jobs: Vec<_> = stop
            .tell
            .iter()
            .filter_map(|&i| {
                let w = self.draft.status.workers.get(i)?;
                let ip = pods.get(&w.pod)?.status.as_ref()?.pod_ip.as_deref()?;
                Some((w.name.clone(), self.worker_client(ip, token)))
            })
            .collect();
        fan_out(jobs, self.parallelism(), |(name, c)| async move {
            if let Err(e) = c.stop_at(stop.at, &stop.decision).await {
                tracing::warn!("stop-at {name}: {e}");
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BenchmarkRunStatus, WorkerPhase, WorkerStatus};
    use benchrun_api::agent::AgentStatus;
    use std::time::Duration;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-27T04:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn spec(extra: &str) -> BenchmarkRunSpec {
        serde_yaml::from_str(&format!(
            "workload: {{target: file:///d, duration: 600s, ops: [{{op: get}}]{extra}}}\n"
        ))
        .expect("spec")
    }

    fn draft(n: usize) -> Draft {
        let status = BenchmarkRunStatus {
            start_time: Some("2026-11-27T03:59:00Z".into()),
            workers: (0..n)
                .map(|i| WorkerStatus {
                    name: format!("w{i}"),
                    pod: format!("p{i}"),
                    phase: WorkerPhase::Running,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        Draft::new(status, Some(1), now())
    }

    fn running(ops: &[u64], stop_at: Option<DateTime<Utc>>) -> Answer {
        Answer::Status(AgentStatus {
            worker_id: "w".into(),
            stage: AgentStage::Running,
            error: None,
            start_at: None,
            started_at: None,
            ops: ops.iter().sum(),
            bytes: 0,
            errors: 0,
            worker_time: now(),
            summary_fetched: false,
            seconds: Some(SecondCounts {
                first: 0,
                ops: ops.to_vec(),
            }),
            stop_at,
        })
    }

    const STABLE: &str = ", stopWhenStable: {window: 3s, bandPercent: 5}, warmup: 10s";
    const MARGIN: Duration = Duration::from_secs(2);

    /// Steady together though neither is alone: the run stops both at now + margin, records
    /// it first, and the steady window's end is counted from the start after the warm-up.
    #[test]
    fn a_steady_run_stops_every_worker_at_one_instant() {
        let mut d = draft(2);
        let answers = vec![
            (0, running(&[10, 90, 10, 90], None)),
            (1, running(&[90, 10, 90, 10], None)),
        ];
        let stop = decide(&mut d, &spec(STABLE), &answers, now(), MARGIN).expect("steady");
        assert!(stop.new);
        assert_eq!(stop.tell, vec![0, 1]);
        assert_eq!(stop.at, now() + chrono::Duration::seconds(2));
        assert_eq!(stop.decision.decided_by, "run");
        assert_eq!(stop.decision.workers, 2);
        assert_eq!(stop.decision.figures.mean_ops_per_second, 100.0);
        // Start 03:59:00, 10 s of warm-up, steady at the end of second 2 (of 0, 1, 2).
        assert_eq!(
            stop.decision.steady_at.to_rfc3339(),
            "2026-11-27T03:59:13+00:00"
        );
        let rs = d.status.stable.clone().expect("recorded");
        assert_eq!(rs.stop_at, stop.at.to_rfc3339());
        assert_eq!(decision_of(&rs), stop.decision);
        assert!(d.events.iter().any(|(_, r, _)| r == "Stable"));

        // The next pass: the agents that have the instant are not told again; one that lost
        // the request is, with the same instant and decision.
        let answers = vec![
            (0, running(&[10, 90, 10, 90, 50], Some(stop.at))),
            (1, running(&[90, 10, 90, 10, 50], None)),
        ];
        let again = decide(&mut d, &spec(STABLE), &answers, now(), MARGIN).expect("resend");
        assert!(!again.new);
        assert_eq!((again.at, again.tell.clone()), (stop.at, vec![1]));
        assert_eq!(again.decision, stop.decision);
        // All told: nothing to do.
        let answers = vec![
            (0, running(&[1], Some(stop.at))),
            (1, running(&[1], Some(stop.at))),
        ];
        assert_eq!(decide(&mut d, &spec(STABLE), &answers, now(), MARGIN), None);
    }

    #[test]
    fn no_decision_without_every_worker_counting_a_steady_window() {
        let steady = [100, 100, 100, 100];
        // Not steady merged.
        let mut d = draft(2);
        let answers = vec![
            (0, running(&steady, None)),
            (1, running(&[100, 20, 100], None)),
        ];
        assert_eq!(decide(&mut d, &spec(STABLE), &answers, now(), MARGIN), None);
        // A worker that did not answer, or is not running yet, or serves no seconds (an
        // older agent): no decision.
        let answers = vec![(0, running(&steady, None))];
        assert_eq!(decide(&mut d, &spec(STABLE), &answers, now(), MARGIN), None);
        let answers = vec![
            (0, running(&steady, None)),
            (1, Answer::Unreachable("timeout".into())),
        ];
        assert_eq!(decide(&mut d, &spec(STABLE), &answers, now(), MARGIN), None);
        let mut old = running(&steady, None);
        if let Answer::Status(s) = &mut old {
            s.seconds = None;
        }
        let answers = vec![(0, running(&steady, None)), (1, old)];
        assert_eq!(decide(&mut d, &spec(STABLE), &answers, now(), MARGIN), None);
        assert_eq!(d.status.stable, None);
        // A lost worker does not hold the others: the live ones decide.
        let mut d = draft(3);
        d.status.workers[2].phase = WorkerPhase::Lost;
        let answers = vec![(0, running(&steady, None)), (1, running(&steady, None))];
        let stop = decide(&mut d, &spec(STABLE), &answers, now(), MARGIN).expect("steady");
        assert_eq!(stop.tell, vec![0, 1]);
        // One worker decides alone (standalone behaviour); no stopWhenStable: nothing.
        let answers = vec![(0, running(&steady, None))];
        assert_eq!(
            decide(&mut draft(1), &spec(STABLE), &answers, now(), MARGIN),
            None
        );
        let answers = vec![(0, running(&steady, None)), (1, running(&steady, None))];
        assert_eq!(
            decide(&mut draft(2), &spec(""), &answers, now(), MARGIN),
            None
        );
    }
}
