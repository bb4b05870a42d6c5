//! The `BenchmarkSchedule` custom resource (`benchrun.dev/v1alpha1`): a `BenchmarkRun` template
//! run on a cron schedule, each run compared with an automatically chosen baseline. The fields
//! mean what `CronJob`'s fields of the same names mean; [`crate::schedule`] has the logic.

// Every printcolumn repeats `type_ = "string"`; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::BenchmarkRunSpec;

/// Default of `successfulRunsHistoryLimit` (as CronJob's `successfulJobsHistoryLimit`).
pub const DEFAULT_SUCCESSFUL_HISTORY: i32 = 3;
/// Default of `failedRunsHistoryLimit` (as CronJob's `failedJobsHistoryLimit`).
pub const DEFAULT_FAILED_HISTORY: i32 = 1;

/// A `BenchmarkRun` made from `spec.runTemplate` at every time of `spec.schedule`, each one
/// compared with a baseline chosen by `spec.baseline`.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "benchrun.dev",
    version = "v1alpha1",
    kind = "BenchmarkSchedule",
    namespaced,
    status = "BenchmarkScheduleStatus",
    shortname = "brs",
    category = "benchrun",
    doc = "Scheduled storage benchmarks: a BenchmarkRun made from `spec.runTemplate` at each time of the cron `spec.schedule`, compared with the schedule's last good run.",
    printcolumn(
        name = "Schedule",
        type_ = "string",
        json_path = ".spec.schedule",
        description = "Cron schedule"
    ),
    printcolumn(
        name = "TimeZone",
        type_ = "string",
        json_path = ".spec.timeZone",
        description = "Time zone of the schedule"
    ),
    printcolumn(
        name = "Suspend",
        type_ = "boolean",
        json_path = ".spec.suspend",
        description = "No new runs while true"
    ),
    printcolumn(
        name = "Active",
        type_ = "integer",
        json_path = ".status.activeCount",
        description = "Runs not finished yet"
    ),
    printcolumn(
        name = "Last Schedule",
        type_ = "date",
        json_path = ".status.lastScheduleTime",
        description = "When the last run was scheduled"
    ),
    printcolumn(
        name = "Last Verdict",
        type_ = "string",
        json_path = ".status.lastVerdict",
        description = "Verdict of the newest finished run"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("has(self.runTemplate.workload) || !has(self.runTemplate.controlPlane) || (has(self.baseline) && has(self.baseline.policy) && self.baseline.policy == 'None')").message("baseline.policy: a control-plane run takes no baselineRef, so every run after the first would be refused: set baseline.policy: None").reason(::kube::core::cel::Reason::FieldValueInvalid))]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkScheduleSpec {
    /// When to run, in cron format: five fields (minute hour day-of-month month day-of-week)
    /// or `@yearly`, `@monthly`, `@weekly`, `@daily` (`@midnight`), `@hourly`, as CronJob.
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = Rule::new("!self.contains('TZ=')").message("schedule: give the time zone in spec.timeZone, not as TZ= or CRON_TZ= in the schedule"))]
    pub schedule: String,
    /// IANA time zone name the schedule is read in (`Europe/Berlin`); default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: Option<String>,
    /// No new runs while true; runs already started go on.
    #[serde(default)]
    pub suspend: bool,
    /// What to do when a run is due while an earlier one has not finished: `Forbid` (default:
    /// skip the new one, since two benchmarks on one storage measure each other), `Allow`
    /// (start it beside), `Replace` (delete the running one, then start the new one).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A run not started within this many seconds of its scheduled time is skipped (counted as
    /// missed). Also bounds how far back missed times are looked for after the operator was
    /// down. At least 1 (0 would miss every run). Unset: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub starting_deadline_seconds: Option<i64>,
    /// Finished, succeeded runs kept (older ones are deleted). Default 3. The run that is the
    /// current baseline is kept too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub successful_runs_history_limit: Option<i32>,
    /// Finished, failed runs kept. Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub failed_runs_history_limit: Option<i32>,
    /// What each run is compared with.
    #[serde(default)]
    pub baseline: ScheduleBaseline,
    /// The spec of every run (a `BenchmarkRun` spec; `baselineRef` is set from
    /// `spec.baseline`, `matrix` is not supported here).
    #[schemars(schema_with = "run_template_schema")]
    pub run_template: BenchmarkRunSpec,
}

impl ScheduleBaseline {
    /// `count`, or its default, within 1 and [`MAX_MEDIAN_COUNT`].
    pub fn median_count(&self) -> usize {
        self.count
            .unwrap_or(DEFAULT_MEDIAN_COUNT)
            .clamp(1, MAX_MEDIAN_COUNT) as usize
    }
}

impl BenchmarkScheduleSpec {
    /// `successfulRunsHistoryLimit`, or its default.
    pub fn successful_history(&self) -> usize {
        self.successful_runs_history_limit
            .unwrap_or(DEFAULT_SUCCESSFUL_HISTORY)
            .max(0) as usize
    }
    /// `failedRunsHistoryLimit`, or its default.
    pub fn failed_history(&self) -> usize {
        self.failed_runs_history_limit
            .unwrap_or(DEFAULT_FAILED_HISTORY)
            .max(0) as usize
    }
}

/// CronJob's `concurrencyPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Skip a run that is due while another runs.
    #[default]
    Forbid,
    /// Start it beside the running one.
    Allow,
    /// Delete the running one, then start it.
    Replace,
}

/// Default of `baseline.count` with `MedianOfLast`.
pub const DEFAULT_MEDIAN_COUNT: u32 = 5;
/// Largest `baseline.count` (each run's `baselineRef.runs` holds that many names).
pub const MAX_MEDIAN_COUNT: u32 = 20;

/// How each run's baseline is chosen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("self.policy != 'Pinned' || has(self.run)").message("baseline.run: give the pinned run's name with policy Pinned"))]
#[x_kube(validation = Rule::new("self.policy == 'Pinned' || !has(self.run)").message("baseline.run: only with policy Pinned"))]
#[x_kube(validation = Rule::new("self.policy == 'MedianOfLast' || !has(self.count)").message("baseline.count: only with policy MedianOfLast"))]
#[serde(rename_all = "camelCase")]
pub struct ScheduleBaseline {
    /// `LastSucceeded` (default): the newest Succeeded run of this schedule that did not
    /// regress; `MedianOfLast`: the median, figure by figure, of the newest `count` such runs;
    /// `Pinned`: the run named in `run`; `None`: no comparison.
    #[serde(default)]
    pub policy: BaselinePolicy,
    /// With `Pinned`: a Succeeded BenchmarkRun of this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub run: Option<String>,
    /// With `MedianOfLast`: how many of the newest good runs the median is taken over
    /// (default 5). With fewer so far, the median of those there are (the status says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 20))]
    pub count: Option<u32>,
    /// Largest tolerated change, in percent (the runs' `baselineRef.tolerancePercent`).
    /// Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1000.0))]
    pub tolerance_percent: Option<f64>,
}

/// `spec.baseline.policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BaselinePolicy {
    /// The newest Succeeded, not regressed run of this schedule.
    #[default]
    LastSucceeded,
    /// The median of the newest `count` Succeeded, not regressed runs of this schedule,
    /// figure by figure (docs/SCHEDULES.md).
    MedianOfLast,
    /// A named run.
    Pinned,
    /// No comparison.
    None,
}

/// What the schedule controller observed and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkScheduleStatus {
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid` (the schedule and time zone parse), `Scheduling` (runs are being made, or why
    /// not: suspended, invalid), `LastRunRegressed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// When a run was last scheduled (its scheduled time, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_schedule_time: Option<String>,
    /// When the newest Succeeded run finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_successful_time: Option<String>,
    /// The next scheduled time (RFC 3339), while not suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub next_schedule_time: Option<String>,
    /// Runs of this schedule not finished yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// `active`'s length (printer column).
    #[serde(default)]
    pub active_count: i32,
    /// What the next run will be compared with, if anything: a run's name, or with
    /// `MedianOfLast` `median of A, B, C` (and, while the schedule has fewer good runs than
    /// `count`, how many of them there are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_run: Option<String>,
    /// The value of the schedule's `benchrun.dev/run-now` annotation last acted on: a new
    /// value asks for one run now (`kubectl benchrun schedule run NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_request: Option<String>,
    /// Verdict of the newest finished run: `Succeeded`, `Regressed` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_verdict: Option<String>,
    /// Newest finished runs that failed, in a row (counted over `recentRuns`).
    #[serde(default)]
    pub failures_in_a_row: i32,
    /// The most recent runs, newest first (at most 20), kept after the runs are deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_runs: Vec<ScheduledRun>,
}

/// One run of a schedule, as its status lists it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledRun {
    /// The run's name.
    pub name: String,
    /// Its scheduled time (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub scheduled_time: String,
    /// Its phase when last seen.
    pub phase: String,
    /// Once finished: `Succeeded`, `Regressed` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// What it was compared with: a run's name, or `median of A, B` (with `MedianOfLast`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// With `Regressed`: the ops (and limits) that crossed the tolerance, each with its
    /// significance test's p-value (or `not tested: why`), from the run's
    /// `status.baseline.regressions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// Changes beyond the tolerance that the significance tests could not tell from noise
    /// (not regressions), from the run's `status.baseline.notSignificant`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_significant: Vec<String>,
    /// Its throughput (the run's printer column), once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<String>,
    /// Its p99 latency (the run's printer column), once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    /// Why it failed (the run's `Failed` condition message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The schema of `spec.runTemplate`: the run's spec schema without the run's own
/// "spec is immutable" rule (a schedule's template may change; runs made from it do not), and
/// with what a template may not hold.
fn run_template_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = generator.subschema_for::<BenchmarkRunSpec>();
    let mut v: Value = schema.into();
    if let Some(obj) = v.as_object_mut() {
        let mut rules: Vec<Value> = obj
            .remove("x-kubernetes-validations")
            .and_then(|r| r.as_array().cloned())
            .unwrap_or_default();
        rules.retain(|r| {
            !r.get("rule")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("oldSelf"))
        });
        rules.push(serde_json::json!({
            "rule": "!has(self.baselineRef)",
            "message": "runTemplate.baselineRef: set spec.baseline instead; the schedule sets each run's baselineRef"
        }));
        rules.push(serde_json::json!({
            "rule": "!has(self.matrix)",
            "message": "runTemplate.matrix: not supported in a schedule"
        }));
        obj.insert("x-kubernetes-validations".into(), Value::Array(rules));
        obj.insert(
            "description".into(),
            "The spec of every run (a BenchmarkRun spec; baselineRef is set from spec.baseline, matrix is not supported here).".into(),
        );
    }
    schemars::Schema::try_from(v).unwrap_or_else(|_| schemars::Schema::from(true))
}
