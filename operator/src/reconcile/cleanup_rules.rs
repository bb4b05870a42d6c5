//! What a finished run's pass decides, pure: whether its pods go now (`spec.cleanup`, and
//! the workers still removing what they created: [`crate::worker_cleanup`]), what the
//! `CleanedUp` and `CleanupAbandoned` conditions say, and when its TTL deletes it. The
//! deletes themselves are in [`super::finish`].

use std::time::Duration;

use crate::context::POLL;
use crate::crd::{CleanupPolicy, Phase};
use crate::run_rules::{self, cond};
use crate::status::Draft;
use crate::worker_cleanup::{self, CleanupStep};
use benchrun_api::Workload;
use chrono::{DateTime, Utc};
use kube::runtime::events::EventType;

/// Objects named at most in a message (the rest are counted).
const NAMED_AT_MOST: usize = 5;

/// The `CleanedUp` reason while the pods wait for their workers' cleanup.
const WAITING: &str = "WaitingForWorkers";

/// Whether the run's pods are still to be deleted under `policy`. When the policy keeps
/// them, says so (`CleanedUp=False/PodsKept`) in the same status write as the final phase, so
/// whoever sees the run finished also sees why its pods are still there. Settled once the
/// pods are deleted (or kept); not while they wait for their workers.
pub(crate) fn cleanup_due(d: &mut Draft, policy: CleanupPolicy) -> bool {
    let clean = match policy {
        CleanupPolicy::Always => true,
        CleanupPolicy::OnSuccess => d.status.phase == Phase::Succeeded,
        CleanupPolicy::Never => false,
    };
    if !clean && run_rules::condition(&d.status.conditions, cond::CLEANED_UP).is_none() {
        let msg = format!(
            "worker pods kept ({policy:?} policy, run {})",
            d.status.phase.as_str()
        );
        d.condition(cond::CLEANED_UP, false, "PodsKept", msg);
    }
    let settled = run_rules::condition(&d.status.conditions, cond::CLEANED_UP)
        .is_some_and(|c| c.reason != WAITING);
    clean && !settled
}

/// Apply the cleanup bound's step: `Some(retry)` while workers still at work keep their pods
/// (`CleanedUp=False/WaitingForWorkers` names them); `None` when the pods go now, with
/// `CleanupAbandoned` (condition and Warning event) naming those the bound cut short.
pub(crate) fn cleanup_wait(d: &mut Draft, w: &Workload, step: CleanupStep) -> Option<Duration> {
    match step {
        CleanupStep::Wait { busy, retry } => {
            let msg = format!(
                "waiting for workers {} to remove what they created before deleting their pods (at most {}s after the run finished)",
                run_rules::bounded_list(&busy, NAMED_AT_MOST),
                worker_cleanup::CLEANUP_BOUND.as_secs()
            );
            d.condition(cond::CLEANED_UP, false, WAITING, msg);
            Some(retry)
        }
        CleanupStep::Delete { abandoned } if !abandoned.is_empty() => {
            let msg = worker_cleanup::abandoned_message(w, &abandoned, "the run finished");
            d.condition(
                cond::CLEANUP_ABANDONED,
                true,
                "CleanupAbandoned",
                msg.clone(),
            );
            d.event(EventType::Warning, "CleanupAbandoned", msg);
            None
        }
        CleanupStep::Delete { .. } => None,
    }
}

/// A deleted run's step of the same bound: `Some(retry)` while workers at work keep it (said
/// by a `Stopping` event on the first pass after the deletion, `deleted`); `None` when its
/// finalizer goes, with a `CleanupAbandoned` Warning event naming those cut short (only an
/// event: the run is going, no status of it will be read).
pub(crate) fn deletion_wait(
    d: &mut Draft,
    w: &Workload,
    deleted: DateTime<Utc>,
    step: CleanupStep,
) -> Option<Duration> {
    match step {
        CleanupStep::Wait { busy, retry } => {
            // Said on the first pass after the deletion (a pass a poll later is past it).
            let waited = (d.now - deleted).to_std().unwrap_or_default();
            if waited < POLL {
                d.event(
                    EventType::Normal,
                    "Stopping",
                    format!(
                        "the run is being deleted: stopping {} workers, which remove what they created",
                        busy.len()
                    ),
                );
            }
            Some(retry)
        }
        CleanupStep::Delete { abandoned } if !abandoned.is_empty() => {
            let msg = worker_cleanup::abandoned_message(w, &abandoned, "the run was deleted");
            d.event(EventType::Warning, "CleanupAbandoned", msg);
            None
        }
        CleanupStep::Delete { .. } => None,
    }
}

/// The pods were deleted (`deleted` of them); `kept`: objects under the run's names that are
/// not its own, left alone and named.
pub(crate) fn cleaned_up(d: &mut Draft, policy: CleanupPolicy, deleted: usize, kept: &[String]) {
    let not_ours = if kept.is_empty() {
        String::new()
    } else {
        format!(
            "; kept {}, not this run's",
            run_rules::bounded_list(kept, NAMED_AT_MOST)
        )
    };
    d.condition(
        cond::CLEANED_UP,
        true,
        "PodsDeleted",
        format!("worker pods deleted ({policy:?} policy){not_ours}"),
    );
    d.event(
        EventType::Normal,
        "CleanedUp",
        format!("deleted {deleted} worker pods{not_ours}"),
    );
}

/// What `ttlSecondsAfterFinished` asks of a finished run now.
#[derive(Debug, PartialEq)]
pub(crate) enum TtlStep {
    /// No TTL: the run stays.
    Keep,
    /// Bounded by the schema and validation, checked anyway (a panic would crash-loop): kept.
    OutOfRange(i64),
    /// Due in this long.
    Wait(Duration),
    /// Due: delete the run.
    Delete,
}

/// When the run's TTL (`ttl` seconds after its finish time, or now if it has none) deletes it.
pub(crate) fn ttl_step(d: &Draft, ttl: Option<i64>) -> TtlStep {
    let Some(ttl) = ttl else {
        return TtlStep::Keep;
    };
    let finished = d
        .status
        .finish_time
        .as_deref()
        .and_then(run_rules::parse_time)
        .unwrap_or(d.now);
    let Some(due) = chrono::Duration::try_seconds(ttl).and_then(|t| finished.checked_add_signed(t))
    else {
        return TtlStep::OutOfRange(ttl);
    };
    if d.now >= due {
        TtlStep::Delete
    } else {
        TtlStep::Wait((due - d.now).to_std().unwrap_or(POLL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BenchmarkRunStatus;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-25T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
    }

    fn finished(phase: Phase) -> Draft {
        let status = BenchmarkRunStatus {
            phase,
            finish_time: Some((now() - chrono::Duration::seconds(30)).to_rfc3339()),
            ..Default::default()
        };
        Draft::new(status, Some(1), now())
    }

    fn cleaned(d: &Draft) -> Option<(String, String, String)> {
        run_rules::condition(&d.status.conditions, cond::CLEANED_UP)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    #[test]
    fn the_policy_says_whether_pods_go_and_a_kept_pod_is_said_once() {
        let mut d = finished(Phase::Failed);
        assert!(!cleanup_due(&mut d, CleanupPolicy::OnSuccess));
        assert_eq!(
            cleaned(&d),
            Some((
                "False".into(),
                "PodsKept".into(),
                "worker pods kept (OnSuccess policy, run Failed)".into()
            ))
        );
        let mut d = finished(Phase::Succeeded);
        assert!(cleanup_due(&mut d, CleanupPolicy::OnSuccess));
        assert!(cleanup_due(&mut d, CleanupPolicy::Always));
        assert_eq!(cleaned(&d), None);
        assert!(!cleanup_due(&mut d, CleanupPolicy::Never));
        // Settled once deleted: not deleted again.
        let mut d = finished(Phase::Succeeded);
        cleaned_up(&mut d, CleanupPolicy::Always, 2, &[]);
        assert!(!cleanup_due(&mut d, CleanupPolicy::Always));
        assert_eq!(d.events.last().map(|e| e.1.as_str()), Some("CleanedUp"));
    }

    #[test]
    fn waiting_workers_keep_their_pods_and_the_bound_names_those_cut_short() {
        let w: Workload = serde_yaml::from_str(
            "target: s3://b/p/\nduration: 5s\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}",
        )
        .expect("workload");
        let mut d = finished(Phase::Failed);
        let wait = CleanupStep::Wait {
            busy: vec!["w1".into()],
            retry: POLL,
        };
        assert_eq!(cleanup_wait(&mut d, &w, wait), Some(POLL));
        let (status, reason, msg) = cleaned(&d).expect("said");
        assert_eq!((status.as_str(), reason.as_str()), ("False", WAITING));
        assert!(msg.starts_with("waiting for workers w1 to remove"), "{msg}");
        // Still waiting: the pods are still due.
        assert!(cleanup_due(&mut d, CleanupPolicy::Always));
        let cut = CleanupStep::Delete {
            abandoned: vec!["w1".into()],
        };
        assert_eq!(cleanup_wait(&mut d, &w, cut), None);
        let c = run_rules::condition(&d.status.conditions, cond::CLEANUP_ABANDONED).expect("cut");
        assert_eq!(c.status, "True");
        assert!(c.message.contains("w1"), "{}", c.message);
        assert_eq!(
            d.events.last().map(|e| e.1.as_str()),
            Some("CleanupAbandoned")
        );
        let mut d = finished(Phase::Failed);
        let clean = CleanupStep::Delete { abandoned: vec![] };
        assert_eq!(cleanup_wait(&mut d, &w, clean), None);
        assert!(d.events.is_empty());
    }

    #[test]
    fn a_deleted_run_says_it_is_stopping_once_and_names_those_cut_short_by_event_only() {
        let w: Workload = serde_yaml::from_str(
            "target: s3://b/p/\nduration: 5s\nops: [{op: get}]\ndataset: {objects: 2, size: 4KiB}",
        )
        .expect("workload");
        let wait = || CleanupStep::Wait {
            busy: vec!["w0".into(), "w1".into()],
            retry: POLL,
        };
        let mut d = finished(Phase::Running);
        assert_eq!(deletion_wait(&mut d, &w, now(), wait()), Some(POLL));
        assert_eq!(d.events.len(), 1);
        assert_eq!(d.events[0].1, "Stopping");
        assert!(
            d.events[0].2.contains("stopping 2 workers"),
            "{:?}",
            d.events
        );
        // A poll later: still waiting, not said again.
        let mut d = finished(Phase::Running);
        let earlier = now() - chrono::Duration::seconds(10);
        assert_eq!(deletion_wait(&mut d, &w, earlier, wait()), Some(POLL));
        assert!(d.events.is_empty());
        let cut = CleanupStep::Delete {
            abandoned: vec!["w1".into()],
        };
        assert_eq!(deletion_wait(&mut d, &w, earlier, cut), None);
        assert_eq!(d.events.len(), 1);
        assert_eq!(d.events[0].1, "CleanupAbandoned");
        assert!(
            run_rules::condition(&d.status.conditions, cond::CLEANUP_ABANDONED).is_none(),
            "no condition on a run that is going"
        );
    }

    #[test]
    fn others_objects_are_named_as_kept() {
        let mut d = finished(Phase::Failed);
        cleaned_up(
            &mut d,
            CleanupPolicy::Always,
            1,
            &["claim orph-w0-data".into()],
        );
        assert_eq!(
            cleaned(&d).map(|c| c.2),
            Some(
                "worker pods deleted (Always policy); kept claim orph-w0-data, not this run's"
                    .into()
            )
        );
    }

    #[test]
    fn the_ttl_counts_from_the_finish_time() {
        let d = finished(Phase::Succeeded);
        assert_eq!(ttl_step(&d, None), TtlStep::Keep);
        assert_eq!(
            ttl_step(&d, Some(60)),
            TtlStep::Wait(Duration::from_secs(30))
        );
        assert_eq!(ttl_step(&d, Some(30)), TtlStep::Delete);
        assert_eq!(ttl_step(&d, Some(i64::MAX)), TtlStep::OutOfRange(i64::MAX));
    }
}
