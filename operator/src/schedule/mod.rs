//! `BenchmarkSchedule`: runs made from a template at the times of a cron schedule, each compared
//! with the schedule's last good run (docs/SCHEDULES.md).
//!
//! - [`cron`]: the schedule and time zone, parsed; scheduled times before and after an instant
//! - [`check`]: what the schema cannot say about a schedule (its `Valid` condition)
//! - [`decide`]: one pass decided without the API server (CronJob's rules), unit-tested
//! - [`controller`]: the watch, observe and act

pub mod check;
pub mod controller;
pub mod cron;
pub mod decide;

/// Label on every run a schedule makes: the schedule's name.
pub const SCHEDULE_LABEL: &str = "benchrun.dev/schedule";
/// Annotation on every run a schedule makes: the time it stands for (RFC 3339).
pub const SCHEDULED_AT: &str = "benchrun.dev/scheduled-at";
/// Annotation on a schedule asking for one run now: a new value (an RFC 3339 time, the
/// request's) makes one run `<schedule>-<unix seconds>`; `status.lastRunRequest` records the
/// value acted on. `kubectl benchrun schedule run NAME` sets it.
pub const RUN_NOW: &str = "benchrun.dev/run-now";
