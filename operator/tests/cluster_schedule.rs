//! `BenchmarkSchedule` on the real test cluster, every minute: its runs are owned by it and
//! named `<schedule>-<unix minutes>`; with `Forbid`, a time that comes while a run is active
//! is not started beside it (an event says so) and is started once that run ends; that second
//! run is compared with the first (`baselineRef`); the history limit deletes the older run.
//! The rules themselves (missed times, deadlines, time zones) are unit-tested in
//! `operator/src/schedule/decide_tests.rs`; this checks the controller does them for real.
//!
//! Takes two to three minutes: it waits for real minute ticks, each wait bounded and on
//! observable state. Fails (never skips) when the cluster is not up.
//!
//! `a_slower_run_regresses_against_the_median` (about a minute, no minute ticks: its runs are
//! asked for with `benchrun.dev/run-now`): a run made slower by a rate limit is `Regressed`
//! against the median of the schedule's good runs, with the op named on the run, in the
//! schedule's status, in an Event and in `benchrun_schedule_last_run_regressed`; and the
//! chart's `BenchrunScheduleRegressed` expression, evaluated by promtool on the series the
//! operator exported, fires for it (and not for the good run before).

mod common;

use std::time::Duration;

use benchrun_operator::crd::schedule::{BenchmarkSchedule, BenchmarkScheduleSpec};
use benchrun_operator::crd::{BenchmarkRun, Phase};
use benchrun_operator::schedule::decide::{requested_run_name, run_name};
use benchrun_operator::schedule::{RUN_NOW, SCHEDULED_AT, SCHEDULE_LABEL};
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

const MEDIAN: &str = "median";

/// Ask the schedule for a run now, as `kubectl benchrun schedule run` does; its name.
async fn run_now(schedules: &Api<BenchmarkSchedule>) -> String {
    let now = chrono::Utc::now();
    let request = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    schedules
        .patch(
            MEDIAN,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {RUN_NOW: request}}})),
        )
        .await
        .expect("annotate run-now");
    requested_run_name(MEDIAN, now)
}

/// The exported `benchrun_schedule_last_run_regressed` series of the schedule, as
/// (`name{labels}`, value).
fn regressed_series(text: &str, ns: &str) -> Option<(String, f64)> {
    text.lines()
        .filter(|l| l.starts_with("benchrun_schedule_last_run_regressed{"))
        .filter(|l| {
            l.contains(&format!("namespace=\"{ns}\""))
                && l.contains(&format!("schedule=\"{MEDIAN}\""))
        })
        .find_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.trim().parse().ok()?))
        })
}

/// The chart's `BenchrunScheduleRegressed` expression (a literal in the template).
fn chart_alert_expr() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/benchrun/templates/prometheusrule.yaml"
    );
    let text = std::fs::read_to_string(path).expect("read the chart's PrometheusRule");
    let mut lines = text
        .lines()
        .skip_while(|l| l.trim() != "- alert: BenchrunScheduleRegressed");
    lines
        .next()
        .expect("the chart has BenchrunScheduleRegressed");
    let expr = lines
        .find_map(|l| l.trim().strip_prefix("expr:"))
        .expect("its expr")
        .trim()
        .to_string();
    assert!(
        !expr.contains("{{"),
        "the expr is templated; render the chart instead: {expr}"
    );
    expr
}

#[ignore = "needs the test cluster: `make cluster`, or tests/cluster/up.sh then `cargo test -- --include-ignored`"]
#[tokio::test]
async fn a_slower_run_regresses_against_the_median() {
    let env = env("op-schedule-median").await;
    let (_op, metrics) = spawn_operator_with_metrics(&env);
    let ns = env.ns.name().to_string();
    let schedules: Api<BenchmarkSchedule> = Api::namespaced(env.client.clone(), &ns);
    let run_api: Api<BenchmarkRun> = Api::namespaced(env.client.clone(), &ns);
    // Once a year: every run of this test is asked for.
    let spec: BenchmarkScheduleSpec = serde_yaml::from_str(
        r#"
schedule: "0 0 1 1 *"
baseline: {policy: MedianOfLast, count: 3, tolerancePercent: 50}
runTemplate:
  workload:
    target: file:///data/bench
    duration: 8s
    concurrency: 2
    ops: [{op: get}]
    objectSize: 4KiB
    dataset: {objects: 8}
  workers:
    count: 1
    resources: {limits: {cpu: 500m, memory: 128Mi}, requests: {cpu: 50m, memory: 32Mi}}
  volume: {emptyDir: {sizeLimit: 16Mi}}
  startDelay: 2s
  timeout: 2m
"#,
    )
    .expect("schedule spec parses");
    schedules
        .create(
            &PostParams::default(),
            &BenchmarkSchedule::new(MEDIAN, spec),
        )
        .await
        .expect("create schedule");

    // A good run: nothing to compare with yet.
    let good = run_now(&schedules).await;
    let run = wait_succeeded_within(&run_api, &good).await;
    assert_eq!(run.spec.baseline_ref, None);
    let labels = run.labels().get(SCHEDULE_LABEL).cloned();
    assert_eq!(labels.as_deref(), Some(MEDIAN));
    // The schedule has seen its verdict: the metric says 0.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let before = loop {
        if let Some(s) = regressed_series(&metrics.render(), &ns) {
            break s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no benchrun_schedule_last_run_regressed"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(before.1, 0.0, "{before:?}");

    // The same benchmark held to 20 ops/s: far below the first run's.
    schedules
        .patch(
            MEDIAN,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"runTemplate": {"workload": {"rateLimit": 20}}}}),
            ),
        )
        .await
        .expect("add a rate limit");
    let slow = run_now(&schedules).await;
    assert_ne!(slow, good);
    let run = wait_succeeded_within(&run_api, &slow).await;
    let r = run.spec.baseline_ref.clone().expect("a baseline");
    assert_eq!(
        (r.run, r.runs.clone()),
        (None, vec![good.clone()]),
        "the median of the one good run"
    );
    let st = run.status.clone().expect("status");
    let b = st.baseline.clone().expect("status.baseline");
    assert_eq!(b.source, format!("median of 1 run: {good}"));
    assert!(
        b.regressions.iter().any(|g| g.starts_with("get ops/s")),
        "the get op is named: {b:#?}"
    );
    // Beyond the tolerance and significant: the rank-sum test of the runs' per-second
    // throughput (8 full seconds each, every one of the slow run's below every one of the
    // good run's) is reported with its p-value, below 0.01.
    let t = b.deltas["get"]
        .ops_per_sec_test
        .clone()
        .expect("the throughput test");
    assert_eq!((t.test.as_str(), t.runs), ("rank-sum", 1), "{t:?}");
    assert!(
        t.significant && t.p_value.is_some_and(|p| p < 0.01),
        "{t:?}"
    );
    assert!(
        b.regressions
            .iter()
            .any(|g| g.starts_with("get ops/s") && g.contains("; rank-sum p=")),
        "the p-value is in the verdict: {b:#?}"
    );
    let c = condition(&run, "Regressed").expect("Regressed");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "Regressed"),
        "{c:?}"
    );
    assert!(
        c.message.contains("get ops/s") && c.message.contains("rank-sum p="),
        "{}",
        c.message
    );

    // The schedule: verdict, the op that moved, and the baseline told as fewer than asked.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let st = schedules
            .get(MEDIAN)
            .await
            .expect("schedule")
            .status
            .unwrap_or_default();
        let rec = st.recent_runs.iter().find(|r| r.name == slow);
        if st.last_verdict.as_deref() == Some("Regressed")
            && rec.is_some_and(|r| r.verdict.is_some())
        {
            let rec = rec.expect("recent run");
            assert_eq!(rec.verdict.as_deref(), Some("Regressed"));
            assert!(
                rec.regressions
                    .iter()
                    .any(|g| g.starts_with("get ops/s") && g.contains("rank-sum p=")),
                "{rec:#?}"
            );
            assert_eq!(
                rec.baseline.as_deref(),
                Some(format!("median of {good} (1 of the 3 runs asked: the schedule has no more good runs yet)").as_str())
            );
            let c = st
                .conditions
                .iter()
                .find(|c| c.type_ == "LastRunRegressed")
                .expect("LastRunRegressed");
            assert_eq!(c.status, "True");
            assert!(c.message.contains("get ops/s"), "{}", c.message);
            // The regressed run is no baseline: the next is still compared with the good one.
            assert!(
                st.baseline_run
                    .as_deref()
                    .is_some_and(|b| b.starts_with(&format!("median of {good} "))),
                "{st:#?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Regressed verdict: {st:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), &ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = events.list(&ListParams::default()).await.expect("events");
        let ev = list.items.iter().find(|e| {
            e.reason.as_deref() == Some("RunRegressed")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(MEDIAN)
        });
        if let Some(ev) = ev {
            let note = ev.note.clone().unwrap_or_default();
            assert_eq!(ev.type_.as_deref(), Some("Warning"));
            assert!(
                note.contains(&slow) && note.contains("get ops/s") && note.contains("p="),
                "{note}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no RunRegressed event"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let after = regressed_series(&metrics.render(), &ns).expect("the series");
    assert_eq!(after.1, 1.0, "{after:?}");

    // The chart's alert expression, evaluated by Prometheus' own engine (promtool) on the
    // series exactly as exported: silent on the good run's value, firing on the slow one's.
    let expr = chart_alert_expr();
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = serde_json::json!({"groups": [{"name": "chart", "rules": [
        {"alert": "BenchrunScheduleRegressed", "expr": expr}
    ]}]});
    std::fs::write(dir.path().join("rules.yaml"), rules.to_string()).expect("write rules");
    let case = |series: &(String, f64), fire: bool| {
        let exp: Vec<serde_json::Value> = if fire {
            vec![serde_json::json!({"exp_labels": {"namespace": ns, "schedule": MEDIAN}})]
        } else {
            vec![]
        };
        serde_json::json!({
            "interval": "1m",
            "input_series": [{"series": series.0, "values": format!("{}", series.1)}],
            "alert_rule_test": [{"eval_time": "0m", "alertname": "BenchrunScheduleRegressed", "exp_alerts": exp}],
        })
    };
    let test = serde_json::json!({
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [case(&before, false), case(&after, true)],
    });
    std::fs::write(dir.path().join("test.yaml"), test.to_string()).expect("write test");
    let out = std::process::Command::new("promtool")
        .args(["test", "rules", "test.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("run promtool (Debian package prometheus; tests/deps.txt lists it for the cluster stage)");
    assert!(
        out.status.success(),
        "promtool test rules: {}\n{}\nrules: {rules}\ntest: {test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Wait (120 s at most) for the run to be made and to finish; it must succeed.
async fn wait_succeeded_within(api: &Api<BenchmarkRun>, name: &str) -> BenchmarkRun {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(r) = api.get_opt(name).await.expect("read run") {
            if finished(&r) {
                assert_eq!(phase(&r), Phase::Succeeded, "{:#?}", r.status);
                return r;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {name} not finished after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
