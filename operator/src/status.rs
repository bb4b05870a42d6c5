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
use crate::state::{self, cond};
use crate::{results, Result};

/// Events of one reason in one pass beyond which they are published as one event with a
/// count (a fleet of 1,000 would otherwise write 1,000 "Collected" events one by one).
const EVENTS_PER_REASON: usize = 5;

/// Write the whole status by server-side apply under the operator's field manager, and
/// remember the version it made (see [`Context::is_stale`]).
pub(crate) async fn write_status(
    ctx: &Context,
    ns: &str,
    name: &str,
    status: &BenchmarkRunStatus,
) -> Result<()> {
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), ns);
    let patch = serde_json::json!({
        "apiVersion": "benchrun.dev/v1alpha1",
        "kind": "BenchmarkRun",
        "status": status,
    });
    let written = api
        .patch_status(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    ctx.wrote(&format!("{ns}/{name}"), written.metadata.resource_version);
    Ok(())
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
        state::set_condition(
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

    /// Fail the run: condition `Complete=False` with the reason, event, finish time.
    pub(crate) fn fail(&mut self, reason: &str, message: String) {
        self.condition(cond::COMPLETE, false, reason, message.clone());
        self.status.finish_time = Some(self.now.to_rfc3339());
        self.status.progress = None;
        self.set_phase(Phase::Failed, reason, message);
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
        if let Some(f) = figures {
            results::fold_worker(w, f);
        }
    }

    /// `workersSummary` and `workerPhases` from the workers' phases.
    pub(crate) fn refresh_counts(&mut self) {
        self.status.workers_summary = Some(state::workers_summary(&self.status.workers));
        self.status.worker_phases = state::phase_counts(&self.status.workers);
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
