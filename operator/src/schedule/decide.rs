//! One pass over one schedule, decided without the API server: which run to create (and with
//! which baseline), which runs to delete (`Replace`, history limits), the status, the events and
//! when to look again. The rules are CronJob's (`pkg/controller/cronjob`, v2 controller):
//!
//! - the times looked at run from `status.lastScheduleTime` (or the schedule's creation) to
//!   now; with `startingDeadlineSeconds`, no further back than now minus the deadline;
//! - only the most recent of them is started; more than 100 missed ones are reported (a
//!   Warning event `TooManyMissedTimes`), and the most recent still starts;
//! - a time more than `startingDeadlineSeconds` old is not started (`MissedSchedule`);
//! - `Forbid` with a run active: nothing is started and `lastScheduleTime` stays, so the time
//!   is started late when the active run ends, unless its deadline has passed by then;
//!   `Replace`: the active runs are deleted and the new one is started; `Allow`: started;
//! - finished runs beyond the history limits are deleted, oldest first.
//!
//! Beyond CronJob: a new value of the annotation `benchrun.dev/run-now` asks for one run now
//! (CronJob's `kubectl create job --from`), also while suspended; it waits for an active run
//! under `Forbid` as a scheduled time does. Baselines: the newest good run, the median of the
//! newest `count` good runs, or a pinned run; the runs a baseline needs are never pruned.

use chrono::{DateTime, Utc};

use crate::crd::schedule::{
    BaselinePolicy, BenchmarkScheduleSpec, BenchmarkScheduleStatus, ConcurrencyPolicy, ScheduledRun,
};
use crate::crd::Phase;
use crate::run_rules::set_condition;

use super::cron::Schedule;

/// Longest schedule name, as CronJob's: run names `<name>-<unix minutes>` must fit in 63
/// characters (a label value).
pub const MAX_SCHEDULE_NAME: usize = 52;
/// More missed times than this are reported, as CronJob does.
pub const MAX_MISSED: usize = 100;
/// Runs kept in `status.recentRuns`.
pub const MAX_RECENT: usize = 20;

/// Condition types of a schedule.
pub mod cond {
    /// The schedule and time zone parse.
    pub const VALID: &str = "Valid";
    /// Runs are being made (False: suspended or invalid, the reason says which).
    pub const SCHEDULING: &str = "Scheduling";
    /// The newest finished run regressed against its baseline.
    pub const LAST_RUN_REGRESSED: &str = "LastRunRegressed";
}

/// Verdicts of a finished run.
pub mod verdict {
    /// Succeeded and not regressed.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Succeeded, and `Regressed=True`.
    pub const REGRESSED: &str = "Regressed";
    /// Failed.
    pub const FAILED: &str = "Failed";
}

/// A run of this schedule, as the pass sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunView {
    /// Its name.
    pub name: String,
    /// Its scheduled time (from its annotation, else its creation).
    pub scheduled: DateTime<Utc>,
    /// Its phase.
    pub phase: Phase,
    /// Its `Regressed` condition is True.
    pub regressed: bool,
    /// `status.baseline.regressions`.
    pub regressions: Vec<String>,
    /// `status.baseline.notSignificant`.
    pub not_significant: Vec<String>,
    /// `spec.baselineRef.run`.
    pub baseline: Option<String>,
    /// `spec.baselineRef.runs` (a median baseline).
    pub median_of: Vec<String>,
    /// `status.finishTime`.
    pub finished_at: Option<DateTime<Utc>>,
    /// Printer columns of the run.
    pub throughput: Option<String>,
    /// Printer columns of the run.
    pub p99: Option<String>,
    /// The `Failed` condition's message, for a failed run.
    pub message: Option<String>,
    /// It has a deletion timestamp.
    pub deleting: bool,
}

impl RunView {
    /// Succeeded, Regressed or Failed once finished.
    pub fn verdict(&self) -> Option<&'static str> {
        match self.phase {
            Phase::Failed => Some(verdict::FAILED),
            Phase::Succeeded if self.regressed => Some(verdict::REGRESSED),
            Phase::Succeeded => Some(verdict::SUCCEEDED),
            _ => None,
        }
    }
}

/// What a pass looks at.
#[derive(Clone, Debug)]
pub struct View<'a> {
    /// The schedule's name.
    pub name: &'a str,
    /// Its generation.
    pub generation: Option<i64>,
    /// Its creation time.
    pub created: DateTime<Utc>,
    /// Its spec.
    pub spec: &'a BenchmarkScheduleSpec,
    /// Its status as last written.
    pub status: &'a BenchmarkScheduleStatus,
    /// Its runs (owned by it).
    pub runs: Vec<RunView>,
    /// The value of its `benchrun.dev/run-now` annotation.
    pub run_now: Option<&'a str>,
    /// Now.
    pub now: DateTime<Utc>,
}

/// A run to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// `<schedule>-<scheduled unix time in minutes>`.
    pub name: String,
    /// The time it stands for.
    pub scheduled: DateTime<Utc>,
    /// Its `spec.baselineRef.run`.
    pub baseline: Option<String>,
    /// Its `spec.baselineRef.runs` (`MedianOfLast`), newest first.
    pub median_of: Vec<String>,
}

/// An event on the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// Warning (else Normal).
    pub warning: bool,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub note: String,
}

/// What the pass does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The status to write (the new run already in it).
    pub status: BenchmarkScheduleStatus,
    /// Runs to delete first: the active ones (`Replace`) and those past the history limits.
    pub delete: Vec<String>,
    /// The run to create.
    pub create: Option<NewRun>,
    /// Events on the schedule.
    pub notes: Vec<Note>,
    /// When to look again (the next scheduled time); `None`: on a change only.
    pub requeue_at: Option<DateTime<Utc>>,
}

/// The run name for a scheduled time: `<schedule>-<unix minutes>`, as CronJob names jobs.
pub fn run_name(schedule: &str, scheduled: DateTime<Utc>) -> String {
    format!("{schedule}-{}", scheduled.timestamp().div_euclid(60))
}

/// The run name for a request (`benchrun.dev/run-now`) made at `at`: `<schedule>-<unix
/// seconds>`, so that it never takes the name of a scheduled time's run (ten digits, where
/// minutes have eight), and fits in 63 characters with a 52-character schedule name.
pub fn requested_run_name(schedule: &str, at: DateTime<Utc>) -> String {
    format!("{schedule}-{}", at.timestamp())
}

/// What a run was compared with, for the status: a run's name, or `median of a, b` (with,
/// when the median was over fewer runs than `count`, how many).
pub fn baseline_text(
    run: Option<&str>,
    median_of: &[String],
    count: Option<usize>,
) -> Option<String> {
    if let Some(r) = run {
        return Some(r.to_string());
    }
    if median_of.is_empty() {
        return None;
    }
    let mut s = format!("median of {}", median_of.join(", "));
    if let Some(n) = count.filter(|n| median_of.len() < *n) {
        s.push_str(&format!(
            " ({} of the {n} runs asked: the schedule has no more good runs yet)",
            median_of.len()
        ));
    }
    Some(s)
}

/// Decide one pass.
pub fn decide(v: &View) -> Plan {
    let mut notes = Vec::new();
    let mut delete = Vec::new();
    let mut status = v.status.clone();
    status.observed_generation = v.generation;
    let live: Vec<&RunView> = v.runs.iter().filter(|r| !r.deleting).collect();
    let mut active: Vec<&RunView> = live
        .iter()
        .copied()
        .filter(|r| !r.phase.is_finished())
        .collect();
    active.sort_by_key(|r| r.scheduled);

    // Verdicts: a run that finished since the last pass is reported once.
    for r in &live {
        let Some(verdict) = r.verdict() else { continue };
        let before = v.status.recent_runs.iter().find(|p| p.name == r.name);
        if before.and_then(|p| p.verdict.as_deref()) == Some(verdict) {
            continue;
        }
        match verdict {
            verdict::REGRESSED => notes.push(Note {
                warning: true,
                reason: "RunRegressed",
                note: format!(
                    "run {} regressed against {}: {}",
                    r.name,
                    baseline_text(r.baseline.as_deref(), &r.median_of, None)
                        .unwrap_or_else(|| "its baseline".into()),
                    if r.regressions.is_empty() {
                        "see its status.baseline".to_string()
                    } else {
                        r.regressions.join(", ")
                    }
                ),
            }),
            verdict::FAILED => notes.push(Note {
                warning: true,
                reason: "RunFailed",
                note: format!(
                    "run {} failed{}",
                    r.name,
                    r.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            }),
            _ => {}
        }
    }

    // The baseline of the next run, and the runs the history limits must keep for it.
    let mut good: Vec<&RunView> = live
        .iter()
        .copied()
        .filter(|r| r.phase == Phase::Succeeded && !r.regressed)
        .collect();
    good.sort_by_key(|r| std::cmp::Reverse(r.scheduled));
    let (baseline, median_of): (Option<String>, Vec<String>) = match v.spec.baseline.policy {
        BaselinePolicy::LastSucceeded => (good.first().map(|r| r.name.clone()), vec![]),
        BaselinePolicy::MedianOfLast => (
            None,
            good.iter()
                .take(v.spec.baseline.median_count())
                .map(|r| r.name.clone())
                .collect(),
        ),
        BaselinePolicy::Pinned => (v.spec.baseline.run.clone(), vec![]),
        BaselinePolicy::None => (None, vec![]),
    };
    let median_count = (v.spec.baseline.policy == BaselinePolicy::MedianOfLast)
        .then(|| v.spec.baseline.median_count());
    let baseline_desc = baseline_text(baseline.as_deref(), &median_of, median_count);
    let keep_for_baseline =
        |name: &String| baseline.as_ref() == Some(name) || median_of.contains(name);

    // History limits: newest kept, the baseline always.
    for (phase, keep) in [
        (Phase::Succeeded, v.spec.successful_history()),
        (Phase::Failed, v.spec.failed_history()),
    ] {
        let mut done: Vec<&RunView> = live.iter().copied().filter(|r| r.phase == phase).collect();
        done.sort_by_key(|r| std::cmp::Reverse(r.scheduled));
        for r in done.into_iter().skip(keep) {
            if !keep_for_baseline(&r.name) {
                delete.push(r.name.clone());
            }
        }
    }

    // The schedule itself.
    let gen = v.generation;
    let mut create = None;
    let mut requeue_at = None;
    let parsed = if v.name.len() > MAX_SCHEDULE_NAME {
        Err(super::cron::Invalid {
            field: "metadata.name",
            message: format!(
                "{} characters; at most {MAX_SCHEDULE_NAME}, so that run names <name>-<unix minutes> fit in 63",
                v.name.len()
            ),
        })
    } else {
        Schedule::parse(&v.spec.schedule, v.spec.time_zone.as_deref())
            .and_then(|s| crate::validate::schedule(v.spec, &s, v.now).map(|()| s))
    };
    match parsed {
        Err(e) => {
            set_condition(
                &mut status.conditions,
                cond::VALID,
                false,
                "Invalid",
                e.to_string(),
                gen,
                v.now,
            );
            set_condition(
                &mut status.conditions,
                cond::SCHEDULING,
                false,
                "Invalid",
                format!("no runs are made: {e}"),
                gen,
                v.now,
            );
            status.next_schedule_time = None;
        }
        Ok(sched) => {
            set_condition(
                &mut status.conditions,
                cond::VALID,
                true,
                "Valid",
                format!(
                    "schedule {:?} in time zone {}",
                    v.spec.schedule,
                    sched.tz().name()
                ),
                gen,
                v.now,
            );
            if v.spec.suspend {
                set_condition(
                    &mut status.conditions,
                    cond::SCHEDULING,
                    false,
                    "Suspended",
                    "spec.suspend is true: no new runs",
                    gen,
                    v.now,
                );
                status.next_schedule_time = None;
            } else {
                set_condition(
                    &mut status.conditions,
                    cond::SCHEDULING,
                    true,
                    "Scheduled",
                    "runs are made at the scheduled times",
                    gen,
                    v.now,
                );
                let next = sched.next_after(v.now);
                requeue_at = next;
                status.next_schedule_time = next.map(|t| t.to_rfc3339());
                if let Some(due) = due_time(v, &sched, &mut notes) {
                    let name = run_name(v.name, due);
                    let blocked = |busy: &str| {
                        format!(
                            "not starting the run of {} because {busy} is still active and concurrencyPolicy is Forbid",
                            due.to_rfc3339()
                        )
                    };
                    match admit_new_run(v, &name, blocked, &mut active, &mut delete, &mut notes) {
                        // Made by an earlier pass whose status write was lost.
                        Admit::Exists => status.last_schedule_time = Some(due.to_rfc3339()),
                        Admit::Blocked => {}
                        Admit::Go => {
                            notes.push(Note {
                                warning: false,
                                reason: "RunCreated",
                                note: format!(
                                    "created run {name} for {}{}",
                                    due.to_rfc3339(),
                                    compared_with(baseline_desc.as_deref())
                                ),
                            });
                            status.last_schedule_time = Some(due.to_rfc3339());
                            create = Some(NewRun {
                                name,
                                scheduled: due,
                                baseline: baseline.clone(),
                                median_of: median_of.clone(),
                            });
                        }
                    }
                }
            }
            // A run asked for now: after the scheduled one (one run per pass), whether
            // suspended or not.
            if create.is_none() {
                if let Some(request) = v
                    .run_now
                    .filter(|r| Some(*r) != v.status.last_run_request.as_deref())
                {
                    match crate::run_rules::parse_time(request) {
                        None => {
                            notes.push(Note {
                                warning: true,
                                reason: "RunRequestInvalid",
                                note: format!(
                                    "annotation {}: {request:?} is not an RFC 3339 time; no run made (kubectl benchrun schedule run {} sets it)",
                                    super::RUN_NOW, v.name
                                ),
                            });
                            status.last_run_request = Some(request.to_string());
                        }
                        Some(at) => {
                            let name = requested_run_name(v.name, at);
                            let blocked = |busy: &str| {
                                format!(
                                    "not starting the run asked for at {} because {busy} is still active and concurrencyPolicy is Forbid; it starts when that ends",
                                    at.to_rfc3339()
                                )
                            };
                            match admit_new_run(
                                v,
                                &name,
                                blocked,
                                &mut active,
                                &mut delete,
                                &mut notes,
                            ) {
                                Admit::Exists => {
                                    status.last_run_request = Some(request.to_string())
                                }
                                Admit::Blocked => {}
                                Admit::Go => {
                                    notes.push(Note {
                                        warning: false,
                                        reason: "RunCreated",
                                        note: format!(
                                            "created run {name} as asked at {} (annotation {}){}",
                                            at.to_rfc3339(),
                                            super::RUN_NOW,
                                            compared_with(baseline_desc.as_deref())
                                        ),
                                    });
                                    status.last_run_request = Some(request.to_string());
                                    create = Some(NewRun {
                                        name,
                                        scheduled: at,
                                        baseline: baseline.clone(),
                                        median_of: median_of.clone(),
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    // The status: runs, verdicts, the recent list.
    let mut recent = v.status.recent_runs.clone();
    for r in &live {
        let rec = ScheduledRun {
            name: r.name.clone(),
            scheduled_time: r.scheduled.to_rfc3339(),
            phase: r.phase.as_str().into(),
            verdict: r.verdict().map(str::to_string),
            baseline: baseline_text(r.baseline.as_deref(), &r.median_of, median_count),
            regressions: r.regressions.clone(),
            not_significant: r.not_significant.clone(),
            throughput: r.throughput.clone(),
            p99: r.p99.clone(),
            message: r.message.clone(),
        };
        match recent.iter_mut().find(|p| p.name == r.name) {
            Some(p) => *p = rec,
            None => recent.push(rec),
        }
    }
    let mut active_names: Vec<String> = active.iter().map(|r| r.name.clone()).collect();
    if let Some(n) = &create {
        recent.push(ScheduledRun {
            name: n.name.clone(),
            scheduled_time: n.scheduled.to_rfc3339(),
            phase: Phase::Pending.as_str().into(),
            baseline: baseline_desc.clone(),
            ..Default::default()
        });
        active_names.push(n.name.clone());
    }
    // A run deleted before it finished (by hand, or replaced) will never have a verdict.
    for p in recent.iter_mut() {
        if p.verdict.is_none()
            && !v.runs.iter().any(|r| r.name == p.name)
            && create.as_ref().is_none_or(|n| n.name != p.name)
        {
            p.phase = "Deleted".into();
        }
    }
    recent.sort_by(|a, b| {
        b.scheduled_time
            .cmp(&a.scheduled_time)
            .then_with(|| b.name.cmp(&a.name))
    });
    recent.truncate(MAX_RECENT);
    status.active_count = active_names.len() as i32;
    status.active = active_names;
    status.baseline_run = baseline_desc;
    let finished: Vec<&ScheduledRun> = recent.iter().filter(|r| r.verdict.is_some()).collect();
    status.last_verdict = finished.first().and_then(|r| r.verdict.clone());
    status.failures_in_a_row = finished
        .iter()
        .take_while(|r| r.verdict.as_deref() == Some(verdict::FAILED))
        .count() as i32;
    if let Some(t) = live
        .iter()
        .filter(|r| r.phase == Phase::Succeeded)
        .filter_map(|r| r.finished_at)
        .max()
    {
        let newer = status
            .last_successful_time
            .as_deref()
            .and_then(crate::run_rules::parse_time)
            .is_none_or(|old| t > old);
        if newer {
            status.last_successful_time = Some(t.to_rfc3339());
        }
    }
    match finished.first() {
        Some(r) if r.verdict.as_deref() == Some(verdict::REGRESSED) => set_condition(
            &mut status.conditions,
            cond::LAST_RUN_REGRESSED,
            true,
            "Regressed",
            format!(
                "run {} regressed against {}: {}",
                r.name,
                r.baseline.as_deref().unwrap_or("its baseline"),
                r.regressions.join(", ")
            ),
            gen,
            v.now,
        ),
        Some(r) => set_condition(
            &mut status.conditions,
            cond::LAST_RUN_REGRESSED,
            false,
            r.verdict.as_deref().unwrap_or_default(),
            format!(
                "newest finished run {}: {}",
                r.name,
                r.verdict.as_deref().unwrap_or_default()
            ),
            gen,
            v.now,
        ),
        None => {}
    }
    status.recent_runs = recent;
    delete.sort();
    delete.dedup();
    Plan {
        status,
        delete,
        create,
        notes,
        requeue_at,
    }
}

/// The scheduled time to start now, if any: the most recent time since the last scheduled one
/// (or the creation), within the starting deadline. Reports many missed times and a missed
/// deadline.
fn due_time(v: &View, sched: &Schedule, notes: &mut Vec<Note>) -> Option<DateTime<Utc>> {
    let last = v
        .status
        .last_schedule_time
        .as_deref()
        .and_then(crate::run_rules::parse_time)
        .unwrap_or(v.created);
    let deadline = v
        .spec
        .starting_deadline_seconds
        .map(chrono::Duration::seconds);
    let earliest = match deadline {
        Some(d) => last.max(v.now - d),
        None => last,
    };
    let missed = sched.count_between(earliest, v.now, MAX_MISSED + 1);
    if missed == 0 {
        return None;
    }
    let due = sched.last_at_or_before(v.now)?;
    if missed > MAX_MISSED {
        notes.push(Note {
            warning: true,
            reason: "TooManyMissedTimes",
            note: format!(
                "more than {MAX_MISSED} scheduled times missed since {}; starting only the most recent ({}). Set or lower spec.startingDeadlineSeconds, or check the clock",
                earliest.to_rfc3339(),
                due.to_rfc3339()
            ),
        });
    }
    if let Some(d) = deadline {
        if due + d < v.now {
            notes.push(Note {
                warning: true,
                reason: "MissedSchedule",
                note: format!(
                    "missed the run of {}: more than startingDeadlineSeconds ({}) ago",
                    due.to_rfc3339(),
                    d.num_seconds()
                ),
            });
            return None;
        }
    }
    Some(due)
}

/// ", compared with X" or nothing.
/// Whether a new run of the schedule (scheduled, or asked for) may be created now.
enum Admit {
    /// It exists already (an earlier pass made it, and its status write was lost).
    Exists,
    /// Another run is active and the policy is `Forbid` (said in a note; the time stays owed).
    Blocked,
    /// Create it (under `Replace`, after the active runs put in `delete`).
    Go,
}

/// The rules shared by scheduled and requested runs: a run of that name already made, then
/// `concurrencyPolicy`. `blocked` says why not, given the active runs' names.
fn admit_new_run(
    v: &View,
    name: &str,
    blocked: impl FnOnce(&str) -> String,
    active: &mut Vec<&RunView>,
    delete: &mut Vec<String>,
    notes: &mut Vec<Note>,
) -> Admit {
    if v.runs.iter().any(|r| r.name == name) || v.status.recent_runs.iter().any(|r| r.name == name)
    {
        return Admit::Exists;
    }
    if !active.is_empty() && v.spec.concurrency_policy == ConcurrencyPolicy::Forbid {
        notes.push(Note {
            warning: false,
            reason: "RunAlreadyActive",
            note: blocked(&names(active)),
        });
        return Admit::Blocked;
    }
    if v.spec.concurrency_policy == ConcurrencyPolicy::Replace {
        for r in active.drain(..) {
            notes.push(Note {
                warning: false,
                reason: "RunReplaced",
                note: format!("deleting active run {} (concurrencyPolicy Replace)", r.name),
            });
            delete.push(r.name.clone());
        }
    }
    Admit::Go
}

fn compared_with(baseline: Option<&str>) -> String {
    baseline
        .map(|b| format!(", compared with {b}"))
        .unwrap_or_default()
}

fn names(runs: &[&RunView]) -> String {
    runs.iter()
        .map(|r| r.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
