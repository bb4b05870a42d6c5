//! `schedule`: BenchmarkSchedules from a terminal: `create` (from a workload file, a
//! BenchmarkRun manifest or a BenchmarkSchedule manifest), `list`, `history` (each run's
//! figures and verdict, from the schedule's `status.recentRuns`), `suspend` and `resume`.
//! Building the object and the tables is pure and unit-tested; the rest is one API call each.

use anyhow::Result;
use benchrun_operator::crd::schedule::{
    BaselinePolicy, BenchmarkSchedule, BenchmarkScheduleSpec, ConcurrencyPolicy, ScheduleBaseline,
};
use benchrun_operator::schedule::cron::Schedule;
use benchrun_operator::schedule::decide::requested_run_name;
use benchrun_operator::schedule::RUN_NOW;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Api;

use crate::cli::{
    DryRun, Output, ScheduleCommand, ScheduleCreateArgs, ScheduleHistoryArgs, ScheduleListArgs,
};
use crate::connect::{explain, Target};
use crate::exit::{bad_input, OK};
use crate::list::age;
use crate::manifest;
use crate::show::encode;

/// `kubectl benchrun schedule ...`.
pub async fn main(t: &Target, cmd: &ScheduleCommand) -> Result<u8> {
    match cmd {
        ScheduleCommand::Create(a) => create(t, a).await,
        ScheduleCommand::List(a) => list(t, a).await,
        ScheduleCommand::History(a) => history(t, a).await,
        ScheduleCommand::Suspend(a) => set_suspend(t, &a.name, true).await,
        ScheduleCommand::Resume(a) => set_suspend(t, &a.name, false).await,
        ScheduleCommand::Run(a) => run_now(t, &a.name).await,
    }
}

/// The schedule `create` makes from `text` (read from `source`) and the flags.
pub fn build(text: &str, source: &str, a: &ScheduleCreateArgs) -> Result<BenchmarkSchedule> {
    let is_schedule = serde_yaml::from_str::<serde_yaml::Value>(text)
        .ok()
        .and_then(|d| d.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .is_some_and(|k| k == "BenchmarkSchedule");
    let mut s = if is_schedule {
        serde_yaml::from_str::<BenchmarkSchedule>(text)
            .map_err(|e| bad_input(format!("{source} is not a valid BenchmarkSchedule: {e}")))?
    } else {
        let mut run = manifest::parse(text, source)?;
        manifest::apply(
            &mut run,
            &manifest::Placement {
                name: None,
                per_node: a.per_node,
                workers: a.workers,
                node_selector: manifest::node_selector(&a.node_selector)?,
                storage_class: a.storage_class.clone(),
                claim_size: a.claim_size.clone(),
            },
        )?;
        manifest::credentials(&mut run, a.secret.as_deref(), None)?;
        if run.spec.matrix.is_some() {
            return Err(bad_input(format!(
                "{source} has a matrix: a schedule runs one workload (not supported in a schedule)"
            )));
        }
        if run.spec.baseline_ref.is_some() {
            return Err(bad_input(format!(
                "{source} has a baselineRef: the schedule chooses each run's baseline (--baseline-run pins one)"
            )));
        }
        let Some(cron) = &a.schedule else {
            return Err(bad_input(
                "--schedule is required for a workload file or a BenchmarkRun (e.g. --schedule '0 3 * * *')",
            ));
        };
        let name = run.metadata.name.clone().unwrap_or_else(|| {
            manifest::name_prefix(source)
                .trim_end_matches('-')
                .to_string()
        });
        BenchmarkSchedule {
            metadata: ObjectMeta {
                name: Some(name),
                ..Default::default()
            },
            spec: BenchmarkScheduleSpec {
                schedule: cron.clone(),
                time_zone: None,
                suspend: false,
                concurrency_policy: ConcurrencyPolicy::default(),
                starting_deadline_seconds: None,
                successful_runs_history_limit: None,
                failed_runs_history_limit: None,
                baseline: ScheduleBaseline::default(),
                run_template: run.spec,
            },
            status: None,
        }
    };
    // The flags override the manifest.
    if let Some(n) = &a.name {
        s.metadata.name = Some(n.clone());
    }
    if let Some(c) = &a.schedule {
        s.spec.schedule = c.clone();
    }
    if let Some(tz) = &a.time_zone {
        s.spec.time_zone = Some(tz.clone());
    }
    if let Some(p) = a.concurrency_policy {
        s.spec.concurrency_policy = p.into();
    }
    if let Some(n) = a.keep_succeeded {
        s.spec.successful_runs_history_limit = Some(n);
    }
    if let Some(n) = a.keep_failed {
        s.spec.failed_runs_history_limit = Some(n);
    }
    if let Some(n) = a.starting_deadline_seconds {
        s.spec.starting_deadline_seconds = Some(n);
    }
    if let Some(p) = a.tolerance {
        s.spec.baseline.tolerance_percent = Some(p);
    }
    if let Some(r) = &a.baseline_run {
        s.spec.baseline.policy = BaselinePolicy::Pinned;
        s.spec.baseline.run = Some(r.clone());
        s.spec.baseline.count = None;
    }
    if let Some(n) = a.baseline_median {
        s.spec.baseline.policy = BaselinePolicy::MedianOfLast;
        s.spec.baseline.count = Some(n);
        s.spec.baseline.run = None;
    }
    if a.no_baseline {
        s.spec.baseline.policy = BaselinePolicy::None;
        s.spec.baseline.run = None;
        s.spec.baseline.count = None;
    }
    if a.suspend {
        s.spec.suspend = true;
    }
    // What the operator would say in `Valid=False`, said now.
    Schedule::parse(&s.spec.schedule, s.spec.time_zone.as_deref())
        .map_err(|e| bad_input(e.to_string()))?;
    let name = s.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(bad_input("the schedule has no name: give --name"));
    }
    let max = benchrun_operator::schedule::decide::MAX_SCHEDULE_NAME;
    if name.len() > max {
        return Err(bad_input(format!(
            "name {name:?}: {} characters, at most {max} (run names are <name>-<unix minutes>)",
            name.len()
        )));
    }
    let problems =
        benchrun_operator::validate::run(&s.spec.run_template, &format!("{name}-12345678"));
    if !problems.is_empty() {
        return Err(bad_input(format!(
            "invalid run template: {}",
            problems.join("; ")
        )));
    }
    Ok(s)
}

async fn create(t: &Target, a: &ScheduleCreateArgs) -> Result<u8> {
    let text = if a.file == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| bad_input(format!("reading stdin: {e}")))?
    } else {
        std::fs::read_to_string(&a.file)
            .map_err(|e| bad_input(format!("reading {}: {e}", a.file)))?
    };
    let s = build(&text, &a.file, a)?;
    if a.dry_run == Some(DryRun::Client) {
        print!("{}", encode(&s, Output::Yaml)?);
        return Ok(OK);
    }
    let api: Api<BenchmarkSchedule> = t.api();
    let pp = PostParams {
        dry_run: a.dry_run == Some(DryRun::Server),
        ..Default::default()
    };
    let made = api
        .create(&pp, &s)
        .await
        .map_err(|e| explain(e, "creating the benchmarkschedule"))?;
    let name = made.metadata.name.unwrap_or_default();
    let next = Schedule::parse(&made.spec.schedule, made.spec.time_zone.as_deref())
        .ok()
        .and_then(|c| c.next_after(chrono::Utc::now()))
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| "-".into());
    let dry = if pp.dry_run { " (server dry run)" } else { "" };
    println!("benchmarkschedule.benchrun.dev/{name} created{dry}; first run at {next}");
    Ok(OK)
}

/// One row of `schedule list`.
pub fn list_row(s: &BenchmarkSchedule, now: i64) -> Vec<String> {
    let st = s.status.clone().unwrap_or_default();
    let dash = || "-".to_string();
    let since = |t: &Option<String>| {
        t.as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(dash, |t| age(now - t.timestamp()))
    };
    vec![
        s.metadata.namespace.clone().unwrap_or_default(),
        s.metadata.name.clone().unwrap_or_default(),
        s.spec.schedule.clone(),
        s.spec.time_zone.clone().unwrap_or_else(|| "UTC".into()),
        s.spec.suspend.to_string(),
        st.active.len().to_string(),
        since(&st.last_schedule_time),
        st.last_verdict.clone().unwrap_or_else(dash),
        st.failures_in_a_row.to_string(),
        st.baseline_run.clone().unwrap_or_else(dash),
    ]
}

const LIST_HEADER: [&str; 10] = [
    "NAMESPACE",
    "NAME",
    "SCHEDULE",
    "TIMEZONE",
    "SUSPEND",
    "ACTIVE",
    "LAST SCHEDULE",
    "LAST VERDICT",
    "FAILURES",
    "BASELINE",
];

async fn list(t: &Target, a: &ScheduleListArgs) -> Result<u8> {
    let items: Vec<BenchmarkSchedule> = crate::list::fetch(
        t,
        a.all_namespaces,
        &ListParams::default(),
        "benchmarkschedules",
    )
    .await?;
    match a.output {
        o if crate::list::print_as_list(&items, o)? => {}
        _ if items.is_empty() => {
            eprintln!("No benchmarkschedules found in namespace {}.", t.namespace)
        }
        _ => {
            let now = chrono::Utc::now().timestamp();
            let skip = usize::from(!a.all_namespaces);
            let mut rows = vec![LIST_HEADER
                .iter()
                .skip(skip)
                .map(|s| s.to_string())
                .collect()];
            rows.extend(
                items
                    .iter()
                    .map(|s| list_row(s, now).into_iter().skip(skip).collect()),
            );
            print!("{}", table(&rows));
        }
    }
    Ok(OK)
}

/// `schedule history`: one row per recent run, newest first.
pub fn history_table(s: &BenchmarkSchedule) -> String {
    let st = s.status.clone().unwrap_or_default();
    let dash = || "-".to_string();
    let mut rows = vec![[
        "RUN",
        "SCHEDULED",
        "PHASE",
        "VERDICT",
        "THROUGHPUT",
        "P99",
        "BASELINE",
        "MOVED",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for r in &st.recent_runs {
        rows.push(vec![
            r.name.clone(),
            r.scheduled_time.clone(),
            r.phase.clone(),
            r.verdict.clone().unwrap_or_else(dash),
            r.throughput.clone().unwrap_or_else(dash),
            r.p99.clone().unwrap_or_else(dash),
            r.baseline.clone().unwrap_or_else(dash),
            if !r.regressions.is_empty() {
                r.regressions.join(", ")
            } else if !r.not_significant.is_empty() {
                format!("not significant: {}", r.not_significant.join(", "))
            } else {
                r.message.clone().unwrap_or_else(dash)
            },
        ]);
    }
    table(&rows)
}

async fn history(t: &Target, a: &ScheduleHistoryArgs) -> Result<u8> {
    let api: Api<BenchmarkSchedule> = t.api();
    let s = api
        .get_opt(&a.name)
        .await
        .map_err(|e| explain(e, "reading the benchmarkschedule"))?
        .ok_or_else(|| {
            bad_input(format!(
                "benchmarkschedule {:?} not found in namespace {}",
                a.name, t.namespace
            ))
        })?;
    match a.output {
        Some(o) => {
            let recent = s.status.map(|st| st.recent_runs).unwrap_or_default();
            print!("{}", encode(&recent, o)?);
        }
        None => {
            if s.status.as_ref().is_none_or(|st| st.recent_runs.is_empty()) {
                eprintln!("Schedule {} has made no runs yet.", a.name);
            } else {
                print!("{}", history_table(&s));
            }
        }
    }
    Ok(OK)
}

async fn set_suspend(t: &Target, name: &str, suspend: bool) -> Result<u8> {
    let api: Api<BenchmarkSchedule> = t.api();
    let patch = serde_json::json!({"spec": {"suspend": suspend}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 && e.reason == "NotFound" => {
            return Err(bad_input(format!(
                "benchmarkschedule {name:?} not found in namespace {}",
                t.namespace
            )))
        }
        Err(e) => return Err(explain(e, "patching the benchmarkschedule")),
    }
    let what = if suspend { "suspended" } else { "resumed" };
    println!("benchmarkschedule.benchrun.dev/{name} {what}");
    Ok(OK)
}

/// Ask the operator for one run now: a new value of the schedule's `benchrun.dev/run-now`
/// annotation (this instant), which names the run.
async fn run_now(t: &Target, name: &str) -> Result<u8> {
    let api: Api<BenchmarkSchedule> = t.api();
    let now = chrono::Utc::now();
    let request = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let patch = serde_json::json!({"metadata": {"annotations": {RUN_NOW: request}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 && e.reason == "NotFound" => {
            return Err(bad_input(format!(
                "benchmarkschedule {name:?} not found in namespace {}",
                t.namespace
            )))
        }
        Err(e) => return Err(explain(e, "patching the benchmarkschedule")),
    }
    println!(
        "benchmarkschedule.benchrun.dev/{name} asked to run now: the run will be benchmarkrun.benchrun.dev/{}",
        requested_run_name(name, now)
    );
    Ok(OK)
}

/// Cells as an aligned table, columns three spaces apart (as kubectl's).
fn table(rows: &[Vec<String>]) -> String {
    let n = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..n)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_operator::crd::schedule::{BenchmarkScheduleStatus, ScheduledRun};
    use clap::Parser;

    const WORKLOAD: &str = "target: file:///data/bench\nduration: 2s\nops: [{op: get}]\n";

    fn args(extra: &[&str]) -> ScheduleCreateArgs {
        let mut argv = vec!["kubectl-benchrun", "schedule", "create"];
        argv.extend(extra);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            crate::cli::Command::Schedule(a) => match a.command {
                ScheduleCommand::Create(c) => *c,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_workload_becomes_the_run_template() {
        let a = args(&[
            "nightly-get.yaml",
            "--schedule",
            "0 3 * * *",
            "--time-zone",
            "Europe/Berlin",
            "--workers",
            "2",
            "--secret",
            "s3-creds",
            "--tolerance",
            "15",
        ]);
        let s = build(WORKLOAD, "nightly-get.yaml", &a).expect("builds");
        assert_eq!(s.metadata.name.as_deref(), Some("nightly-get"));
        assert_eq!(s.spec.schedule, "0 3 * * *");
        assert_eq!(s.spec.time_zone.as_deref(), Some("Europe/Berlin"));
        assert_eq!(s.spec.concurrency_policy, ConcurrencyPolicy::Forbid);
        assert_eq!(s.spec.run_template.workers.count, Some(2));
        assert_eq!(
            s.spec
                .run_template
                .secret_ref
                .as_ref()
                .map(|r| r.name.as_str()),
            Some("s3-creds")
        );
        assert!(
            s.spec.run_template.volume.is_some(),
            "a file:// target gets a scratch volume"
        );
        assert_eq!(s.spec.baseline.policy, BaselinePolicy::LastSucceeded);
        assert_eq!(s.spec.baseline.tolerance_percent, Some(15.0));
    }

    #[test]
    fn a_schedule_manifest_is_taken_and_flags_override_it() {
        let text = "apiVersion: benchrun.dev/v1alpha1\nkind: BenchmarkSchedule\nmetadata: {name: n1}\nspec:\n  schedule: '@daily'\n  runTemplate: {workload: {target: 'file:///d', duration: 1s, ops: [{op: put}]}, volume: {emptyDir: {}}}\n";
        let s = build(text, "s.yaml", &args(&["s.yaml"])).expect("builds");
        assert_eq!(
            (s.metadata.name.as_deref(), s.spec.schedule.as_str()),
            (Some("n1"), "@daily")
        );
        let s = build(
            text,
            "s.yaml",
            &args(&[
                "s.yaml",
                "--suspend",
                "--baseline-run",
                "golden",
                "--concurrency-policy",
                "replace",
            ]),
        )
        .expect("builds");
        assert!(s.spec.suspend);
        assert_eq!(s.spec.baseline.policy, BaselinePolicy::Pinned);
        assert_eq!(s.spec.baseline.run.as_deref(), Some("golden"));
        assert_eq!(s.spec.concurrency_policy, ConcurrencyPolicy::Replace);
    }

    #[test]
    fn baseline_median_asks_for_the_median_of_the_last_n() {
        let s = build(
            WORKLOAD,
            "w.yaml",
            &args(&[
                "w.yaml",
                "--schedule",
                "@daily",
                "--name",
                "n",
                "--baseline-median",
                "5",
            ]),
        )
        .expect("builds");
        assert_eq!(s.spec.baseline.policy, BaselinePolicy::MedianOfLast);
        assert_eq!(s.spec.baseline.count, Some(5));
        assert!(crate::cli::Cli::try_parse_from([
            "kubectl-benchrun",
            "schedule",
            "create",
            "w.yaml",
            "--baseline-median",
            "0"
        ])
        .is_err());
        assert!(crate::cli::Cli::try_parse_from([
            "kubectl-benchrun",
            "schedule",
            "create",
            "w.yaml",
            "--baseline-median",
            "3",
            "--baseline-run",
            "golden"
        ])
        .is_err());
    }

    #[test]
    fn bad_schedules_are_bad_input_naming_the_field() {
        let e = build(WORKLOAD, "w.yaml", &args(&["w.yaml"])).expect_err("no --schedule");
        assert!(e.to_string().contains("--schedule is required"), "{e}");
        let e = build(
            WORKLOAD,
            "w.yaml",
            &args(&["w.yaml", "--schedule", "* * *"]),
        )
        .expect_err("3 fields");
        assert!(e.to_string().starts_with("spec.schedule: "), "{e}");
        let e = build(
            WORKLOAD,
            "w.yaml",
            &args(&["w.yaml", "--schedule", "@daily", "--time-zone", "Berlin"]),
        )
        .expect_err("zone");
        assert!(e.to_string().starts_with("spec.timeZone: "), "{e}");
        let long = "x".repeat(60);
        let e = build(
            WORKLOAD,
            "w.yaml",
            &args(&["w.yaml", "--schedule", "@daily", "--name", &long]),
        )
        .expect_err("long name");
        assert!(e.to_string().contains("at most 52"), "{e}");
        assert!(crate::exit::of_error(&e) == crate::exit::BAD_INPUT);
    }

    #[test]
    fn history_lists_each_run_with_its_verdict_and_what_moved() {
        let s = BenchmarkSchedule {
            metadata: ObjectMeta {
                name: Some("nightly".into()),
                ..Default::default()
            },
            spec: serde_yaml::from_str(
                "schedule: '@daily'\nrunTemplate: {workload: {target: 'file:///d', duration: 1s, ops: [{op: put}]}}\n",
            )
            .expect("spec"),
            status: Some(BenchmarkScheduleStatus {
                recent_runs: vec![
                    ScheduledRun {
                        name: "nightly-2".into(),
                        scheduled_time: "2026-01-02T03:00:00+00:00".into(),
                        phase: "Succeeded".into(),
                        verdict: Some("Regressed".into()),
                        baseline: Some("nightly-1".into()),
                        regressions: vec![
                            "get ops/s 80.00 vs 100.00 (-20.0%; rank-sum p=0.0028)".into(),
                            "put p99 12.000ms vs 8.000ms (+50.0%; not tested: this run has no successful put op)".into(),
                        ],
                        throughput: Some("80 ops/s".into()),
                        p99: Some("12ms".into()),
                        ..Default::default()
                    },
                    ScheduledRun {
                        name: "nightly-1".into(),
                        scheduled_time: "2026-01-01T03:00:00+00:00".into(),
                        phase: "Succeeded".into(),
                        verdict: Some("Succeeded".into()),
                        not_significant: vec![
                            "get ops/s 100.00 vs 120.00 (-16.7%; rank-sum p=0.21, not significant)".into(),
                        ],
                        throughput: Some("100 ops/s".into()),
                        p99: Some("8ms".into()),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
        };
        let t = history_table(&s);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("RUN"), "{t}");
        assert!(
            lines[1].starts_with("nightly-2") && lines[1].contains("Regressed"),
            "{t}"
        );
        assert!(
            lines[1].contains("nightly-1")
                && lines[1].ends_with(
                    "get ops/s 80.00 vs 100.00 (-20.0%; rank-sum p=0.0028), put p99 12.000ms vs 8.000ms (+50.0%; not tested: this run has no successful put op)"
                ),
            "{t}"
        );
        // Beyond the tolerance, but noise: said so, with the p-value.
        assert!(
            lines[2].contains("100 ops/s")
                && lines[2].ends_with(
                    "not significant: get ops/s 100.00 vs 120.00 (-16.7%; rank-sum p=0.21, not significant)"
                ),
            "{t}"
        );
        let row = list_row(&s, 0);
        assert_eq!(
            row[1..6],
            ["nightly", "@daily", "UTC", "false", "0"].map(String::from)
        );
    }
}
