//! `BenchmarkSchedule` on the real test cluster, every minute: its runs are owned by it and
//! named `<schedule>-<unix minutes>`; with `Forbid`, a time that comes while a run is active
//! is not started beside it (an event says so) and is started once that run ends; that second
//! run is compared with the first (`baselineRef`); the history limit deletes the older run.
//! The rules themselves (missed times, deadlines, time zones) are unit-tested in
//! `operator/src/schedule/decide_tests.rs`; this checks the controller does them for real.
//!
//! Takes two to three minutes: it waits for real minute ticks, each wait bounded and on
//! observable state. Fails (never skips) when the cluster is not up.

mod common;

use std::time::Duration;

use benchrun_operator::crd::schedule::{BenchmarkSchedule, BenchmarkScheduleSpec};
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_operator::schedule::{decide::run_name, SCHEDULED_AT, SCHEDULE_LABEL};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

use common::*;

const NAME: &str = "tick";

/// The schedule: every minute, Forbid, one succeeded run kept; each run takes `duration`.
fn schedule_spec(duration: &str) -> BenchmarkScheduleSpec {
    let yaml = format!(
        r#"
schedule: "* * * * *"
concurrencyPolicy: Forbid
successfulRunsHistoryLimit: 1
failedRunsHistoryLimit: 1
# The runs differ in length; only a gross change would count as a regression here.
baseline: {{tolerancePercent: 1000}}
runTemplate:
  workload:
    target: file:///data/bench
    duration: {duration}
    concurrency: 2
    ops: [{{op: get}}]
    objectSize: 4KiB
    dataset: {{objects: 8}}
  workers:
    count: 1
    resources: {{limits: {{cpu: 500m, memory: 128Mi}}, requests: {{cpu: 50m, memory: 32Mi}}}}
  volume: {{emptyDir: {{sizeLimit: 16Mi}}}}
  startDelay: 2s
  timeout: 4m
"#
    );
    serde_yaml::from_str(&yaml).expect("schedule spec parses")
}

/// The runs of the schedule, oldest first by name (names grow with the scheduled minute).
async fn runs(api: &Api<BenchmarkRun>) -> Vec<BenchmarkRun> {
    let mut list = api
        .list(&ListParams::default().labels(&format!("{SCHEDULE_LABEL}={NAME}")))
        .await
        .expect("list runs")
        .items;
    list.retain(|r| r.metadata.deletion_timestamp.is_none());
    list.sort_by_key(|r| r.name_any());
    list
}

/// Poll the schedule's runs until `pred` holds; panic with them after `timeout`.
async fn wait_runs(
    api: &Api<BenchmarkRun>,
    timeout: Duration,
    what: &str,
    pred: impl Fn(&[BenchmarkRun]) -> bool,
) -> Vec<BenchmarkRun> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = runs(api).await;
        if pred(&list) {
            return list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {what} after {timeout:?}; runs: {:?}",
            list.iter()
                .map(|r| (r.name_any(), r.status.as_ref().map(|s| s.phase)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn every_minute_forbid_baselines_and_history() {
    let env = env("op-schedule").await;
    let _op = spawn_operator(&env);
    let schedules: Api<BenchmarkSchedule> = Api::namespaced(env.client.clone(), env.ns.name());
    let run_api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), env.ns.name());
    // The first run lasts 75 s, so the next minute's tick finds it active.
    let created = schedules
        .create(
            &PostParams::default(),
            &BenchmarkSchedule::new(NAME, schedule_spec("75s")),
        )
        .await
        .expect("create schedule");
    let uid = created.uid().expect("uid");

    // The first run: at the next minute (70 s at most from now).
    let list = wait_runs(&run_api, Duration::from_secs(75), "one run", |l| {
        !l.is_empty()
    })
    .await;
    assert_eq!(list.len(), 1);
    let first = &list[0];
    let at = first
        .annotations()
        .get(SCHEDULED_AT)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .expect("scheduled-at annotation")
        .with_timezone(&chrono::Utc);
    assert_eq!(first.name_any(), run_name(NAME, at), "named by its minute");
    assert_eq!(at.timestamp() % 60, 0, "scheduled on a minute");
    let owner = first
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .expect("a controller owner");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("BenchmarkSchedule", NAME, uid.as_str())
    );
    assert_eq!(
        first.spec.baseline_ref, None,
        "the first run has nothing to compare with"
    );
    let first_name = first.name_any();

    // The next tick comes while it runs: Forbid starts nothing beside it, and says so.
    let events: Api<Event> = Api::namespaced(env.client.clone(), env.ns.name());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(75);
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        if list.items.iter().any(|e| {
            e.reason.as_deref() == Some("RunAlreadyActive")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NAME)
        }) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no RunAlreadyActive event while {first_name} runs"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let list = runs(&run_api).await;
    assert_eq!(
        list.len(),
        1,
        "Forbid: no second run while the first is active"
    );
    assert!(!list[0]
        .status
        .as_ref()
        .is_some_and(|s| s.phase.is_finished()));

    // Later runs are short. The owed tick starts as soon as the first run ends.
    schedules
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"runTemplate": {"workload": {"duration": "2s"}}}}),
            ),
        )
        .await
        .expect("patch the template");
    let list = wait_runs(&run_api, Duration::from_secs(150), "a second run", |l| {
        l.iter().any(|r| r.name_any() != first_name)
    })
    .await;
    let second = list
        .iter()
        .find(|r| r.name_any() != first_name)
        .expect("second run");
    let second_name = second.name_any();
    let first_now = run_api.get(&first_name).await.expect("first run");
    assert_eq!(
        first_now.status.as_ref().map(|s| s.phase),
        Some(Phase::Succeeded),
        "the second run starts only after the first ended"
    );
    assert!(second_name > first_name, "{second_name} after {first_name}");
    assert_eq!(
        second
            .spec
            .baseline_ref
            .as_ref()
            .and_then(|b| b.run.as_deref()),
        Some(first_name.as_str()),
        "compared with the last good run"
    );
    assert_eq!(
        second
            .spec
            .baseline_ref
            .as_ref()
            .and_then(|b| b.tolerance_percent),
        Some(1000.0)
    );
    assert_eq!(
        second.spec.workload.duration.map(|d| d.0),
        Some(Duration::from_secs(2))
    );

    // It succeeds, compared with the first; history limit 1: the first is deleted.
    let done = wait_for(
        &run_api,
        &second_name,
        Duration::from_secs(120),
        "finished",
        finished,
    )
    .await;
    assert_eq!(phase(&done), Phase::Succeeded, "{:#?}", done.status);
    let baseline = done
        .status
        .as_ref()
        .and_then(|s| s.baseline.as_ref())
        .expect("compared");
    assert_eq!(baseline.source, format!("run {first_name}"));
    wait_runs(
        &run_api,
        Duration::from_secs(30),
        "the first run pruned",
        |l| l.iter().all(|r| r.name_any() != first_name),
    )
    .await;

    // The schedule's status tells the story.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = schedules.get(NAME).await.expect("schedule");
        let st = s.status.clone().unwrap_or_default();
        let verdicts: Vec<(String, Option<String>)> = st
            .recent_runs
            .iter()
            .map(|r| (r.name.clone(), r.verdict.clone()))
            .collect();
        let want_second = (second_name.clone(), Some("Succeeded".to_string()));
        let want_first = (first_name.clone(), Some("Succeeded".to_string()));
        if verdicts.contains(&want_second) && verdicts.contains(&want_first) {
            assert_eq!(st.last_verdict.as_deref(), Some("Succeeded"));
            // The second run (or, if a third finished meanwhile, that one): not the pruned first.
            assert!(
                st.baseline_run.is_some()
                    && st.baseline_run.as_deref() != Some(first_name.as_str()),
                "{st:#?}"
            );
            assert_eq!(st.failures_in_a_row, 0);
            assert!(st.last_successful_time.is_some());
            assert!(st.last_schedule_time.is_some());
            assert!(st.next_schedule_time.is_some());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "status.recentRuns lacks the verdicts: {st:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Suspended: the status says so, and no next time is planned.
    schedules
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspend");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let st = schedules
            .get(NAME)
            .await
            .expect("schedule")
            .status
            .unwrap_or_default();
        let suspended = st
            .conditions
            .iter()
            .any(|c| c.type_ == "Scheduling" && c.status == "False" && c.reason == "Suspended");
        if suspended {
            assert_eq!(st.next_schedule_time, None);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not suspended: {st:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
