//! The schedule controller: watches schedules and the runs they own; each pass observes (the
//! schedule's runs, by label), decides ([`super::decide`], pure) and acts (deletes, creates,
//! writes the status, publishes events, sets the metrics), then sleeps until the next
//! scheduled time. No polling: a pass runs on a change of the schedule's spec, labels or
//! annotations, on a change of one of its runs' phase or verdict, and at the next time.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use kube::api::{
    DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{predicates, watcher, Controller, Predicate, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{warn, Instrument};

use crate::children::{delete_owned, Deleted};
use crate::crd::baseline::BaselineRef;
use crate::crd::schedule::{BenchmarkSchedule, BenchmarkScheduleStatus};
use crate::crd::{BenchmarkRun, BenchmarkRunStatus, Phase};
use crate::metrics::Metrics;
use crate::resources::MANAGER;
use crate::run_rules::{condition, parse_time};
use crate::{decode, Error, Result};

use super::decide::{decide, Plan, RunView};
use super::{SCHEDULED_AT, SCHEDULE_LABEL};

/// Retry delay of a failed pass.
const RETRY: std::time::Duration = std::time::Duration::from_secs(10);
/// A pass for the next time runs this long after it, so that the time is surely past.
const SLACK: std::time::Duration = std::time::Duration::from_millis(500);
/// Longest event note.
const MAX_NOTE: usize = 1000;

struct Ctx {
    client: Client,
    recorder: Recorder,
    metrics: Arc<Metrics>,
}

/// Run the schedule controller until `shutdown` completes.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> Result<()> {
    let ar = decode::api_resource();
    let (schedules, runs): (Api<BenchmarkSchedule>, Api<DynamicObject>) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced_with(client.clone(), ns, &ar),
        ),
        None => (Api::all(client.clone()), Api::all_with(client.clone(), &ar)),
    };
    let writer = kube::runtime::reflector::store::Writer::<BenchmarkSchedule>::default();
    let store = writer.as_reader();
    let forget = {
        let metrics = metrics.clone();
        move |e: &watcher::Event<BenchmarkSchedule>| {
            if let watcher::Event::Delete(s) = e {
                metrics.forget_schedule(&s.namespace().unwrap_or_default(), &s.name_any());
            }
        }
    };
    // The controller's own status writes do not trigger a pass.
    let schedule_changes = watcher(schedules, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |e| {
            if let Ok(e) = e {
                forget(e)
            }
        })
        .applied_objects()
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations),
            Default::default(),
        );
    // Runs of schedules: a pass when one changes phase or verdict (not on every progress
    // write of a running run), or is deleted.
    let run_changes = watcher(runs, watcher::Config::default().labels(SCHEDULE_LABEL))
        .default_backoff()
        .touched_objects()
        .predicate_filter(run_state, Default::default());
    let reporter = Reporter {
        controller: format!("{MANAGER}-schedule"),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        metrics,
    });
    Controller::for_stream(schedule_changes, store)
        .owns_stream_with(run_changes, ar)
        .graceful_shutdown_on(shutdown)
        .run(reconcile_traced, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                warn!("schedule reconcile: {e}");
            }
        })
        .await;
    Ok(())
}

/// What about a run wakes its schedule: its phase, its `Regressed` condition, its deletion.
fn run_state(obj: &DynamicObject) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let status = obj.data.get("status");
    status
        .and_then(|s| s.get("phase"))
        .and_then(|p| p.as_str())
        .hash(&mut h);
    let regressed = status
        .and_then(|s| s.get("conditions"))
        .and_then(|c| c.as_array())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Regressed"))
        })
        .and_then(|c| c.get("status"))
        .and_then(|s| s.as_str());
    regressed.hash(&mut h);
    obj.metadata.deletion_timestamp.is_some().hash(&mut h);
    Some(h.finish())
}

fn error_policy(s: Arc<BenchmarkSchedule>, err: &Error, ctx: Arc<Ctx>) -> Action {
    warn!(
        "schedule {} failed: {err}; retrying in {}s",
        s.name_any(),
        RETRY.as_secs()
    );
    ctx.metrics.error(err.metric_label());
    Action::requeue(RETRY)
}

async fn reconcile_traced(s: Arc<BenchmarkSchedule>, ctx: Arc<Ctx>) -> Result<Action> {
    let span = tracing::info_span!(
        "schedule",
        namespace = %s.namespace().unwrap_or_default(),
        schedule = %s.name_any()
    );
    reconcile(s, ctx).instrument(span).await
}

/// One pass: observe, decide, act.
async fn reconcile(s: Arc<BenchmarkSchedule>, ctx: Arc<Ctx>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile();
    if s.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = s
        .namespace()
        .ok_or_else(|| Error::Invalid("a schedule without a namespace".into()))?;
    let name = s.name_any();
    let uid = s
        .uid()
        .ok_or_else(|| Error::Invalid(format!("schedule {name} has no uid")))?;
    let ar = decode::api_resource();
    let runs_api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ar);

    // Observe: the runs labelled with the schedule and owned by it (a label alone can be
    // copied; the owner reference says which were made by this schedule).
    let listed = runs_api
        .list(&ListParams::default().labels(&format!("{SCHEDULE_LABEL}={name}")))
        .await?;
    let owned: Vec<DynamicObject> = listed
        .items
        .into_iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect();
    let views: Vec<(RunView, BenchmarkRunStatus)> = owned.iter().map(run_view).collect();
    let status = s.status.clone().unwrap_or_default();
    let created = s
        .metadata
        .creation_timestamp
        .as_ref()
        .map(crate::run_rules::from_time)
        .unwrap_or_else(Utc::now);
    let now = Utc::now();
    let plan = decide(&super::decide::View {
        name: &name,
        generation: s.metadata.generation,
        created,
        spec: &s.spec,
        status: &status,
        runs: views.iter().map(|(v, _)| v.clone()).collect(),
        run_now: s.annotations().get(super::RUN_NOW).map(String::as_str),
        now,
    });

    // Act.
    let mut plan = plan;
    act(&s, &ns, &runs_api, &owned, &mut plan, &ctx).await?;
    write_status(&ctx.client, &ns, &name, &plan.status).await?;
    publish(&ctx, &s, &plan).await;
    let last_good = views
        .iter()
        .filter(|(v, _)| v.phase == Phase::Succeeded)
        .max_by_key(|(v, _)| v.scheduled)
        .map(|(_, st)| st);
    ctx.metrics
        .observe_schedule(&ns, &name, &plan.status, last_good);
    Ok(match plan.requeue_at {
        Some(t) => Action::requeue((t - Utc::now()).to_std().unwrap_or_default() + SLACK),
        None => Action::await_change(),
    })
}

/// Deletes, then the create; a run the API server refuses becomes a Warning event and the time
/// counts as scheduled (no retry loop on a template it will keep refusing). The runs deleted
/// are among `owned`, as this pass read them: each by its UID, so a run made under the same
/// name since (by a user, or by the schedule again) is left alone.
async fn act(
    s: &BenchmarkSchedule,
    ns: &str,
    runs_api: &Api<DynamicObject>,
    owned: &[DynamicObject],
    plan: &mut Plan,
    ctx: &Ctx,
) -> Result<()> {
    for run in to_delete(&plan.delete, owned) {
        if delete_owned(runs_api, run, s, DeleteParams::background()).await? == Deleted::NotOurs {
            warn!(
                "run {} changed since it was read: not deleted",
                run.name_any()
            );
        }
    }
    let Some(new) = &plan.create else {
        return Ok(());
    };
    let mut spec = s.spec.run_template.clone();
    spec.baseline_ref = match (&new.baseline, new.median_of.is_empty()) {
        (Some(b), _) => Some(BaselineRef {
            run: Some(b.clone()),
            tolerance_percent: s.spec.baseline.tolerance_percent,
            ..Default::default()
        }),
        (None, false) => Some(BaselineRef {
            runs: new.median_of.clone(),
            tolerance_percent: s.spec.baseline.tolerance_percent,
            ..Default::default()
        }),
        (None, true) => None,
    };
    let owner = s
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Invalid("schedule without name or uid".into()))?;
    let run = BenchmarkRun {
        metadata: ObjectMeta {
            name: Some(new.name.clone()),
            namespace: Some(ns.to_string()),
            labels: Some(BTreeMap::from([(SCHEDULE_LABEL.to_string(), s.name_any())])),
            annotations: Some(BTreeMap::from([(
                SCHEDULED_AT.to_string(),
                new.scheduled.to_rfc3339(),
            )])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec,
        status: None,
    };
    let api: Api<BenchmarkRun> = Api::namespaced(ctx.client.clone(), ns);
    match api.create(&PostParams::default(), &run).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 422 => {
            let reason = if e.code == 409 {
                "RunNameTaken"
            } else {
                "RunRejected"
            };
            plan.notes.retain(|n| n.reason != "RunCreated");
            plan.notes.push(super::decide::Note {
                warning: true,
                reason,
                note: format!("cannot create run {}: {}", new.name, e.message),
            });
            plan.status.active.retain(|a| a != &new.name);
            plan.status.active_count = plan.status.active.len() as i32;
            plan.status.recent_runs.retain(|r| r.name != new.name);
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The runs of `owned` (as read) whose names the plan deletes; a name not among them is no
/// run of this schedule's, and nothing is deleted for it.
fn to_delete<'a>(
    names: &'a [String],
    owned: &'a [DynamicObject],
) -> impl Iterator<Item = &'a DynamicObject> {
    names
        .iter()
        .filter_map(|n| owned.iter().find(|r| r.metadata.name.as_ref() == Some(n)))
}

/// A run as the decision reads it, and its status (for the metrics).
fn run_view(obj: &DynamicObject) -> (RunView, BenchmarkRunStatus) {
    let raw = obj.data.get("status");
    let status: BenchmarkRunStatus = raw
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .unwrap_or_else(|| {
            // A status this version cannot read whole (written by another version): its phase
            // alone still tells active from finished, so such a run cannot block Forbid forever.
            let phase = raw
                .and_then(|s| s.get("phase"))
                .cloned()
                .and_then(|p| serde_json::from_value(p).ok())
                .unwrap_or_default();
            BenchmarkRunStatus {
                phase,
                ..Default::default()
            }
        });
    let created = obj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(crate::run_rules::from_time)
        .unwrap_or_default();
    let scheduled: DateTime<Utc> = obj
        .annotations()
        .get(SCHEDULED_AT)
        .and_then(|t| parse_time(t))
        .unwrap_or(created);
    let baseline_ref = obj.data.get("spec").and_then(|s| s.get("baselineRef"));
    let baseline = baseline_ref
        .and_then(|b| b.get("run"))
        .and_then(|r| r.as_str())
        .map(str::to_string);
    let median_of = baseline_ref
        .and_then(|b| b.get("runs"))
        .and_then(|r| r.as_array())
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let regressed = condition(&status.conditions, crate::run_rules::cond::REGRESSED)
        .is_some_and(|c| c.status == "True");
    let message = (status.phase == Phase::Failed)
        .then(|| condition(&status.conditions, crate::run_rules::cond::FAILED))
        .flatten()
        .map(|c| c.message.chars().take(300).collect());
    let view = RunView {
        name: obj.name_any(),
        scheduled,
        phase: status.phase,
        regressed,
        regressions: status
            .baseline
            .as_ref()
            .map(|b| b.regressions.clone())
            .unwrap_or_default(),
        not_significant: status
            .baseline
            .as_ref()
            .map(|b| b.not_significant.clone())
            .unwrap_or_default(),
        baseline,
        median_of,
        finished_at: status.finish_time.as_deref().and_then(parse_time),
        throughput: status.throughput.clone(),
        p99: status.p99.clone(),
        message,
        deleting: obj.metadata.deletion_timestamp.is_some(),
    };
    (view, status)
}

async fn write_status(
    client: &Client,
    ns: &str,
    name: &str,
    status: &BenchmarkScheduleStatus,
) -> Result<()> {
    let api: Api<BenchmarkSchedule> = Api::namespaced(client.clone(), ns);
    let patch = serde_json::json!({
        "apiVersion": "benchrun.dev/v1alpha1",
        "kind": "BenchmarkSchedule",
        "status": status,
    });
    match api
        .patch_status(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        // Deleted meanwhile.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn publish(ctx: &Ctx, s: &BenchmarkSchedule, plan: &Plan) {
    let reference = s.object_ref(&());
    for n in &plan.notes {
        let ev = Event {
            type_: if n.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: n.reason.into(),
            note: Some(n.note.chars().take(MAX_NOTE).collect()),
            action: "Schedule".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&ev, &reference).await {
            warn!("event {} for schedule {}: {e}", n.reason, s.name_any());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(
        annotations: serde_json::Value,
        spec: serde_json::Value,
        status: serde_json::Value,
    ) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1",
            "kind": "BenchmarkRun",
            "metadata": {
                "name": "nightly-29000000",
                "namespace": "ns",
                "creationTimestamp": "2026-01-01T03:00:02Z",
                "annotations": annotations,
            },
            "spec": spec,
            "status": status,
        }))
        .expect("object")
    }

    #[test]
    fn a_run_is_read_with_its_time_baseline_and_verdict() {
        let obj = object(
            serde_json::json!({SCHEDULED_AT: "2026-01-01T03:00:00+00:00"}),
            serde_json::json!({"workload": {"target": "file:///d", "duration": "1s", "ops": [{"op": "get"}]}, "baselineRef": {"run": "nightly-1"}}),
            serde_json::json!({
                "phase": "Succeeded",
                "finishTime": "2026-01-01T03:01:00Z",
                "throughput": "100 ops/s",
                "conditions": [{"type": "Regressed", "status": "True", "reason": "Regressed", "message": "get", "lastTransitionTime": "2026-01-01T03:01:00Z"}],
                "baseline": {"source": "run nightly-1", "tolerancePercent": 10.0, "regressions": ["get p99"]},
            }),
        );
        let (v, _) = run_view(&obj);
        assert_eq!(v.scheduled, parse_time("2026-01-01T03:00:00Z").expect("t"));
        assert_eq!(v.phase, Phase::Succeeded);
        assert!(v.regressed);
        assert_eq!(v.regressions, vec!["get p99".to_string()]);
        assert_eq!(v.baseline.as_deref(), Some("nightly-1"));
        assert_eq!(v.verdict(), Some("Regressed"));
        assert_eq!(v.throughput.as_deref(), Some("100 ops/s"));
    }

    #[test]
    fn an_unreadable_status_still_gives_the_phase_and_no_annotation_the_creation() {
        let obj = object(
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!({"phase": "Failed", "workers": "not a list"}),
        );
        let (v, _) = run_view(&obj);
        assert_eq!(
            v.phase,
            Phase::Failed,
            "a finished run must not block Forbid"
        );
        assert_eq!(v.scheduled, parse_time("2026-01-01T03:00:02Z").expect("t"));
    }

    #[test]
    fn only_phase_verdict_and_deletion_wake_the_schedule() {
        let a = object(
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!({"phase": "Running", "progress": {"ops": 1}}),
        );
        let b = object(
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!({"phase": "Running", "progress": {"ops": 2}}),
        );
        let c = object(
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!({"phase": "Succeeded"}),
        );
        assert_eq!(run_state(&a), run_state(&b), "progress alone is no change");
        assert_ne!(run_state(&a), run_state(&c));
    }

    #[test]
    fn only_runs_read_as_the_schedules_are_deleted_in_the_plans_order() {
        let named = |n: &str| {
            let mut o = object(
                serde_json::json!({}),
                serde_json::json!({}),
                serde_json::json!({}),
            );
            o.metadata.name = Some(n.into());
            o
        };
        let owned = [named("nightly-1"), named("nightly-2"), named("nightly-3")];
        // `user-run` is not among those read as the schedule's: nothing is deleted for it.
        let plan = ["nightly-3", "user-run", "nightly-1"].map(String::from);
        let names: Vec<String> = to_delete(&plan, &owned).map(|r| r.name_any()).collect();
        assert_eq!(names, ["nightly-3", "nightly-1"]);
    }
}
