//! How long a run's workers get to remove what they created (their datasets, the objects
//! their PUTs wrote) before their pods go, on every path: a run that finished (succeeded,
//! failed, timed out, stopped, failed to merge) and a run being deleted. Pure: the rules here
//! are unit-tested; the passes that apply them are `reconcile/finish.rs` and
//! `reconcile/deletion.rs`.
//!
//! A worker pod deleted while its agent removes its dataset gets the pod's termination grace
//! (10 s), then SIGKILL: whatever was not removed by then stays on the storage. So pods are
//! deleted only once every agent still answering has said its cleanup is done (stage `done`
//! or `failed`), or [`CLEANUP_BOUND`] after the run finished (or was deleted), whichever comes
//! first. When the bound cuts a cleanup short, the run says which workers and what they may
//! have left (`CleanupAbandoned`).

use std::time::Duration;

use benchrun_api::agent::AgentStage;
use benchrun_api::Workload;
use chrono::{DateTime, Utc};

use crate::run_rules;

/// Longest wait, from the run's end (or its deletion), for its workers to remove what they
/// created before their pods are deleted. The one bound of every path.
pub const CLEANUP_BOUND: Duration = Duration::from_secs(120);

/// Workers named at most in a `CleanupAbandoned` message (the rest are counted).
const NAMED_AT_MOST: usize = 10;

/// Whether an agent in this stage may still be at work on the storage (measuring, or removing
/// what it created): its pod must not go yet. `done` and `failed` come after the cleanup.
pub fn at_work(stage: AgentStage) -> bool {
    !matches!(stage, AgentStage::Done | AgentStage::Failed)
}

/// What to do with the pods of a run whose workers were told to stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupStep {
    /// Keep the pods: these workers are still at work. Look again after `retry` (at most
    /// the time left of the bound).
    Wait {
        /// The workers still at work.
        busy: Vec<String>,
        /// When to look again.
        retry: Duration,
    },
    /// The pods may go. `abandoned`: the workers whose cleanup the bound cuts short (empty
    /// when every agent said it was done).
    Delete {
        /// The workers still at work when the bound passed.
        abandoned: Vec<String>,
    },
}

/// The one rule for every path: wait while some workers are at work (`busy`) and less than
/// [`CLEANUP_BOUND`] has passed `since` the run finished (or was deleted), looking again
/// every `poll` at most; then delete, naming those cut short.
pub fn step(
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    poll: Duration,
    busy: Vec<String>,
) -> CleanupStep {
    if busy.is_empty() {
        return CleanupStep::Delete { abandoned: busy };
    }
    let waited = (now - since).to_std().unwrap_or_default();
    match CLEANUP_BOUND.checked_sub(waited) {
        Some(left) if !left.is_zero() => CleanupStep::Wait {
            busy,
            retry: left.min(poll),
        },
        _ => CleanupStep::Delete { abandoned: busy },
    }
}

/// When a run's bound starts: when it finished, or when it was deleted, whichever was first
/// (a run deleted while its finished workers clean up does not start another bound); `now`
/// for a run neither finished nor deleted (never asked).
pub fn bound_start(
    finished: Option<DateTime<Utc>>,
    deleted: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    finished.into_iter().chain(deleted).min().unwrap_or(now)
}

/// Where a worker's agent writes on the storage, as the workload says: its own dataset
/// (`<target><prefix><worker>/`, when the run prepares one) or the objects its PUTs wrote
/// (`<target><prefix>put/`, keys naming the worker). The engine adds a `/` between a target
/// and a prefix when the target has none.
pub fn left_under(w: &Workload, worker: &str) -> String {
    let sep = if w.target.ends_with('/') { "" } else { "/" };
    let prefix = &w.dataset.prefix;
    if w.dataset.prepare {
        format!("{}{sep}{prefix}{worker}/", w.target)
    } else {
        format!("{}{sep}{prefix}put/", w.target)
    }
}

/// The `CleanupAbandoned` message: the workers cut short (bounded), each with where it
/// writes, and why.
pub fn abandoned_message(w: &Workload, abandoned: &[String], what: &str) -> String {
    let named: Vec<String> = abandoned
        .iter()
        .map(|name| format!("{name} ({})", left_under(w, name)))
        .collect();
    format!(
        "workers {} had not finished removing what they created {}s after {what}; their pods were deleted and objects under those prefixes may be left",
        run_rules::bounded_list(&named, NAMED_AT_MOST),
        CLEANUP_BOUND.as_secs(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
    }

    const POLL: Duration = Duration::from_secs(5);

    fn busy() -> Vec<String> {
        vec!["w1".to_string()]
    }

    #[test]
    fn only_done_and_failed_agents_have_finished_their_cleanup() {
        use AgentStage::*;
        for s in [Preparing, Ready, Running, CleaningUp] {
            assert!(at_work(s), "{s:?}");
        }
        assert!(!at_work(Done) && !at_work(Failed));
    }

    #[test]
    fn pods_go_at_once_when_no_worker_is_at_work() {
        assert_eq!(
            step(t0(), t0(), POLL, vec![]),
            CleanupStep::Delete { abandoned: vec![] }
        );
    }

    #[test]
    fn a_worker_at_work_keeps_its_pod_up_to_the_bound_then_is_named() {
        // Just finished: wait, a poll at most.
        assert_eq!(
            step(t0(), t0(), POLL, busy()),
            CleanupStep::Wait {
                busy: busy(),
                retry: POLL
            }
        );
        // Two seconds before the bound: look again when it passes, not a poll later.
        let late = t0() + chrono::Duration::seconds(118);
        assert_eq!(
            step(t0(), late, POLL, busy()),
            CleanupStep::Wait {
                busy: busy(),
                retry: Duration::from_secs(2)
            }
        );
        // At the bound (the same 120 s on every path): delete, naming the worker cut short.
        let bound = t0() + chrono::Duration::seconds(120);
        assert_eq!(
            step(t0(), bound, POLL, busy()),
            CleanupStep::Delete { abandoned: busy() }
        );
        // A clock behind the run's end waits, never deletes early.
        let before = t0() - chrono::Duration::seconds(30);
        assert!(matches!(
            step(t0(), before, POLL, busy()),
            CleanupStep::Wait { .. }
        ));
    }

    #[test]
    fn the_bound_starts_once_at_the_runs_end_or_deletion() {
        let later = t0() + chrono::Duration::seconds(90);
        let now = t0() + chrono::Duration::seconds(100);
        assert_eq!(bound_start(Some(t0()), None, now), t0());
        assert_eq!(bound_start(None, Some(later), now), later);
        // Finished, then deleted while its workers clean up: still from the end.
        assert_eq!(bound_start(Some(t0()), Some(later), now), t0());
        assert_eq!(bound_start(Some(later), Some(t0()), now), t0());
        assert_eq!(bound_start(None, None, now), now);
    }

    fn workload(yaml: &str) -> Workload {
        serde_yaml::from_str(yaml).expect("workload")
    }

    #[test]
    fn the_message_names_each_worker_and_where_it_writes() {
        let w = workload("{target: s3://bkt/base, duration: 5s, ops: [{op: get}]}");
        assert_eq!(left_under(&w, "w0"), "s3://bkt/base/benchrun/w0/");
        let w = workload(
            "{target: s3://bkt/, duration: 5s, ops: [{op: put}], dataset: {prepare: false, prefix: p/}}",
        );
        assert_eq!(left_under(&w, "w0"), "s3://bkt/p/put/");
        let names: Vec<String> = (0..12).map(|i| format!("w{i}")).collect();
        let msg = abandoned_message(&w, &names, "the run failed");
        assert!(
            msg.starts_with("workers w0 (s3://bkt/p/put/), w1 (s3://bkt/p/put/)"),
            "{msg}"
        );
        assert!(
            msg.contains(
                "and 2 more had not finished removing what they created 120s after the run failed"
            ),
            "{msg}"
        );
    }
}
