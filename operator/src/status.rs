//! The status a pass builds (a [`Draft`]: conditions, phase changes, worker transitions,
//! events), and how it is published: status writes by server-side apply, events through the
//! operator's one `Recorder`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource};
use tracing::warn;

use crate::context::Context;
use crate::crd::{BenchmarkRun, BenchmarkRunStatus, Phase, WorkerPhase};
use crate::resources::MANAGER;
use crate::run_rules::{self, cond};
use crate::{results, Result};

/// Events of one reason in one pass beyond which they are published as one event with a
/// count (a fleet of 1,000 would otherwise write 1,000 "Collected" events one by one).
const EVENTS_PER_REASON: usize = 5;

/// What became of a status write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// Written; the run's new resource version.
    At(Option<String>),
    /// The run changed since the version the pass read (another operator process wrote it, or
    /// a user changed it): nothing written. The pass's decisions were taken on an old copy;
    /// the next pass decides again on the new one.
    Conflict,
}

/// Write the whole status by server-side apply under the operator's field manager, only if
/// the run is still at `resource_version` (the version the pass read, or its own last write):
/// a compare-and-swap on the run. Two operator processes (a `helm upgrade` running the old and
/// the new together, a stale cache) can then never both record a one-shot decision (the
/// placement, the start time), nor one overwrite the other's with a status read before it.
/// Remembers the version it made (see [`Context::is_stale`]).
pub(crate) async fn write_status(
    ctx: &Context,
    ns: &str,
    name: &str,
    status: &BenchmarkRunStatus,
    resource_version: Option<&str>,
) -> Result<Written> {
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), ns);
    let patch = status_apply(status, resource_version);
    match api
        .patch_status(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        Ok(written) => {
            let rv = written.metadata.resource_version;
            ctx.wrote(&format!("{ns}/{name}"), rv.clone());
            Ok(Written::At(rv))
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Written::Conflict),
        Err(e) => Err(e.into()),
    }
}

/// The apply body of a status write: the resource version in it is the write's precondition.
fn status_apply(status: &BenchmarkRunStatus, resource_version: Option<&str>) -> serde_json::Value {
    let mut patch = serde_json::json!({
        "apiVersion": "benchrun.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "status": status,
    });
    if let Some(rv) = resource_version {
        patch["metadata"] = serde_json::json!({ "resourceVersion": rv });
    }
    patch
}

/// The status a pass builds and the events it will publish: pure (no API server, no network),
/// so the pass's decisions ([`crate::reconcile::decide`]) are unit-tested on it.
#[derive(Clone, Debug)]
pub(crate) struct Draft {
    pub(crate) status: BenchmarkRunStatus,
    /// The pass's one clock reading: every time it writes is this one.
    pub(crate) now: DateTime<Utc>,
    /// The spec generation the pass read (conditions record it).
    pub(crate) generation: Option<i64>,
    pub(crate) events: Vec<(EventType, String, String)>,
}

impl Draft {
    pub(crate) fn new(
        status: BenchmarkRunStatus,
        generation: Option<i64>,
        now: DateTime<Utc>,
    ) -> Draft {
        Draft {
            status,
            now,
            generation,
            events: Vec::new(),
        }
    }

    pub(crate) fn condition(
        &mut self,
        type_: &str,
        ok: bool,
        reason: &str,
        message: impl Into<String>,
    ) {
        run_rules::set_condition(
            &mut self.status.conditions,
            type_,
            ok,
            reason,
            message,
            self.generation,
            self.now,
        );
    }

    pub(crate) fn event(&mut self, t: EventType, reason: &str, note: impl Into<String>) {
        self.events.push((t, reason.into(), note.into()));
    }

    pub(crate) fn set_phase(&mut self, phase: Phase, reason: &str, note: impl Into<String>) {
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

    /// Fail the run: conditions `Complete=False` and `Failed=True` with the reason (so both
    /// `kubectl wait --for=condition=Complete=false` and `--for=condition=Failed` end on it),
    /// event, finish time.
    pub(crate) fn fail(&mut self, reason: &str, message: String) {
        self.condition(cond::COMPLETE, false, reason, message.clone());
        self.condition(cond::FAILED, true, reason, message.clone());
        self.status.finish_time = Some(self.now.to_rfc3339());
        self.status.progress = None;
        self.set_phase(Phase::Failed, reason, message);
    }

    /// The run succeeded: `Complete=True`, `Failed=False`, both with reason `Succeeded`.
    pub(crate) fn succeed(&mut self, condition_message: String, event_note: String) {
        self.condition(cond::COMPLETE, true, "Succeeded", condition_message.clone());
        self.condition(cond::FAILED, false, "Succeeded", condition_message);
        self.set_phase(Phase::Succeeded, "Succeeded", event_note);
    }

    pub(crate) fn worker_failed(&mut self, i: usize, reason: &str, msg: String) {
        let w = &mut self.status.workers[i];
        if w.phase == WorkerPhase::Failed {
            return;
        }
        w.phase = WorkerPhase::Failed;
        w.message = Some(msg.clone());
        let note = format!("worker {} (pod {}): {msg}", w.name, w.pod);
        self.event(EventType::Warning, reason, note);
    }

    pub(crate) fn lose(&mut self, i: usize, why: &str) {
        let w = &mut self.status.workers[i];
        if w.phase == WorkerPhase::Lost {
            return;
        }
        w.phase = WorkerPhase::Lost;
        w.message = Some(why.into());
        let note = format!(
            "worker {} (pod {}, node {}): {why}",
            w.name,
            w.pod,
            w.node.as_deref().unwrap_or("?")
        );
        self.event(EventType::Warning, "WorkerLost", note);
    }

    /// The worker's summary is persisted: it counts, with these figures when they are known.
    pub(crate) fn mark_collected(&mut self, i: usize, figures: Option<&results::WorkerFigures>) {
        let w = &mut self.status.workers[i];
        w.phase = WorkerPhase::Collected;
        w.summary_read_failures = None;
        if let Some(f) = figures {
            results::fold_worker(w, f);
        }
    }

    /// `workersSummary` and `workerPhases` from the workers' phases.
    pub(crate) fn refresh_counts(&mut self) {
        self.status.workers_summary = Some(run_rules::workers_summary(&self.status.workers));
        self.status.worker_phases = run_rules::phase_counts(&self.status.workers);
    }
}

/// Publish a pass's events through the operator's one `Recorder`, grouped by reason.
pub(crate) async fn publish_events(
    ctx: &Context,
    run: &BenchmarkRun,
    events: &[(EventType, String, String)],
) {
    if events.is_empty() {
        return;
    }
    let reference = run.object_ref(&());
    for (t, reason, note) in &group_events(events, EVENTS_PER_REASON) {
        let ev = Event {
            type_: *t,
            reason: reason.clone(),
            note: Some(note.chars().take(1000).collect()),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
            warn!(
                "event {reason} for {}/{}: {e}",
                run.metadata.namespace.as_deref().unwrap_or_default(),
                run.metadata.name.as_deref().unwrap_or_default()
            );
        }
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

    #[test]
    fn every_status_write_is_conditional_on_the_version_read() {
        let st = BenchmarkRunStatus {
            start_time: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        };
        let p = status_apply(&st, Some("41"));
        assert_eq!(p["metadata"]["resourceVersion"], "41");
        assert_eq!(p["status"]["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(p["kind"], "BenchmarkRun");
        assert!(status_apply(&st, None).get("metadata").is_none());
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
