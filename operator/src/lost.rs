//! When a worker is lost although its pod still says Running (pure: no API server, no
//! network, so unit tests cover every rule).
//!
//! A node that stops answering does not evict its pods when they tolerate every taint
//! (`tolerations: [{operator: Exists}]`, usual for per-node runs): the pod stays Running in
//! the API server for ever, and only the run's deadline would end the wait. A worker is
//! lost here, before that, when its agent does not answer and either
//! - its node is gone, or its `Ready` condition has been False or Unknown for
//!   [`NODE_LOST_AFTER`] (the node lifecycle controller's own grace period), or
//! - the run's measured stage should have ended [`AGENT_LOST_GRACE`] ago and the agent has
//!   been silent for at least [`crate::run_rules::AGENT_SILENCE`].
//!
//! An agent that answers is never lost, whatever its node says: a stopped kubelet leaves its
//! containers running, and their results are collected as usual.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Node;

use crate::crd::{BenchmarkRunSpec, WorkerStatus};

/// How long a node's `Ready` condition is False or Unknown before its silent worker is lost:
/// the node lifecycle controller's `node-monitor-grace-period` (40 s), so that a kubelet
/// restart or an API-server blip does not cost a result.
pub const NODE_LOST_AFTER: Duration = Duration::from_secs(40);

/// How long after the run's expected end (start + warm-up + duration) a silent agent is given
/// before its worker is lost: a network cut that heals within it loses nothing.
pub const AGENT_LOST_GRACE: Duration = Duration::from_secs(120);

/// What the API server says of a worker's node.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeHealth {
    /// Ready, or no Ready condition to judge by.
    Ready,
    /// Its `Ready` condition is False or Unknown since `since`.
    NotReady {
        /// The condition's status (`False`, `Unknown`).
        status: String,
        /// Since when (the condition's last transition).
        since: DateTime<Utc>,
        /// The condition's message (the node controller's, or the kubelet's).
        message: String,
    },
    /// No such node (deleted, e.g. by an autoscaler).
    Gone,
}

/// The health of a node as read at `now` (`None`: the node does not exist).
pub fn node_health(node: Option<&Node>, now: DateTime<Utc>) -> NodeHealth {
    let Some(node) = node else {
        return NodeHealth::Gone;
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status != "True" => NodeHealth::NotReady {
            status: c.status.clone(),
            since: c
                .last_transition_time
                .as_ref()
                .map(crate::run_rules::from_time)
                // No transition time: judged from now on, never lost at once.
                .unwrap_or(now),
            message: c.message.clone().unwrap_or_default(),
        },
        _ => NodeHealth::Ready,
    }
}

/// When the run's measured stage should end: the start plus the warm-up and the duration.
/// `None` for a run that counts operations (no duration: its end cannot be foreseen).
pub fn expected_end(spec: &BenchmarkRunSpec, start: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let duration = spec.workload.duration?.0;
    let warmup = spec.workload.warmup.map_or(Duration::ZERO, |w| w.0);
    let d = chrono::Duration::from_std(duration.saturating_add(warmup)).ok()?;
    start.checked_add_signed(d)
}

/// Why this worker is lost, or `None` while it may still answer. `node` is its node's health
/// when it was read this pass; `end` the run's [`expected_end`].
pub fn lost_worker(
    w: &WorkerStatus,
    node: Option<&NodeHealth>,
    end: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<String> {
    // Only a silent agent: one that answers keeps its worker, whatever its node says.
    let silent_since = w
        .unanswered_since
        .as_deref()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())?
        .with_timezone(&Utc);
    let silent = (now - silent_since).to_std().unwrap_or_default();
    let node_name = w.node.as_deref().unwrap_or("?");
    match node {
        Some(NodeHealth::Gone) => {
            return Some(format!(
                "its node {node_name} no longer exists and its agent has not answered for {}s",
                silent.as_secs()
            ));
        }
        Some(NodeHealth::NotReady {
            status,
            since,
            message,
        }) => {
            let down = (now - *since).to_std().unwrap_or_default();
            if down >= NODE_LOST_AFTER {
                let why = if message.is_empty() {
                    String::new()
                } else {
                    format!(": {message}")
                };
                return Some(format!(
                    "its node {node_name} is NotReady (Ready={status} for {}s{why}) and its agent has not answered for {}s",
                    down.as_secs(),
                    silent.as_secs()
                ));
            }
        }
        Some(NodeHealth::Ready) | None => {}
    }
    let end = end?;
    let past = (now - end).to_std().ok()?;
    if past >= AGENT_LOST_GRACE && silent >= crate::run_rules::AGENT_SILENCE {
        return Some(format!(
            "its agent has not answered for {}s, and the run should have ended {}s ago (node {node_name})",
            silent.as_secs(),
            past.as_secs()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::WorkerPhase;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-25T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
    }

    fn secs(n: i64) -> chrono::Duration {
        chrono::Duration::seconds(n)
    }

    fn node(status: &str, since: DateTime<Utc>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: status.into(),
                    message: Some("Kubelet stopped posting node status.".into()),
                    last_transition_time: Some(crate::run_rules::to_time(since)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A running worker on `vm2` whose agent has not answered since `silent_since`, if any.
    fn worker(silent_since: Option<DateTime<Utc>>) -> WorkerStatus {
        WorkerStatus {
            name: "w1".into(),
            pod: "bench-w1".into(),
            node: Some("vm2".into()),
            phase: WorkerPhase::Running,
            unanswered_since: silent_since.map(|t| t.to_rfc3339()),
            ..Default::default()
        }
    }

    #[test]
    fn node_health_reads_the_ready_condition() {
        assert_eq!(node_health(None, now()), NodeHealth::Gone);
        assert_eq!(
            node_health(Some(&node("True", now())), now()),
            NodeHealth::Ready
        );
        assert_eq!(
            node_health(Some(&Node::default()), now()),
            NodeHealth::Ready,
            "no condition: nothing to judge by"
        );
        assert_eq!(
            node_health(Some(&node("Unknown", now() - secs(50))), now()),
            NodeHealth::NotReady {
                status: "Unknown".into(),
                since: now() - secs(50),
                message: "Kubelet stopped posting node status.".into(),
            }
        );
    }

    #[test]
    fn the_expected_end_is_start_plus_warmup_plus_duration() {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///d, duration: 60s, warmup: 10s, ops: [{op: get}]}\n",
        )
        .expect("spec");
        assert_eq!(expected_end(&spec, now()), Some(now() + secs(70)));
        let counted: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///d, totalOps: 100, ops: [{op: get}]}\n",
        )
        .expect("spec");
        assert_eq!(expected_end(&counted, now()), None);
    }

    #[test]
    fn an_answering_agent_is_never_lost_whatever_its_node_says() {
        let gone = NodeHealth::Gone;
        let down = node_health(Some(&node("Unknown", now() - secs(600))), now());
        for n in [Some(&gone), Some(&down), None] {
            assert_eq!(
                lost_worker(&worker(None), n, Some(now() - secs(3600)), now()),
                None
            );
        }
    }

    #[test]
    fn a_silent_agent_on_a_node_not_ready_past_the_bound_is_lost() {
        let w = worker(Some(now() - secs(5)));
        // NotReady for 39 s: a kubelet restart, not yet a lost node.
        let recent = node_health(Some(&node("Unknown", now() - secs(39))), now());
        assert_eq!(lost_worker(&w, Some(&recent), None, now()), None);
        let down = node_health(Some(&node("Unknown", now() - secs(40))), now());
        assert_eq!(
            lost_worker(&w, Some(&down), None, now()).as_deref(),
            Some("its node vm2 is NotReady (Ready=Unknown for 40s: Kubelet stopped posting node status.) and its agent has not answered for 5s")
        );
        let down = node_health(Some(&node("False", now() - secs(300))), now());
        assert!(lost_worker(&w, Some(&down), None, now()).is_some());
        assert_eq!(
            lost_worker(&w, Some(&NodeHealth::Gone), None, now()).as_deref(),
            Some("its node vm2 no longer exists and its agent has not answered for 5s")
        );
        assert_eq!(lost_worker(&w, Some(&NodeHealth::Ready), None, now()), None);
    }

    #[test]
    fn a_silent_agent_past_the_expected_end_and_its_grace_is_lost() {
        let grace = secs(AGENT_LOST_GRACE.as_secs() as i64);
        let end = now() - grace;
        // Silent for 60 s, the grace passed: lost, even with its node Ready (a partition).
        let w = worker(Some(now() - secs(60)));
        assert_eq!(
            lost_worker(&w, Some(&NodeHealth::Ready), Some(end), now()).as_deref(),
            Some("its agent has not answered for 60s, and the run should have ended 120s ago (node vm2)")
        );
        // One second before the grace ends: still waited for.
        assert_eq!(lost_worker(&w, None, Some(end + secs(1)), now()), None);
        // Silent for less than AGENT_SILENCE: a blip, not a loss.
        let blip = worker(Some(now() - secs(10)));
        assert_eq!(lost_worker(&blip, None, Some(end), now()), None);
        // No foreseeable end (an op-count run): only the node can say.
        assert_eq!(lost_worker(&w, None, None, now()), None);
    }
}
