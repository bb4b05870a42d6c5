//! The decisions of a schedule pass, each against CronJob's rules.

use super::*;
use crate::crd::schedule::ScheduleBaseline;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("time")
        .with_timezone(&Utc)
}

fn spec(yaml: &str) -> BenchmarkScheduleSpec {
    let base =
        "runTemplate: {workload: {target: 'file:///data', duration: 5s, ops: [{op: put}]}}\n";
    serde_yaml::from_str(&format!("{base}{yaml}")).expect("spec parses")
}

fn run(name: &str, scheduled: &str, phase: Phase) -> RunView {
    RunView {
        name: name.into(),
        scheduled: utc(scheduled),
        phase,
        regressed: false,
        regressions: vec![],
        not_significant: vec![],
        baseline: None,
        median_of: vec![],
        finished_at: phase
            .is_finished()
            .then(|| utc(scheduled) + chrono::Duration::seconds(30)),
        throughput: None,
        p99: None,
        message: None,
        deleting: false,
    }
}

fn view<'a>(
    spec: &'a BenchmarkScheduleSpec,
    status: &'a BenchmarkScheduleStatus,
    runs: Vec<RunView>,
    now: &str,
) -> View<'a> {
    View {
        name: "nightly",
        generation: Some(1),
        created: utc("2026-01-01T00:00:00Z"),
        spec,
        status,
        runs,
        run_now: None,
        now: utc(now),
    }
}

fn status_at(last: &str) -> BenchmarkScheduleStatus {
    BenchmarkScheduleStatus {
        last_schedule_time: Some(utc(last).to_rfc3339()),
        ..Default::default()
    }
}

fn reasons(p: &Plan) -> Vec<&str> {
    p.notes.iter().map(|n| n.reason).collect()
}

#[test]
fn run_names_are_unix_minutes() {
    assert_eq!(
        run_name("nightly", utc("2026-01-01T00:00:00Z")),
        format!("nightly-{}", 1_767_225_600 / 60)
    );
}

#[test]
fn nothing_due_requeues_at_the_next_time() {
    let s = spec("schedule: '0 3 * * *'\n");
    let st = BenchmarkScheduleStatus::default();
    let p = decide(&view(&s, &st, vec![], "2026-01-01T01:00:00Z"));
    assert_eq!(p.create, None);
    assert_eq!(p.requeue_at, Some(utc("2026-01-01T03:00:00Z")));
    assert_eq!(
        p.status.next_schedule_time.as_deref(),
        Some(utc("2026-01-01T03:00:00Z").to_rfc3339().as_str())
    );
    assert_eq!(p.notes, vec![]);
}

#[test]
fn a_due_time_creates_its_run_with_the_last_good_baseline() {
    let s = spec("schedule: '0 3 * * *'\n");
    let st = status_at("2026-01-01T03:00:00Z");
    let mut regressed = run("nightly-b", "2026-01-02T03:00:00Z", Phase::Succeeded);
    regressed.regressed = true;
    let runs = vec![
        run("nightly-a", "2026-01-01T03:00:00Z", Phase::Succeeded),
        regressed,
        run("nightly-c", "2026-01-02T02:00:00Z", Phase::Failed),
    ];
    let p = decide(&view(&s, &st, runs, "2026-01-03T03:00:05Z"));
    let new = p.create.clone().expect("a run");
    assert_eq!(new.name, run_name("nightly", utc("2026-01-03T03:00:00Z")));
    assert_eq!(new.scheduled, utc("2026-01-03T03:00:00Z"));
    // The regressed run is not a baseline: a regression must not become the new normal.
    assert_eq!(new.baseline.as_deref(), Some("nightly-a"));
    assert_eq!(
        p.status.last_schedule_time.as_deref(),
        Some(utc("2026-01-03T03:00:00Z").to_rfc3339().as_str())
    );
    assert_eq!(p.status.active, vec![new.name.clone()]);
    assert!(reasons(&p).contains(&"RunCreated"), "{:?}", p.notes);
    assert_eq!(p.requeue_at, Some(utc("2026-01-04T03:00:00Z")));
}

#[test]
fn pinned_and_no_baseline() {
    let mut s = spec("schedule: '* * * * *'\n");
    s.baseline = ScheduleBaseline {
        policy: BaselinePolicy::Pinned,
        run: Some("golden".into()),
        tolerance_percent: None,
        count: None,
    };
    let st = status_at("2026-01-01T00:00:00Z");
    let runs = vec![run("nightly-a", "2026-01-01T00:00:00Z", Phase::Succeeded)];
    let p = decide(&view(&s, &st, runs.clone(), "2026-01-01T00:01:00Z"));
    assert_eq!(p.create.expect("run").baseline.as_deref(), Some("golden"));
    s.baseline.policy = BaselinePolicy::None;
    s.baseline.run = None;
    let p = decide(&view(&s, &st, runs, "2026-01-01T00:01:00Z"));
    assert_eq!(p.create.expect("run").baseline, None);
}

#[test]
fn forbid_skips_while_a_run_is_active_and_starts_late_after() {
    let s = spec("schedule: '* * * * *'\n");
    let st = status_at("2026-01-01T00:00:00Z");
    let active = run("nightly-a", "2026-01-01T00:00:00Z", Phase::Running);
    let p = decide(&view(&s, &st, vec![active.clone()], "2026-01-01T00:01:01Z"));
    assert_eq!(p.create, None);
    assert_eq!(p.delete, Vec::<String>::new());
    assert_eq!(reasons(&p), vec!["RunAlreadyActive"]);
    // lastScheduleTime stays: the skipped time is still owed.
    assert_eq!(p.status.last_schedule_time, st.last_schedule_time);
    assert_eq!(p.status.active, vec!["nightly-a".to_string()]);
    // The active run ends at 00:01:40: the 00:01 run starts then, late (no deadline).
    let mut done = active;
    done.phase = Phase::Succeeded;
    let p = decide(&view(&s, &st, vec![done], "2026-01-01T00:01:40Z"));
    let new = p.create.expect("the owed run");
    assert_eq!(new.scheduled, utc("2026-01-01T00:01:00Z"));
    assert_eq!(new.baseline.as_deref(), Some("nightly-a"));
}

#[test]
fn forbid_then_deadline_passed_skips_the_time() {
    let s = spec("schedule: '* * * * *'\nstartingDeadlineSeconds: 20\n");
    let st = status_at("2026-01-01T00:00:00Z");
    let done = run("nightly-a", "2026-01-01T00:00:00Z", Phase::Succeeded);
    // 40 s after the 00:01 time with a 20 s deadline: too late, and the 00:02 is not due yet.
    let p = decide(&view(&s, &st, vec![done], "2026-01-01T00:01:40Z"));
    assert_eq!(p.create, None);
    assert_eq!(
        reasons(&p),
        Vec::<&str>::new(),
        "outside the window: not even looked at"
    );
    assert_eq!(p.requeue_at, Some(utc("2026-01-01T00:02:00Z")));
}

#[test]
fn deadline_bounds_lateness() {
    // The window of times looked at starts at now - deadline: a time older than that is not
    // started.
    let s = spec("schedule: '0 * * * *'\nstartingDeadlineSeconds: 60\n");
    let st = status_at("2026-01-01T00:00:00Z");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T01:00:30Z"));
    assert!(p.create.is_some(), "30 s late, 60 s allowed");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T01:01:30Z"));
    assert_eq!(p.create, None, "90 s late, 60 s allowed");
}

#[test]
fn allow_starts_beside_and_replace_deletes_the_active_run() {
    let st = status_at("2026-01-01T00:00:00Z");
    let active = run("nightly-a", "2026-01-01T00:00:00Z", Phase::Running);
    let s = spec("schedule: '* * * * *'\nconcurrencyPolicy: Allow\n");
    let p = decide(&view(&s, &st, vec![active.clone()], "2026-01-01T00:01:00Z"));
    assert!(p.create.is_some());
    assert_eq!(p.delete, Vec::<String>::new());
    assert_eq!(p.status.active.len(), 2);
    let s = spec("schedule: '* * * * *'\nconcurrencyPolicy: Replace\n");
    let p = decide(&view(&s, &st, vec![active], "2026-01-01T00:01:00Z"));
    assert!(p.create.is_some());
    assert_eq!(p.delete, vec!["nightly-a".to_string()]);
    assert_eq!(p.status.active.len(), 1);
    assert!(reasons(&p).contains(&"RunReplaced"));
}

#[test]
fn many_missed_times_start_only_the_most_recent() {
    let s = spec("schedule: '* * * * *'\n");
    let st = status_at("2026-01-01T00:00:00Z");
    // Three hours down: 180 missed minutes.
    let p = decide(&view(&s, &st, vec![], "2026-01-01T03:00:10Z"));
    assert_eq!(
        p.create.clone().expect("run").scheduled,
        utc("2026-01-01T03:00:00Z")
    );
    assert!(reasons(&p).contains(&"TooManyMissedTimes"), "{:?}", p.notes);
    // 100 missed: no warning.
    let p = decide(&view(&s, &st, vec![], "2026-01-01T01:40:10Z"));
    assert!(p.create.is_some());
    assert!(
        !reasons(&p).contains(&"TooManyMissedTimes"),
        "{:?}",
        p.notes
    );
    // A deadline bounds how far back is looked: no warning either.
    let s = spec("schedule: '* * * * *'\nstartingDeadlineSeconds: 300\n");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T03:00:10Z"));
    assert!(p.create.is_some());
    assert!(
        !reasons(&p).contains(&"TooManyMissedTimes"),
        "{:?}",
        p.notes
    );
}

#[test]
fn first_time_counts_from_the_creation() {
    let s = spec("schedule: '0 3 * * *'\n");
    let st = BenchmarkScheduleStatus::default();
    // Created at midnight; at 03:00:02 the 03:00 run is due.
    let p = decide(&view(&s, &st, vec![], "2026-01-01T03:00:02Z"));
    assert_eq!(
        p.create.clone().expect("run").scheduled,
        utc("2026-01-01T03:00:00Z")
    );
}

#[test]
fn a_run_already_made_is_not_made_again() {
    let s = spec("schedule: '* * * * *'\nconcurrencyPolicy: Allow\n");
    // The status write of the pass that made it was lost.
    let st = status_at("2026-01-01T00:00:00Z");
    let made = run(
        &run_name("nightly", utc("2026-01-01T00:01:00Z")),
        "2026-01-01T00:01:00Z",
        Phase::Pending,
    );
    let p = decide(&view(&s, &st, vec![made], "2026-01-01T00:01:03Z"));
    assert_eq!(p.create, None);
    assert_eq!(
        p.status.last_schedule_time.as_deref(),
        Some(utc("2026-01-01T00:01:00Z").to_rfc3339().as_str())
    );
}

#[test]
fn suspended_and_invalid_make_no_runs() {
    let s = spec("schedule: '* * * * *'\nsuspend: true\n");
    let st = status_at("2026-01-01T00:00:00Z");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T00:05:00Z"));
    assert_eq!(p.create, None);
    assert_eq!(p.requeue_at, None);
    let c = crate::run_rules::condition(&p.status.conditions, cond::SCHEDULING).expect("condition");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Suspended")
    );

    let s = spec("schedule: '* * * *'\n");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T00:05:00Z"));
    assert_eq!(p.create, None);
    let c = crate::run_rules::condition(&p.status.conditions, cond::VALID).expect("condition");
    assert_eq!(c.status, "False");
    assert!(c.message.starts_with("spec.schedule: "), "{}", c.message);
    let s = spec("schedule: '@daily'\ntimeZone: Europe/Nowhere\n");
    let p = decide(&view(&s, &st, vec![], "2026-01-01T00:05:00Z"));
    let c = crate::run_rules::condition(&p.status.conditions, cond::VALID).expect("condition");
    assert!(c.message.starts_with("spec.timeZone: "), "{}", c.message);
    let s = spec("schedule: '* * * * *'\n");
    let long = "x".repeat(53);
    let mut v = view(&s, &st, vec![], "2026-01-01T00:05:00Z");
    v.name = &long;
    let p = decide(&v);
    assert_eq!(p.create, None);
    let c = crate::run_rules::condition(&p.status.conditions, cond::VALID).expect("condition");
    assert!(
        c.message.starts_with("metadata.name: 53 characters"),
        "{}",
        c.message
    );
}

#[test]
fn history_limits_delete_the_oldest_but_keep_the_baseline() {
    let s =
        spec("schedule: '0 3 * * *'\nsuccessfulRunsHistoryLimit: 2\nfailedRunsHistoryLimit: 1\n");
    let st = status_at("2026-01-09T03:00:00Z");
    let mut runs = vec![
        run("s1", "2026-01-01T03:00:00Z", Phase::Succeeded),
        run("s2", "2026-01-02T03:00:00Z", Phase::Succeeded),
        run("s3", "2026-01-03T03:00:00Z", Phase::Succeeded),
        run("f4", "2026-01-04T03:00:00Z", Phase::Failed),
        run("f5", "2026-01-05T03:00:00Z", Phase::Failed),
        run("a6", "2026-01-09T03:00:00Z", Phase::Running),
    ];
    let p = decide(&view(&s, &st, runs.clone(), "2026-01-09T04:00:00Z"));
    assert_eq!(p.delete, vec!["f4".to_string(), "s1".to_string()]);
    // The two newest succeeded ones regressed: the last good one (s1) is the baseline, kept.
    runs[1].regressed = true;
    runs[2].regressed = true;
    let p = decide(&view(&s, &st, runs.clone(), "2026-01-09T04:00:00Z"));
    assert_eq!(p.delete, vec!["f4".to_string()]);
    assert_eq!(p.status.baseline_run.as_deref(), Some("s1"));
    // Limit 0: none kept but the baseline.
    let s =
        spec("schedule: '0 3 * * *'\nsuccessfulRunsHistoryLimit: 0\nfailedRunsHistoryLimit: 0\n");
    runs[1].regressed = false;
    runs[2].regressed = false;
    let p = decide(&view(&s, &st, runs, "2026-01-09T04:00:00Z"));
    assert_eq!(p.delete, vec!["f4", "f5", "s1", "s2"]);
}

#[test]
fn defaults_keep_three_succeeded_and_one_failed() {
    let s = spec("schedule: '0 3 * * *'\n");
    assert_eq!((s.successful_history(), s.failed_history()), (3, 1));
}

#[test]
fn verdicts_are_reported_once_and_counted() {
    let s = spec("schedule: '0 3 * * *'\n");
    let st = status_at("2026-01-03T03:00:00Z");
    let mut r3 = run("r3", "2026-01-03T03:00:00Z", Phase::Succeeded);
    r3.regressed = true;
    r3.regressions = vec!["get".into()];
    r3.baseline = Some("r1".into());
    let runs = vec![
        run("r1", "2026-01-01T03:00:00Z", Phase::Succeeded),
        run("r2", "2026-01-02T03:00:00Z", Phase::Failed),
        r3,
    ];
    let p = decide(&view(&s, &st, runs.clone(), "2026-01-03T04:00:00Z"));
    assert_eq!(p.status.last_verdict.as_deref(), Some("Regressed"));
    assert_eq!(p.status.failures_in_a_row, 0);
    let regressed: Vec<&Note> = p
        .notes
        .iter()
        .filter(|n| n.reason == "RunRegressed")
        .collect();
    assert_eq!(regressed.len(), 1);
    assert!(
        regressed[0].note.contains("r3 regressed against r1: get"),
        "{}",
        regressed[0].note
    );
    let c = crate::run_rules::condition(&p.status.conditions, cond::LAST_RUN_REGRESSED).expect("c");
    assert_eq!(c.status, "True");
    assert_eq!(
        p.status
            .recent_runs
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        vec!["r3", "r2", "r1"]
    );
    // The next pass, with that status: no second event.
    let p2 = decide(&view(&s, &p.status, runs, "2026-01-03T05:00:00Z"));
    assert!(!reasons(&p2).contains(&"RunRegressed"), "{:?}", p2.notes);
    assert!(!reasons(&p2).contains(&"RunFailed"), "{:?}", p2.notes);
}

#[test]
fn failures_in_a_row_survive_the_history_limit() {
    let s = spec("schedule: '0 3 * * *'\n");
    let mut st = status_at("2026-01-01T03:00:00Z");
    let mut runs = vec![run("ok", "2026-01-01T03:00:00Z", Phase::Succeeded)];
    for day in 2..=4 {
        let name = format!("f{day}");
        let t = format!("2026-01-0{day}T03:00:00Z");
        // The failed history limit is 1: only the newest failed run still exists.
        runs.retain(|r| r.phase != Phase::Failed);
        runs.push(run(&name, &t, Phase::Failed));
        let p = decide(&view(
            &s,
            &st,
            runs.clone(),
            &format!("2026-01-0{day}T03:30:00Z"),
        ));
        assert!(reasons(&p).contains(&"RunFailed"));
        st = p.status;
    }
    assert_eq!(st.failures_in_a_row, 3);
    assert_eq!(st.last_verdict.as_deref(), Some("Failed"));
    let c = crate::run_rules::condition(&st.conditions, cond::LAST_RUN_REGRESSED).expect("c");
    assert_eq!(c.status, "False");
}

#[test]
fn a_run_deleted_before_it_finished_is_marked() {
    let s = spec("schedule: '0 3 * * *'\n");
    let mut st = status_at("2026-01-01T03:00:00Z");
    st.recent_runs = vec![ScheduledRun {
        name: "gone".into(),
        scheduled_time: utc("2026-01-01T03:00:00Z").to_rfc3339(),
        phase: "Running".into(),
        ..Default::default()
    }];
    let p = decide(&view(&s, &st, vec![], "2026-01-01T04:00:00Z"));
    assert_eq!(p.status.recent_runs[0].phase, "Deleted");
    assert_eq!(p.status.active, Vec::<String>::new());
}

#[test]
fn recent_runs_are_bounded() {
    let s = spec("schedule: '* * * * *'\nsuccessfulRunsHistoryLimit: 100\n");
    let st = status_at("2026-01-01T00:29:00Z");
    let runs: Vec<RunView> = (0..30)
        .map(|m| {
            run(
                &format!("r{m:02}"),
                &format!("2026-01-01T00:{m:02}:00Z"),
                Phase::Succeeded,
            )
        })
        .collect();
    let p = decide(&view(&s, &st, runs, "2026-01-01T00:30:30Z"));
    assert_eq!(p.status.recent_runs.len(), MAX_RECENT);
    assert_eq!(p.status.recent_runs[0].name, p.create.expect("run").name);
}

#[test]
fn time_zone_decides_the_due_time() {
    // 03:00 in New York (UTC-5 in January) is 08:00 UTC.
    let s = spec("schedule: '0 3 * * *'\ntimeZone: America/New_York\n");
    let st = BenchmarkScheduleStatus::default();
    let p = decide(&view(&s, &st, vec![], "2026-01-01T03:00:30Z"));
    assert_eq!(p.create, None);
    assert_eq!(p.requeue_at, Some(utc("2026-01-01T08:00:00Z")));
    let p = decide(&view(&s, &st, vec![], "2026-01-01T08:00:30Z"));
    assert_eq!(
        p.create.expect("run").scheduled,
        utc("2026-01-01T08:00:00Z")
    );
}

#[test]
fn median_of_last_takes_the_newest_good_runs_and_says_when_there_are_fewer() {
    let s = spec("schedule: '0 3 * * *'\nbaseline: {policy: MedianOfLast, count: 3}\nsuccessfulRunsHistoryLimit: 1\n");
    let st = status_at("2026-01-05T03:00:00Z");
    let mut runs = vec![
        run("n1", "2026-01-01T03:00:00Z", Phase::Succeeded),
        run("n2", "2026-01-02T03:00:00Z", Phase::Succeeded),
        run("n3", "2026-01-03T03:00:00Z", Phase::Succeeded),
        run("n4", "2026-01-04T03:00:00Z", Phase::Succeeded),
        run("n5", "2026-01-05T03:00:00Z", Phase::Failed),
    ];
    // n4 regressed: left out, as a regression must not become the new normal.
    runs[3].regressed = true;
    let p = decide(&view(&s, &st, runs.clone(), "2026-01-06T03:00:01Z"));
    let new = p.create.clone().expect("a run");
    assert_eq!(new.baseline, None);
    assert_eq!(new.median_of, ["n3", "n2", "n1"]);
    assert_eq!(
        p.status.baseline_run.as_deref(),
        Some("median of n3, n2, n1")
    );
    // History limit 1 keeps only n4 of the succeeded runs, and every run of the median.
    assert!(
        !p.delete
            .iter()
            .any(|d| d.starts_with("n1") || d == "n2" || d == "n3"),
        "{:?}",
        p.delete
    );
    let created = p
        .notes
        .iter()
        .find(|n| n.reason == "RunCreated")
        .expect("created");
    assert!(
        created
            .note
            .ends_with(", compared with median of n3, n2, n1"),
        "{}",
        created.note
    );

    // Only one good run so far: the median of that one, and the status says it is fewer.
    let p = decide(&view(&s, &st, runs[..1].to_vec(), "2026-01-06T03:00:01Z"));
    assert_eq!(p.create.expect("run").median_of, ["n1"]);
    assert_eq!(
        p.status.baseline_run.as_deref(),
        Some("median of n1 (1 of the 3 runs asked: the schedule has no more good runs yet)")
    );
    // None: no comparison.
    let p = decide(&view(&s, &st, vec![], "2026-01-06T03:00:01Z"));
    let new = p.create.expect("run");
    assert_eq!((new.baseline, new.median_of.len()), (None, 0));
    assert_eq!(p.status.baseline_run, None);
}

#[test]
fn a_median_run_reports_its_baseline_and_regression() {
    let s = spec("schedule: '0 3 * * *'\nbaseline: {policy: MedianOfLast}\n");
    let st = status_at("2026-01-03T03:00:00Z");
    let mut r = run("n3", "2026-01-03T03:00:00Z", Phase::Succeeded);
    r.median_of = vec!["n2".into(), "n1".into()];
    r.regressed = true;
    r.regressions = vec!["get ops/s 50.00 vs 100.00 (-50.0%)".into()];
    let p = decide(&view(&s, &st, vec![r], "2026-01-03T03:05:00Z"));
    let rec = &p.status.recent_runs[0];
    assert_eq!(
        rec.baseline.as_deref(),
        Some("median of n2, n1 (2 of the 5 runs asked: the schedule has no more good runs yet)")
    );
    assert_eq!(p.status.last_verdict.as_deref(), Some("Regressed"));
    let note = p
        .notes
        .iter()
        .find(|n| n.reason == "RunRegressed")
        .expect("event");
    assert_eq!(
        note.note,
        "run n3 regressed against median of n2, n1: get ops/s 50.00 vs 100.00 (-50.0%)"
    );
    let c =
        crate::run_rules::condition(&p.status.conditions, cond::LAST_RUN_REGRESSED).expect("cond");
    assert_eq!(c.status, "True");
    assert!(c.message.contains("get ops/s"), "{}", c.message);
}

#[test]
fn run_now_makes_one_run_per_new_value_even_suspended() {
    let s = spec("schedule: '0 3 1 1 *'\nsuspend: true\n");
    let st = status_at("2026-01-01T03:00:00Z");
    let good = run("nightly-a", "2026-01-01T03:00:00Z", Phase::Succeeded);
    let mut v = view(&s, &st, vec![good.clone()], "2026-03-01T10:00:07Z");
    v.run_now = Some("2026-03-01T10:00:05Z");
    let p = decide(&v);
    let new = p.create.clone().expect("a run");
    assert_eq!(
        new.name,
        format!("nightly-{}", utc("2026-03-01T10:00:05Z").timestamp())
    );
    assert_eq!(
        new.name,
        requested_run_name("nightly", utc("2026-03-01T10:00:05Z"))
    );
    assert_eq!(new.scheduled, utc("2026-03-01T10:00:05Z"));
    assert_eq!(new.baseline.as_deref(), Some("nightly-a"));
    assert_eq!(
        p.status.last_run_request.as_deref(),
        Some("2026-03-01T10:00:05Z")
    );
    // The scheduled time stays as it was: a request is not a scheduled time.
    assert_eq!(p.status.last_schedule_time, st.last_schedule_time);
    assert_eq!(p.status.active, vec![new.name.clone()]);

    // Acted on: the same value makes nothing more.
    let mut v = view(&s, &p.status, vec![good.clone()], "2026-03-01T10:00:09Z");
    v.run_now = Some("2026-03-01T10:00:05Z");
    assert_eq!(decide(&v).create, None);

    // Forbid: while a run is active the request waits (not acted on), then starts.
    let busy = run("nightly-b", "2026-03-01T09:59:00Z", Phase::Running);
    let mut v = view(&s, &st, vec![good.clone(), busy], "2026-03-01T10:00:07Z");
    v.run_now = Some("2026-03-01T10:00:05Z");
    let p = decide(&v);
    assert_eq!(p.create, None);
    assert_eq!(p.status.last_run_request, None);
    assert!(reasons(&p).contains(&"RunAlreadyActive"));

    // Not a time: a Warning, and not looked at again.
    let mut v = view(&s, &st, vec![], "2026-03-01T10:00:07Z");
    v.run_now = Some("now please");
    let p = decide(&v);
    assert_eq!(p.create, None);
    assert_eq!(reasons(&p), ["RunRequestInvalid"]);
    assert_eq!(p.status.last_run_request.as_deref(), Some("now please"));
}
