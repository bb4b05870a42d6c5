//! What the schema cannot say about a `BenchmarkSchedule`: combinations that would make every
//! run after the first pointless, each a (field, why) for the schedule's `Valid` condition.
//! Pure, beside [`super::decide`], which calls it.

use chrono::{DateTime, Utc};

use super::cron::{Invalid, Schedule};
use crate::crd::schedule::{BaselinePolicy, BenchmarkScheduleSpec};

/// What the schema cannot say about a schedule whose cron and time zone parse (`sched`, read
/// from `now` on): combinations that would make every run after the first pointless. A
/// problem is (field, why), for the schedule's `Valid` condition.
pub fn check(
    spec: &BenchmarkScheduleSpec,
    sched: &Schedule,
    now: DateTime<Utc>,
) -> Result<(), Invalid> {
    let bad = |field: &'static str, message: String| Err(Invalid { field, message });
    if let Some(d) = spec.starting_deadline_seconds.filter(|d| *d < 1) {
        return bad(
            "spec.startingDeadlineSeconds",
            format!("{d}: every run would be missed (a run starts after its time); give at least 1, or leave it out for no deadline"),
        );
    }
    let policy = spec.baseline.policy;
    if crate::crd::is_control_plane_only(&spec.run_template.workload)
        && policy != BaselinePolicy::None
    {
        return bad(
            "spec.baseline.policy",
            format!("{policy:?} gives every run after the first a baselineRef, which a control-plane run does not take: set baseline.policy: None (compare its runs with kubectl benchrun compare)"),
        );
    }
    // The baseline is read when the next run (with `MedianOfLast`, the `count`-th next)
    // finishes; both runs take about as long, so the older one must outlive the gap between
    // their scheduled times.
    let runs_back = match policy {
        BaselinePolicy::LastSucceeded => 1,
        BaselinePolicy::MedianOfLast => spec.baseline.median_count(),
        BaselinePolicy::Pinned | BaselinePolicy::None => return Ok(()),
    };
    let Some(ttl) = spec.run_template.ttl_seconds_after_finished else {
        return Ok(());
    };
    let later = match runs_back {
        1 => "the next run".to_string(),
        k => format!("the run {k} scheduled times later"),
    };
    match longest_span(sched, now, runs_back).map(|s| s.num_seconds()) {
        Some(span) if span > ttl => bad(
            "spec.runTemplate.ttlSecondsAfterFinished",
            format!(
                "{ttl}s deletes each run before {later} (up to {span}s after it) can use it as its baseline (baseline.policy {policy:?}): give at least {span}, or leave it out (successfulRunsHistoryLimit prunes old runs and keeps the baseline)"
            ),
        ),
        _ => Ok(()),
    }
}

/// The longest time between a scheduled time and the one `k` times later, over the next year
/// of the schedule (at most [`SPAN_TIMES`] times looked at). `None` if it has fewer times.
fn longest_span(sched: &Schedule, from: DateTime<Utc>, k: usize) -> Option<chrono::Duration> {
    let horizon = from + chrono::Duration::days(366);
    let mut times = vec![];
    let mut t = from;
    while times.len() < SPAN_TIMES {
        match sched.next_after(t) {
            Some(next) if next <= horizon || times.len() <= k => {
                times.push(next);
                t = next;
            }
            _ => break,
        }
    }
    times.windows(k + 1).map(|w| w[k] - w[0]).max()
}

/// Most scheduled times [`longest_span`] looks at (a minutely schedule's: 2,000 minutes).
const SPAN_TIMES: usize = 2000;

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule_spec(yaml: &str) -> BenchmarkScheduleSpec {
        serde_yaml::from_str(yaml).expect("schedule spec")
    }

    fn check_schedule(yaml: &str) -> Result<(), Invalid> {
        let s = schedule_spec(yaml);
        let sched = Schedule::parse(&s.schedule, s.time_zone.as_deref()).expect("cron");
        let now = DateTime::parse_from_rfc3339("2026-03-02T08:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        check(&s, &sched, now)
    }

    const TEMPLATE: &str =
        "runTemplate: {workload: {target: 'file:///d', duration: 5s, ops: [{op: put}]}";

    #[test]
    fn a_starting_deadline_of_zero_misses_every_run() {
        let e = check_schedule(&format!(
            "schedule: '@hourly'\nstartingDeadlineSeconds: 0\n{TEMPLATE}}}"
        ))
        .expect_err("0 s");
        assert_eq!(e.field, "spec.startingDeadlineSeconds");
        assert!(check_schedule(&format!(
            "schedule: '@hourly'\nstartingDeadlineSeconds: 1\n{TEMPLATE}}}"
        ))
        .is_ok());
    }

    /// A control-plane run refuses a baselineRef, which every run after the first would get:
    /// refused at the schedule unless its policy is None.
    #[test]
    fn a_control_plane_template_needs_no_baseline() {
        let cp = "schedule: '@hourly'\nrunTemplate: {controlPlane: {operations: [provision], count: 1}}\n";
        for policy in [
            "",
            "baseline: {policy: LastSucceeded}\n",
            "baseline: {policy: MedianOfLast}\n",
        ] {
            let e = check_schedule(&format!("{cp}{policy}")).expect_err(policy);
            assert_eq!(e.field, "spec.baseline.policy", "{policy}");
        }
        assert!(check_schedule(&format!("{cp}baseline: {{policy: None}}\n")).is_ok());
    }

    /// The run TTL keeps each run until the run that uses it as a baseline has finished: at
    /// least the longest gap between scheduled times (weekdays at 9: Friday to Monday, 72 h),
    /// `count` gaps with MedianOfLast; Pinned and None use no run of the schedule.
    #[test]
    fn a_run_ttl_outlives_the_gap_to_the_run_it_is_the_baseline_of() {
        let weekdays = |ttl: i64, baseline: &str| {
            check_schedule(&format!(
                "schedule: '0 9 * * 1-5'\n{baseline}{TEMPLATE}, ttlSecondsAfterFinished: {ttl}}}"
            ))
        };
        let e = weekdays(86_400, "").expect_err("a day is less than Friday to Monday");
        assert_eq!(e.field, "spec.runTemplate.ttlSecondsAfterFinished");
        assert!(e.message.contains("give at least 259200"), "{}", e.message);
        assert!(weekdays(259_200, "").is_ok());
        // The median of the last 3: the run three times later (Wednesday to Monday: 5 days).
        let median = "baseline: {policy: MedianOfLast, count: 3}\n";
        let e = weekdays(259_200, median).expect_err("three gaps");
        assert!(e.message.contains("give at least 432000"), "{}", e.message);
        assert!(weekdays(432_000, median).is_ok());
        assert!(weekdays(60, "baseline: {policy: None}\n").is_ok());
        assert!(weekdays(60, "baseline: {policy: Pinned, run: golden}\n").is_ok());
    }
}
