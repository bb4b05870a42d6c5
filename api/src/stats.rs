//! Statistics: per-op HDR histograms, counters, a per-second timeline, and the summary that
//! carries them.
//!
//! Summaries serialize their histograms, so summaries from many workers merge *exactly*:
//! the merged p99 is the p99 of all samples, never an average of per-worker p99s.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::spec::{OpKind, Workload};

// The histogram is its own module, below `spec` (whose validation bounds histogram memory);
// these stay reachable here, where they always were.
pub use crate::data_errors::DataError;
pub use crate::latency::Latency;
pub use crate::spec::{histogram_bytes_per_task, mix_ops};
pub use crate::timeline::Second;
pub use crate::volume::{CacheResidency, TargetVolume, VolumeStats};

/// Everything measured for one operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpStats {
    /// Operations completed, successful or not.
    pub count: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Payload bytes moved by successful operations.
    pub bytes: u64,
    /// Requests (or read/write syscalls for local files) issued.
    pub requests: u64,
    /// Failures by kind: `timeout`, `not_found`, `http_503`, `io`, ...
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first few data errors (`corrupt`, `short`) of this op: where they are, at most
    /// [`crate::data_errors::MAX_DATA_ERRORS`], the smallest by (kind, key, offset) so merges
    /// stay exact. Empty (absent) when there were none, and in older summaries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_errors: Vec<DataError>,
    /// Latency of successful operations.
    pub latency: Latency,
    /// Latency of failed operations, per error kind (the kinds of `errorsByKind`), from the
    /// same instant as `latency` (the intended start in open loop) to the failure: a
    /// timeout's full wait is here. With `latency`, the latency of all operations
    /// ([`OpStats::all_latency`]). Empty (absent) when none failed, and in older summaries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_latency: BTreeMap<String, Latency>,
    /// Time to first byte of successful GETs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
    /// GET with `read.headBeforeGet` (an experiment): HEADs sent before GETs, also counted in
    /// `requests`. 0 (absent) otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub heads: u64,
    /// GET: read buffers allocated by successful GETs. With the buffer pool (the default) at
    /// most one per operation in flight over the run (a buffer is reused once warm); with
    /// `read.bufferPool: false`, one per GET. 0 (absent) where GETs read into no buffer
    /// (streamed or ranged object GETs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub buffers_allocated: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl OpStats {
    /// Add `o`'s counts and histograms (saturating).
    pub fn merge(&mut self, o: &OpStats) {
        // Saturating: summaries come from other processes, and a forged count must not
        // overflow (a panic in a debug build, a wrap in release).
        self.count = self.count.saturating_add(o.count);
        self.errors = self.errors.saturating_add(o.errors);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.requests = self.requests.saturating_add(o.requests);
        self.heads = self.heads.saturating_add(o.heads);
        self.buffers_allocated = self.buffers_allocated.saturating_add(o.buffers_allocated);
        for (k, v) in &o.errors_by_kind {
            let e = self.errors_by_kind.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
        crate::data_errors::merge(&mut self.data_errors, &o.data_errors);
        self.latency.add(&o.latency);
        for (k, l) in &o.failed_latency {
            self.failed_latency.entry(k.clone()).or_default().add(l);
        }
        if let Some(t) = &o.ttfb {
            self.ttfb.get_or_insert_with(Latency::default).add(t);
        }
    }

    /// The latency of all operations, successful and failed, when any failed op's latency
    /// was recorded (`None` otherwise: it would equal `latency`).
    pub fn all_latency(&self) -> Option<Latency> {
        if self.failed_latency.values().all(|l| l.count() == 0) {
            return None;
        }
        let mut all = self.latency.clone();
        for l in self.failed_latency.values() {
            all.add(l);
        }
        Some(all)
    }

    /// Human-facing figures over `elapsed` seconds.
    pub fn report(&self, elapsed: f64) -> OpReport {
        let all = self.all_latency();
        let all_ms = |q: f64| all.as_ref().map(|l| l.quantile_us(q) as f64 / 1000.0);
        let l = &self.latency;
        let ms = |q: f64| {
            if l.count() == 0 {
                0.0
            } else {
                l.quantile_us(q) as f64 / 1000.0
            }
        };
        let per_s = |n: f64| if elapsed > 0.0 { n / elapsed } else { 0.0 };
        OpReport {
            count: self.count,
            errors: self.errors,
            ops_per_sec: per_s(self.count as f64),
            mib_per_sec: per_s(self.bytes as f64 / (1 << 20) as f64),
            requests_per_op: if self.count > 0 {
                self.requests as f64 / self.count as f64
            } else {
                0.0
            },
            mean_ms: if l.count() == 0 {
                0.0
            } else {
                l.0.mean() / 1000.0
            },
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            p9999_ms: ms(0.9999),
            max_ms: if l.count() == 0 {
                0.0
            } else {
                l.0.max() as f64 / 1000.0
            },
            ttfb_p50_ms: self.ttfb_ms(0.5),
            ttfb_p99_ms: self.ttfb_ms(0.99),
            all_p50_ms: all_ms(0.5),
            all_p95_ms: all_ms(0.95),
            all_p99_ms: all_ms(0.99),
            all_p999_ms: all_ms(0.999),
            all_max_ms: all.as_ref().map(|l| l.0.max() as f64 / 1000.0),
            data_errors: self.data_errors.clone(),
        }
    }

    /// Time to first byte at quantile `q` in milliseconds, for an op that records it (GET).
    pub fn ttfb_ms(&self, q: f64) -> Option<f64> {
        let t = self.ttfb.as_ref().filter(|t| t.count() > 0)?;
        Some(t.quantile_us(q) as f64 / 1000.0)
    }
}

impl crate::size_buckets::SizeBucket {
    /// The bucket as an op's statistics, for the same figures as an op's row.
    pub fn op_stats(&self) -> OpStats {
        OpStats {
            count: self.count,
            bytes: self.bytes,
            requests: self.requests,
            latency: self.latency.clone(),
            ..Default::default()
        }
    }
}

/// Derived figures for one op; recomputed from the histograms, never merged. Also a run's
/// per-op results in the operator's status (`status.results`): every field defaults, so a
/// status written before a field existed still reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct OpReport {
    /// Operations completed, successful or not.
    pub count: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Operations per second of the measured stage.
    pub ops_per_sec: f64,
    /// Payload MiB per second of the measured stage.
    pub mib_per_sec: f64,
    /// Requests (or syscalls) per operation.
    pub requests_per_op: f64,
    /// Mean latency of successful operations, in milliseconds.
    pub mean_ms: f64,
    /// Median latency of successful operations, in milliseconds (failed ones too: `allP50Ms`).
    pub p50_ms: f64,
    /// 90th percentile latency, in milliseconds.
    pub p90_ms: f64,
    /// 95th percentile latency, in milliseconds (absent from summaries before it was added).
    #[serde(default)]
    pub p95_ms: f64,
    /// 99th percentile latency of successful operations, in milliseconds (failed ones too:
    /// `allP99Ms`).
    pub p99_ms: f64,
    /// 99.9th percentile latency, in milliseconds.
    pub p999_ms: f64,
    /// 99.99th percentile latency, in milliseconds (absent from summaries before it was added).
    #[serde(default)]
    pub p9999_ms: f64,
    /// Largest latency, in milliseconds.
    pub max_ms: f64,
    /// GET: median time to first byte, in milliseconds, measured from the same instant as
    /// the latency (the intended start in open loop). Absent for other ops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_p50_ms: Option<f64>,
    /// GET: 99th percentile time to first byte, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_p99_ms: Option<f64>,
    /// Median latency of all operations, failed ones included (`failedLatency` with
    /// `latency`), in milliseconds. Absent when no failed op's latency was recorded: the
    /// `p50Ms` of successful ops is then that of all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_p50_ms: Option<f64>,
    /// 95th percentile latency of all operations, failed ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_p95_ms: Option<f64>,
    /// 99th percentile latency of all operations, failed ones included: under overload,
    /// where requests time out, the figure `p99Ms` (successful ops only) reads better than
    /// the storage served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_p99_ms: Option<f64>,
    /// 99.9th percentile latency of all operations, failed ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_p999_ms: Option<f64>,
    /// Largest latency of all operations, failed ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_max_ms: Option<f64>,
    /// With `read.verify`: where the first few `corrupt` and `short` errors are (the op's
    /// [`OpStats::data_errors`]), so `.status` names them. Absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_errors: Vec<DataError>,
}

impl OpReport {
    /// Failed operations over all operations; 0 when none ran.
    pub fn error_rate(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.errors as f64 / self.count as f64
        }
    }
}

/// CPU time and page faults of the worker process during the measured stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStats {
    /// CPU seconds in user mode.
    pub cpu_user_seconds: f64,
    /// CPU seconds in the kernel.
    pub cpu_system_seconds: f64,
    /// Page faults served without I/O.
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
}

impl ProcessStats {
    /// The process's usage so far.
    pub fn now() -> Self {
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer; RUSAGE_SELF cannot fail.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Self {
            cpu_user_seconds: secs(ru.ru_utime),
            cpu_system_seconds: secs(ru.ru_stime),
            minor_faults: ru.ru_minflt as u64,
            major_faults: ru.ru_majflt as u64,
        }
    }

    /// Usage between `earlier` and `self`.
    pub fn since(&self, earlier: &ProcessStats) -> Self {
        Self {
            cpu_user_seconds: (self.cpu_user_seconds - earlier.cpu_user_seconds).max(0.0),
            cpu_system_seconds: (self.cpu_system_seconds - earlier.cpu_system_seconds).max(0.0),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
        }
    }

    fn merge(&mut self, o: &ProcessStats) {
        self.cpu_user_seconds += o.cpu_user_seconds;
        self.cpu_system_seconds += o.cpu_system_seconds;
        self.minor_faults = self.minor_faults.saturating_add(o.minor_faults);
        self.major_faults = self.major_faults.saturating_add(o.major_faults);
    }
}

/// A stage outside the measured window (prepare, pre-stat, cleanup).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStats {
    /// How long the stage took (the longest, once merged).
    pub seconds: f64,
    /// Objects written, listed, stat'd or deleted.
    pub objects: u64,
    /// Payload bytes written.
    pub bytes: u64,
    /// Requests issued.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Object targets: TCP connections the stage's clients established (the setup's are
    /// one per task and 2 spares per shard on purpose, so the measured stage need open
    /// none). Absent for local
    /// targets and in older summaries; summed once merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
}

/// `a + b` where either is counted: connection counts of merged parts.
fn add_counted(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

impl StageStats {
    fn merge(&mut self, o: &StageStats) {
        self.connections_opened = add_counted(self.connections_opened, o.connections_opened);
        self.seconds = self.seconds.max(o.seconds);
        self.objects = self.objects.saturating_add(o.objects);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.requests = self.requests.saturating_add(o.requests);
        self.errors = self.errors.saturating_add(o.errors);
    }
}

/// The warm-up (`warmup`): operations run against the target before the measured stage, to
/// fill caches and open connections, and left out of `ops`, `report` and every rate. Their
/// own figures are kept here, apart, so a cold start can be seen (and its cost compared
/// with the measured figures); their seconds are marked in the timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Warmup {
    /// How long the warm-up ran (the longest, once merged).
    pub seconds: f64,
    /// Per-operation statistics of the warm-up (an op is the warm-up's when it finished
    /// before the measured stage began, as fio's `ramp_time` counts).
    pub ops: BTreeMap<OpKind, OpStats>,
    /// Figures derived from `ops` over `seconds`, recomputed whenever the summary changes.
    #[serde(default)]
    pub report: BTreeMap<OpKind, OpReport>,
    /// CPU and page faults during the warm-up (summed over workers).
    #[serde(default)]
    pub process: ProcessStats,
    /// Object targets: TCP connections established during the warm-up (summed over
    /// workers); absent for local targets and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
}

impl Warmup {
    fn merge(&mut self, o: &Warmup) {
        self.connections_opened = add_counted(self.connections_opened, o.connections_opened);
        self.seconds = self.seconds.max(o.seconds);
        for (k, v) in &o.ops {
            self.ops.entry(*k).or_default().merge(v);
        }
        self.process.merge(&o.process);
    }

    fn refresh(&mut self) {
        self.report = self
            .ops
            .iter()
            .map(|(k, v)| (*k, v.report(self.seconds)))
            .collect();
    }
}

/// How an open-loop stage (`rateLimit`) kept to its schedule, apart from the ops' latency
/// (which is measured from when each op was due, lag included).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenLoop {
    /// Operations the schedule made due before the stage ended (the offered load).
    pub due: u64,
    /// Operations started: `due - started` were due but never began (every task was busy
    /// until the end).
    pub started: u64,
    /// Operations started more than [`OpenLoop::LATE_US`] (1 ms) after they were due: the
    /// tasks, or the machine, could not keep up (the limiter itself starts an op within
    /// microseconds of its due time: see `lagWithin`).
    pub late: u64,
    /// How many of the started operations began within 10 us, 100 us and 1 ms of their due
    /// time (each band counts those of the tighter ones too; the rest are `late`): the
    /// distribution of the scheduling lag. Absent (zeros) in summaries of older versions.
    #[serde(default)]
    pub lag_within: LagBands,
    /// Sum over the started operations of their scheduling lag (start minus due), in us.
    pub lag_sum_us: u64,
    /// The largest scheduling lag, in us.
    pub lag_max_us: u64,
}

impl OpenLoop {
    /// An op that starts later than this after its due time counts as late. The limiter
    /// waits to the microsecond (an idle machine starts ops a few us after they are due; a
    /// busy one, tens), so lag beyond 1 ms means the tasks were busy with earlier ops (too
    /// few tasks or too little queue depth for the rate), or the machine's CPU was taken.
    pub const LATE_US: u64 = 1_000;

    /// Count one started op that began `lag_us` after it was due.
    pub fn started(&mut self, lag_us: u64) {
        self.started = self.started.saturating_add(1);
        self.lag_sum_us = self.lag_sum_us.saturating_add(lag_us);
        self.lag_max_us = self.lag_max_us.max(lag_us);
        self.lag_within.count(lag_us);
        if lag_us > Self::LATE_US {
            self.late = self.late.saturating_add(1);
        }
    }

    /// Fold another task's or worker's figures into these.
    pub fn merge(&mut self, o: &OpenLoop) {
        self.due = self.due.saturating_add(o.due);
        self.started = self.started.saturating_add(o.started);
        self.late = self.late.saturating_add(o.late);
        self.lag_sum_us = self.lag_sum_us.saturating_add(o.lag_sum_us);
        self.lag_max_us = self.lag_max_us.max(o.lag_max_us);
        self.lag_within.merge(&o.lag_within);
    }

    /// Operations that were due but never started.
    pub fn not_started(&self) -> u64 {
        self.due.saturating_sub(self.started)
    }

    /// Mean scheduling lag in milliseconds (0 when nothing started).
    pub fn lag_mean_ms(&self) -> f64 {
        if self.started == 0 {
            0.0
        } else {
            self.lag_sum_us as f64 / self.started as f64 / 1000.0
        }
    }
}

/// Open-loop operations by how soon after their due time they started: cumulative counts
/// (an op 5 us late counts in all three), which add up exactly across tasks and workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LagBands {
    /// Started at most 10 us after due.
    pub us10: u64,
    /// Started at most 100 us after due.
    pub us100: u64,
    /// Started at most 1 ms after due (the rest are `late`).
    pub ms1: u64,
}

impl LagBands {
    fn count(&mut self, lag_us: u64) {
        for (limit, n) in [
            (10, &mut self.us10),
            (100, &mut self.us100),
            (OpenLoop::LATE_US, &mut self.ms1),
        ] {
            if lag_us <= limit {
                *n = n.saturating_add(1);
            }
        }
    }

    fn merge(&mut self, o: &LagBands) {
        self.us10 = self.us10.saturating_add(o.us10);
        self.us100 = self.us100.saturating_add(o.us100);
        self.ms1 = self.ms1.saturating_add(o.ms1);
    }
}

/// Operations still running when a `duration` stage reached its deadline (stragglers: an op
/// stuck on a timeout, or simply the ops of every task in flight at that instant). They
/// count in `ops` (their latency is real, and a timeout belongs in the tail), but the stage
/// ends at its deadline: every rate is over the intended window, however long they ran on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    /// Operations in flight at the deadline.
    pub ops: u64,
    /// Sum of how long each had been running at the deadline, in microseconds.
    pub age_sum_us: u64,
    /// The longest any had been running at the deadline, in microseconds.
    pub age_max_us: u64,
    /// The longest any of them took in all (to its end after the deadline), in microseconds.
    #[serde(default)]
    pub latency_max_us: u64,
}

impl InFlight {
    /// Count one op that had run `age` at the deadline and `latency` in all.
    pub fn add_op(&mut self, age: std::time::Duration, latency: std::time::Duration) {
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.ops = self.ops.saturating_add(1);
        self.age_sum_us = self.age_sum_us.saturating_add(us(age));
        self.age_max_us = self.age_max_us.max(us(age));
        self.latency_max_us = self.latency_max_us.max(us(latency));
    }

    /// Fold another task's or worker's figures into these.
    pub fn merge(&mut self, o: &InFlight) {
        self.ops = self.ops.saturating_add(o.ops);
        self.age_sum_us = self.age_sum_us.saturating_add(o.age_sum_us);
        self.age_max_us = self.age_max_us.max(o.age_max_us);
        self.latency_max_us = self.latency_max_us.max(o.latency_max_us);
    }

    /// Mean age at the deadline, in milliseconds (0 when none).
    pub fn age_mean_ms(&self) -> f64 {
        if self.ops == 0 {
            0.0
        } else {
            self.age_sum_us as f64 / self.ops as f64 / 1000.0
        }
    }
}

/// The result of a run, or of several merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Format version of this document ([`SUMMARY_VERSION`]); readers refuse a version they
    /// do not know, naming it. Version 1 wrote it as `version` (read through
    /// [`crate::summary_read::read`], which upgrades it).
    #[serde(alias = "version")]
    #[schemars(range(min = 1))]
    pub schema_version: u32,
    /// The benchrun version that measured it (`0.1.0`). Once merged: the workers' version,
    /// or their distinct versions comma-separated when they differ. Absent in version-1
    /// summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    /// The workload as the engine ran it, every default filled in (the same keys as a
    /// workload file, `benchrun-worker schema`). Once merged: the run's workload when the
    /// workers all ran the same one (a cluster worker's own dataset sub-prefix
    /// `<prefix><worker>/` taken off), absent when they differ. Absent in version-1 summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// The workload's target URI.
    pub target: String,
    /// Workers merged into this summary (1 for a single run).
    pub workers: u32,
    /// Worker ids merged into this summary.
    #[serde(default)]
    pub worker_ids: Vec<String>,
    /// Wall-clock start of the measured stage (the earliest, once merged), RFC 3339 UTC.
    #[schemars(with = "String", extend("format" = "date-time"))]
    pub started_at: DateTime<Utc>,
    /// Length of the measured stage in seconds, the window every rate is over: its
    /// `duration` when it ran to its deadline (ops still in flight then, counted in
    /// `inFlightAtDeadline`, do not stretch it), else from its start until its last op
    /// finished (`totalOps`, a stop); the longest, once merged.
    pub elapsed_seconds: f64,
    /// Why the measured stage ended: `duration`, `totalOps`, `stable: ...` (`stopWhenStable`,
    /// see `stable`), `errorBudget: ...`, `interrupted`.
    pub stopped_by: String,
    /// Wall-clock end of the measured stage (`startedAt` + `elapsedSeconds`), RFC 3339 UTC;
    /// the latest, once merged. Absent in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>", extend("format" = "date-time"))]
    pub stopped_at: Option<DateTime<Utc>>,
    /// When `stopWhenStable` ended the stage: who found it steady (the worker alone, or the
    /// run from all workers' merged throughput), when, and the window's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable: Option<crate::stable::StableDecision>,
    /// Per-operation statistics.
    pub ops: BTreeMap<OpKind, OpStats>,
    /// Figures derived from `ops`, recomputed whenever the summary changes.
    pub report: BTreeMap<OpKind, OpReport>,
    /// All operations together over time: the warm-up's seconds first (marked `warmup`),
    /// then the measured stage's, a second each for the first hour and coarser after (see
    /// [`crate::timeline`]).
    pub timeline: Vec<Second>,
    /// CPU and page faults during the measured stage (summed over workers).
    pub process: ProcessStats,
    /// Client CPU use in percent of one core over the measured stage (all workers together:
    /// 250 is two and a half cores), derived from `process` and `elapsedSeconds` whenever
    /// the summary changes; absent when nothing was measured (and in older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// The prepare stage, when it wrote or listed the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<StageStats>,
    /// The pre-stat of the dataset (`rangeEngine.preStat`), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stat: Option<StageStats>,
    /// Getting the measured stage ready (tasks' threads started and parked, per-shard clients
    /// built and a connection opened per task of an object target by a one-key listing),
    /// done before the start instant so none of it is measured; its `seconds` say how long
    /// it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<StageStats>,
    /// The warm-up (`warmup`), when the workload has one: its operations' figures, apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
    /// How reads picked the dataset's objects (`dataset.access`), e.g. `zipf (exponent
    /// 0.99)`, when the workload reads objects (absent in older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
    /// The cleanup stage, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<StageStats>,
    /// The measured stage was stopped from outside (a signal, a shutdown request) before its
    /// duration or op count: the figures cover only what ran. True once merged if any part is.
    #[serde(default)]
    pub partial: bool,
    /// With `rateLimit`: the offered load against what started, and the scheduling lag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// A `duration` stage: the operations still running at its deadline, and how long they
    /// had been running then (absent when none were, and in older summaries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_at_deadline: Option<InFlight>,
    /// Object targets: TCP connections established during the measured stage (summed over
    /// workers). The setup opens one per task and 2 spares per shard before the start
    /// instant, so each one here is a connection (TCP, and TLS for `https://`) set up inside
    /// the measured window: a server that closed idle connections, an op that failed and
    /// dropped its connection, or the client's pool opening one beyond those. Absent for
    /// local targets and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
    /// Block workloads: the I/O engine, queue depth and page-cache residency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<crate::volume::VolumeStats>,
    /// With `storage.endpoints`: the measured stage's operations per endpoint URL (all ops
    /// together: count, errors, requests, bytes, latency), merged exactly like `ops`. Their
    /// counts add up to the ops' counts. Empty (absent) with one endpoint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, OpStats>,
    /// Certificates of `https://` endpoints were not verified (`storage.tls.insecureSkipVerify`):
    /// anyone on the path could have answered. True once merged if any worker skipped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls_verification_skipped: bool,
    /// With `run --oplog`: the operations written to the op-log, and those lost (the
    /// writer fell behind), so a log that misses records says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oplog: Option<OplogStats>,
    /// Per op, its successful operations of the measured stage by payload size
    /// (power-of-two buckets, see [`crate::size_buckets`]), when the workload's sizes vary;
    /// empty otherwise and in older summaries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sizes: BTreeMap<OpKind, crate::size_buckets::SizeBuckets>,
    /// Training workloads (`training`): AU, samples and bytes per epoch, data-wait times
    /// (docs/TRAINING.md); absent otherwise and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<crate::training::TrainingStats>,
    /// Checkpoint workloads (`checkpoint`): every rank's save and restore per repeat
    /// (docs/TRAINING.md); absent otherwise and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<crate::checkpoint::CheckpointStats>,
}

/// What `run --oplog` recorded: every op of the run is either written or counted as dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OplogStats {
    /// Records written (warm-up ops included).
    pub records: u64,
    /// Records lost because the writer's queue was full or the writer had failed.
    pub dropped: u64,
    /// In a cluster (`BenchmarkRun.spec.oplog`): the object this worker's log was uploaded
    /// to, `<spec.oplog.uri><namespace>/<run>/<run UID>/<worker>.oplog.gz`. Absent standalone (the log is the
    /// local `--oplog` file), in a merged summary and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// In a cluster: why the upload of this worker's log failed. The measurement is still
    /// the worker's result; only the log is missing (`uri` is then absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_error: Option<String>,
}

impl OplogStats {
    /// Fold another worker's figures into these. Where each log is stays per worker: a
    /// merged summary names no `uri`.
    pub fn merge(&mut self, o: &OplogStats) {
        self.records = self.records.saturating_add(o.records);
        self.dropped = self.dropped.saturating_add(o.dropped);
    }
}

impl Default for Summary {
    /// A summary in this build's format with nothing measured: what a summary built field by
    /// field starts from (`Summary { ops, ..Default::default() }`).
    fn default() -> Self {
        Summary {
            schema_version: SUMMARY_VERSION,
            tool_version: Some(TOOL_VERSION.to_string()),
            workload: None,
            target: String::new(),
            workers: 0,
            worker_ids: Vec::new(),
            started_at: DateTime::<Utc>::default(),
            elapsed_seconds: 0.0,
            stopped_by: String::new(),
            stopped_at: None,
            stable: None,
            ops: BTreeMap::new(),
            report: BTreeMap::new(),
            timeline: Vec::new(),
            process: ProcessStats::default(),
            cpu_percent: None,
            prepare: None,
            pre_stat: None,
            setup: None,
            warmup: None,
            access: None,
            cleanup: None,
            partial: false,
            open_loop: None,
            in_flight_at_deadline: None,
            connections_opened: None,
            volume: None,
            training: None,
            checkpoint: None,
            endpoints: BTreeMap::new(),
            tls_verification_skipped: false,
            oplog: None,
            sizes: BTreeMap::new(),
        }
    }
}

/// The format version of the summaries this build writes. It reads this one and every older
/// one down to [`OLDEST_SUMMARY_VERSION`] ([`crate::summary_read`]); see docs/RESULTS.md for
/// what changed between versions.
///
/// 2: `version` renamed `schemaVersion`; `toolVersion` and `workload` added.
pub const SUMMARY_VERSION: u32 = 2;

/// The oldest summary format this build still reads.
pub const OLDEST_SUMMARY_VERSION: u32 = 1;

/// The version of benchrun this build is, written into every summary it measures.
pub const TOOL_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Why summaries could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// No summary was given.
    #[error("nothing to merge")]
    Empty,
    /// A summary of another format version.
    #[error("summary schemaVersion {0} cannot be merged: benchrun {TOOL_VERSION} merges schemaVersion {SUMMARY_VERSION} (read older ones with `summary_read::read`, which upgrades them)")]
    Version(u32),
    /// A part that started so long after the earliest that its timeline, aligned on the
    /// wall clock, would run past the longest run: not the same run's workers.
    #[error("summary of {worker} started {seconds} s after the earliest part, more than the longest run ({MAX_TIMELINE_SECONDS} s): not workers of one run")]
    StartSkew {
        /// The summary's worker ids.
        worker: String,
        /// Its start after the earliest, in seconds.
        seconds: u64,
    },
    /// A timeline second past the longest possible run (a forged or corrupt summary).
    #[error("summary of {worker}: timeline second {second} is past the longest run ({MAX_TIMELINE_SECONDS} s)")]
    Timeline {
        /// The summary's worker ids.
        worker: String,
        /// The second found.
        second: u64,
    },
}

/// The last timeline second a summary may have: the longest `duration` plus a day (a
/// `totalOps` run has no duration, but one so long is refused too). A forged second past it
/// is refused rather than merged.
pub const MAX_TIMELINE_SECONDS: u64 = crate::spec::limits::MAX_DURATION_SECS + 24 * 3600;

impl Summary {
    /// Recompute `report` from the histograms.
    pub fn refresh(&mut self) {
        self.report = self
            .ops
            .iter()
            .map(|(k, v)| (*k, v.report(self.elapsed_seconds)))
            .collect();
        if let Some(w) = &mut self.warmup {
            w.refresh();
        }
        self.cpu_percent = self.cpu_percent_of_a_core();
    }

    /// Client CPU seconds (user + system, all workers) over the measured stage's length, in
    /// percent of one core; `None` without a measured stage or without CPU time. One
    /// definition for the summary, the tables, `compare` and the reports.
    pub fn cpu_percent_of_a_core(&self) -> Option<f64> {
        let cpu = self.process.cpu_user_seconds + self.process.cpu_system_seconds;
        (self.elapsed_seconds > 0.0 && cpu > 0.0).then(|| 100.0 * cpu / self.elapsed_seconds)
    }

    /// Client CPU seconds (user + system, all workers) per GiB moved by every op; `None`
    /// when nothing moved. One definition for the tables, the reports and the operator.
    pub fn cpu_seconds_per_gib(&self) -> Option<f64> {
        let gib = self.total().bytes as f64 / (1u64 << 30) as f64;
        let cpu = self.process.cpu_user_seconds + self.process.cpu_system_seconds;
        (gib > 0.0).then(|| cpu / gib)
    }

    /// All ops together.
    pub fn total(&self) -> OpStats {
        let mut t = OpStats::default();
        for s in self.ops.values() {
            t.merge(s);
        }
        t
    }

    /// Merge summaries exactly: counts add, histograms add, timelines add second by second.
    pub fn merge(parts: &[Summary]) -> Result<Summary, MergeError> {
        let first = parts.first().ok_or(MergeError::Empty)?;
        if let Some(p) = parts.iter().find(|p| p.schema_version != SUMMARY_VERSION) {
            return Err(MergeError::Version(p.schema_version));
        }
        let mut out = Summary {
            tool_version: merged_tool_version(parts),
            workload: merged_workload(parts),
            target: first.target.clone(),
            workers: 0,
            started_at: first.started_at,
            elapsed_seconds: 0.0,
            stopped_by: first.stopped_by.clone(),
            access: first.access.clone(),
            ..Default::default()
        };
        for p in parts {
            if let Some(s) = p.timeline.iter().find(|s| s.second > MAX_TIMELINE_SECONDS) {
                return Err(MergeError::Timeline {
                    worker: crate::quote::clip(&p.worker_ids.join(",")).into_owned(),
                    second: s.second,
                });
            }
        }
        for p in parts {
            out.partial |= p.partial;
            out.workers = out.workers.saturating_add(p.workers);
            out.worker_ids.extend(p.worker_ids.iter().cloned());
            out.started_at = out.started_at.min(p.started_at);
            out.elapsed_seconds = out.elapsed_seconds.max(p.elapsed_seconds);
            if p.stopped_by != out.stopped_by && !out.stopped_by.contains(&p.stopped_by) {
                out.stopped_by = format!("{}; {}", out.stopped_by, p.stopped_by);
            }
            out.stopped_at = out.stopped_at.max(p.stopped_at);
            // Workers a run stopped together carry the run's one decision; else the first.
            if out.stable.is_none() {
                out.stable = p.stable.clone();
            }
            for (k, v) in &p.ops {
                out.ops.entry(*k).or_default().merge(v);
            }
            for (k, v) in &p.endpoints {
                out.endpoints.entry(k.clone()).or_default().merge(v);
            }
            out.tls_verification_skipped |= p.tls_verification_skipped;
            out.connections_opened = add_counted(out.connections_opened, p.connections_opened);
            if let Some(w) = &p.warmup {
                out.warmup.get_or_insert_with(Warmup::default).merge(w);
            }
            out.process.merge(&p.process);
            if let Some(o) = &p.open_loop {
                out.open_loop.get_or_insert_with(OpenLoop::default).merge(o);
            }
            if let Some(f) = &p.in_flight_at_deadline {
                out.in_flight_at_deadline
                    .get_or_insert_with(InFlight::default)
                    .merge(f);
            }
            if let Some(v) = &p.volume {
                out.volume.get_or_insert_with(Default::default).merge(v);
            }
            if let Some(t) = &p.training {
                out.training.get_or_insert_with(Default::default).merge(t);
            }
            if let Some(c) = &p.checkpoint {
                out.checkpoint.get_or_insert_with(Default::default).merge(c);
            }
            if let Some(o) = &p.oplog {
                out.oplog.get_or_insert_with(Default::default).merge(o);
            }
            for (op, b) in &p.sizes {
                crate::size_buckets::merge(out.sizes.entry(*op).or_default(), b);
            }
            for (mine, theirs) in [
                (&mut out.prepare, &p.prepare),
                (&mut out.pre_stat, &p.pre_stat),
                (&mut out.setup, &p.setup),
                (&mut out.cleanup, &p.cleanup),
            ] {
                if let Some(t) = theirs {
                    mine.get_or_insert_with(StageStats::default).merge(t);
                }
            }
        }
        // Entry by entry at the resolution of `timeline::TIERS`: bounded however long the
        // run, and exact (counts add).
        // Each worker's seconds count from its own start: aligned on the wall clock by
        // `startedAt` (to the nearest second), so a worker that started late has its
        // seconds where they happened.
        let mut shifted = Vec::with_capacity(parts.len());
        for p in parts {
            let skew_ms = (p.started_at - out.started_at).num_milliseconds().max(0) as u64;
            let shift = (skew_ms + 500) / 1000;
            if shift > MAX_TIMELINE_SECONDS {
                return Err(MergeError::StartSkew {
                    worker: crate::quote::clip(&p.worker_ids.join(",")).into_owned(),
                    seconds: shift,
                });
            }
            shifted.push(shift);
        }
        out.timeline = crate::timeline::merge_shifted(
            parts
                .iter()
                .zip(shifted)
                .flat_map(|(p, shift)| p.timeline.iter().map(move |s| (shift, s))),
        );
        out.refresh();
        Ok(out)
    }
}

/// The workload the parts ran, when they all ran the same one. Workers of a cluster run each
/// prepare their own dataset under `<prefix><worker id>/` (the agent does), so a one-worker
/// part's workload is compared without that sub-prefix: the merged workload is the run's.
fn merged_workload(parts: &[Summary]) -> Option<Workload> {
    let run_workload = |p: &Summary| {
        let mut w = p.workload.clone()?;
        if let [id] = p.worker_ids.as_slice() {
            if w.dataset.prepare {
                if let Some(base) = w.dataset.prefix.strip_suffix(&format!("{id}/")) {
                    w.dataset.prefix = base.to_string();
                }
            }
        }
        Some(w)
    };
    let first = run_workload(parts.first()?)?;
    parts[1..]
        .iter()
        .all(|p| run_workload(p).as_ref() == Some(&first))
        .then_some(first)
}

/// The workers' benchrun version, or their distinct versions comma-separated (sorted) when
/// they differ; `None` when no part says (version-1 summaries).
fn merged_tool_version(parts: &[Summary]) -> Option<String> {
    let versions: std::collections::BTreeSet<&str> = parts
        .iter()
        .filter_map(|p| p.tool_version.as_deref())
        .collect();
    (!versions.is_empty()).then(|| versions.into_iter().collect::<Vec<_>>().join(", "))
}

// Here, not in `training_search`: a probe is judged from a summary, and the search's types
// are part of one (`Summary.training.search`), so the two modules would import each other.
impl crate::training_search::SearchProbe {
    /// A probe of `n` accelerators per worker, from its (merged) summary, judged by `mark`.
    pub fn of(n: u32, s: &Summary, mark: f64) -> Self {
        let t = s.training.as_ref();
        let total = t.map(|t| t.total()).unwrap_or_default();
        let complete =
            t.is_some_and(|t| !t.epochs.is_empty() && t.epochs.iter().all(|e| e.complete));
        let min = t.map_or(0.0, |t| t.min_au());
        Self {
            accelerators: n,
            au_mean_percent: total.au.mean_au_percent(),
            au_min_percent: min,
            samples_per_sec: total.samples_per_sec(),
            mib_per_sec: total.mib_per_sec(),
            complete,
            // An unfinished probe (a signal, `duration`) proves nothing: it does not pass.
            passed: complete && min >= mark,
            seconds: total.elapsed_us as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A standalone summary's `oplog` (no `uri`) still reads, a worker's names its object,
    /// and a merged one names none: each log stays the worker's own.
    #[test]
    fn oplog_uri_is_optional_and_per_worker() {
        let old: OplogStats =
            serde_json::from_str(r#"{"records": 5, "dropped": 1}"#).expect("old oplog");
        assert_eq!(
            (old.records, old.dropped, &old.uri, &old.upload_error),
            (5, 1, &None, &None)
        );
        let w = OplogStats {
            records: 3,
            dropped: 0,
            uri: Some("s3://b/logs/run/w0.oplog.gz".into()),
            upload_error: None,
        };
        let text = serde_json::to_string(&w).expect("json");
        assert_eq!(
            text,
            r#"{"records":3,"dropped":0,"uri":"s3://b/logs/run/w0.oplog.gz"}"#
        );
        let mut merged = OplogStats::default();
        merged.merge(&w);
        merged.merge(&old);
        assert_eq!((merged.records, merged.dropped, merged.uri), (8, 1, None));
    }
    use rand::{Rng, SeedableRng};
    use std::time::Duration;

    #[test]
    fn open_loop_figures_add_up_across_workers() {
        let mut a = summary("a", &[10]);
        let mut b = summary("b", &[20]);
        let mut ol = OpenLoop::default();
        for lag in [0, 500, 3_000] {
            ol.started(lag);
        }
        ol.due = 5;
        a.open_loop = Some(ol.clone());
        ol.lag_max_us = 9_000;
        b.open_loop = Some(ol);
        let closed = summary("c", &[30]);
        let m = Summary::merge(&[a, b, closed]).unwrap();
        let o = m.open_loop.expect("kept when any worker ran open loop");
        assert_eq!((o.due, o.started, o.late, o.not_started()), (10, 6, 2, 4));
        assert_eq!((o.lag_sum_us, o.lag_max_us), (7_000, 9_000));
        // 0 and 500 us within 1 ms, 0 within 10 and 100 us; 3 ms late: twice over.
        assert_eq!(
            o.lag_within,
            LagBands {
                us10: 2,
                us100: 2,
                ms1: 4
            }
        );
        assert!((o.lag_mean_ms() - 7.0 / 6.0).abs() < 1e-9);
        let none = Summary::merge(&[summary("d", &[1])]).unwrap();
        assert!(none.open_loop.is_none());
    }

    #[test]
    fn connections_opened_add_up_and_stay_absent_where_none_counted() {
        let mut a = summary("a", &[1]);
        a.connections_opened = Some(2);
        a.setup = Some(StageStats {
            connections_opened: Some(8),
            ..Default::default()
        });
        let mut b = summary("b", &[1]);
        b.connections_opened = Some(0);
        b.setup = Some(StageStats {
            connections_opened: Some(8),
            ..Default::default()
        });
        let m = Summary::merge(&[a, b]).unwrap();
        assert_eq!(m.connections_opened, Some(2));
        assert_eq!(m.setup.unwrap().connections_opened, Some(16));
        // A local target counts nothing: absent, not 0, once merged too.
        let none = Summary::merge(&[summary("c", &[1]), summary("d", &[1])]).unwrap();
        assert_eq!(none.connections_opened, None);
    }

    #[test]
    fn per_endpoint_figures_merge_exactly_and_tls_skips_stay_visible() {
        let ep = |count: u64, errors: u64, us: &[u64]| {
            let mut s = OpStats {
                count,
                errors,
                requests: count,
                ..Default::default()
            };
            for &u in us {
                s.latency.record(Duration::from_micros(u));
            }
            s
        };
        let mut a = summary("a", &[10]);
        a.endpoints = [
            ("https://a".to_string(), ep(3, 1, &[100, 200])),
            ("https://b".to_string(), ep(2, 0, &[300, 400])),
        ]
        .into();
        let mut b = summary("b", &[20]);
        b.endpoints = [("https://b".to_string(), ep(5, 2, &[500, 600, 700]))].into();
        b.tls_verification_skipped = true;
        let m = Summary::merge(&[a, b]).unwrap();
        assert!(m.tls_verification_skipped);
        let (ea, eb) = (&m.endpoints["https://a"], &m.endpoints["https://b"]);
        assert_eq!((ea.count, ea.errors, ea.requests), (3, 1, 3));
        assert_eq!((eb.count, eb.errors, eb.requests), (7, 2, 7));
        assert_eq!(eb.latency.count(), 5);
        assert_eq!(eb.latency.0.max(), 700);
        // Round trip: absent when empty, kept when set.
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"tlsVerificationSkipped\":true"), "{text}");
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.endpoints, m.endpoints);
        let plain = serde_json::to_string(&summary("c", &[1])).unwrap();
        assert!(!plain.contains("endpoints") && !plain.contains("tlsVerification"));
    }

    fn summary(id: &str, samples: &[u64]) -> Summary {
        let mut get = OpStats::default();
        for &us in samples {
            get.count += 1;
            get.bytes += 100;
            get.latency.record(Duration::from_micros(us));
        }
        let mut s = Summary {
            target: "file:///x".into(),
            workers: 1,
            worker_ids: vec![id.into()],
            started_at: Utc::now(),
            elapsed_seconds: 2.0,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            timeline: vec![Second {
                second: 0,
                ops: samples.len() as u64,
                bytes: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        s.refresh();
        s
    }

    #[test]
    fn merged_percentiles_equal_one_histogram_of_all_samples() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        // Two workers with very different latency: averaging their p99s would be far off.
        let fast: Vec<u64> = (0..10_000).map(|_| rng.random_range(100..200)).collect();
        let slow: Vec<u64> = (0..1_000)
            .map(|_| rng.random_range(50_000..90_000))
            .collect();
        let (a, b) = (summary("a", &fast), summary("b", &slow));
        // Through JSON, as workers hand them over.
        let a: Summary = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        let b: Summary = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
        let merged = Summary::merge(&[a.clone(), b.clone()]).unwrap();

        let all: Vec<u64> = fast.iter().chain(&slow).copied().collect();
        let one = summary("all", &all);
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                merged.ops[&OpKind::Get].latency.quantile_us(q),
                one.ops[&OpKind::Get].latency.quantile_us(q),
                "quantile {q}"
            );
        }
        assert_eq!(merged.report[&OpKind::Get], one.report[&OpKind::Get]);
        let avg_p99 = (a.report[&OpKind::Get].p99_ms + b.report[&OpKind::Get].p99_ms) / 2.0;
        assert!(
            (merged.report[&OpKind::Get].p99_ms - avg_p99).abs() > 1.0,
            "not an average"
        );
        assert_eq!(merged.workers, 2);
        assert_eq!(merged.ops[&OpKind::Get].count, 11_000);
        assert_eq!(merged.timeline[0].ops, 11_000);
    }

    #[test]
    fn a_merge_keeps_the_runs_workload_and_the_tool_versions() {
        let run = |prefix: &str| {
            Workload::from_yaml(&format!(
                "target: s3://b/p\nduration: 1s\nops: [{{op: get}}]\ndataset: {{prefix: '{prefix}'}}\n"
            ))
            .unwrap()
        };
        let (mut a, mut b) = (summary("w0", &[1]), summary("w1", &[2]));
        // As the agent runs them: each worker under its own sub-prefix.
        a.workload = Some(run("bench/w0/"));
        b.workload = Some(run("bench/w1/"));
        let m = Summary::merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.workload, Some(run("bench/")));
        assert_eq!(m.tool_version.as_deref(), Some(TOOL_VERSION));
        // Merged again (with a third worker), still the run's workload.
        let mut c = summary("w2", &[3]);
        c.workload = Some(run("bench/w2/"));
        let again = Summary::merge(&[m, c]).unwrap();
        assert_eq!(again.workload, Some(run("bench/")));
        // Another workload, or one part without any: absent, not one of them.
        b.workload = Some(run("other/w1/"));
        assert_eq!(
            Summary::merge(&[a.clone(), b.clone()]).unwrap().workload,
            None
        );
        b.workload = None;
        assert_eq!(
            Summary::merge(&[a.clone(), b.clone()]).unwrap().workload,
            None
        );
        // Different tool versions are all named.
        b.tool_version = Some("0.0.9".into());
        let m = Summary::merge(&[a, b]).unwrap();
        assert_eq!(m.tool_version, Some(format!("0.0.9, {TOOL_VERSION}")));
    }

    #[test]
    fn cpu_percent_is_cpu_seconds_over_the_measured_stage() {
        let mut a = summary("a", &[10]);
        assert_eq!(a.cpu_percent, None, "no CPU time: no figure, not 0");
        a.process.cpu_user_seconds = 0.75;
        a.process.cpu_system_seconds = 0.25;
        a.refresh();
        // 1 CPU second over a 2 s stage: half a core.
        assert_eq!(a.cpu_percent, Some(50.0));
        let mut b = summary("b", &[10]);
        b.process.cpu_user_seconds = 3.0;
        b.elapsed_seconds = 1.5;
        // Merged: CPU adds over workers, over the longest stage (2 s): 4 s / 2 s = 2 cores.
        let m = Summary::merge(&[a.clone(), b]).unwrap();
        assert_eq!(m.cpu_percent, Some(200.0));
        // Read back from JSON, and absent from an older summary without the field.
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["cpuPercent"], 50.0);
        let mut old = json.clone();
        old.as_object_mut().unwrap().remove("cpuPercent");
        let old: Summary = serde_json::from_value(old).unwrap();
        assert_eq!(old.cpu_percent, None);
        assert_eq!(old.cpu_percent_of_a_core(), Some(50.0));
        a.elapsed_seconds = 0.0;
        assert_eq!(a.cpu_percent_of_a_core(), None);
    }

    #[test]
    fn per_size_buckets_merge_exactly_and_old_summaries_have_none() {
        use crate::size_buckets::record;
        let (mut a, mut b, mut one) = (summary("a", &[1]), summary("b", &[1]), summary("c", &[1]));
        for (i, size) in [4096u64, 65536, 65536, 1 << 20, 4096, 5000]
            .iter()
            .enumerate()
        {
            let us = Duration::from_micros(100 * (i as u64 + 1));
            let s = if i % 2 == 0 { &mut a } else { &mut b };
            record(s.sizes.entry(OpKind::Get).or_default(), *size, 1, us);
            record(one.sizes.entry(OpKind::Get).or_default(), *size, 1, us);
        }
        let a: Summary = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        let m = Summary::merge(&[a, b]).unwrap();
        assert_eq!(m.sizes, one.sizes);
        let get = &m.sizes[&OpKind::Get];
        assert_eq!(get.values().map(|b| b.count).sum::<u64>(), 6);
        assert_eq!(get[&4096].bytes, 4096 * 2 + 5000);
        assert_eq!(get[&4096].op_stats().report(1.0).count, 3);
        let old = serde_json::to_value(summary("d", &[1])).unwrap();
        assert!(old.get("sizes").is_none(), "not written when empty");
        let back: Summary = serde_json::from_value(old).unwrap();
        assert!(back.sizes.is_empty());
    }

    #[test]
    fn merged_timelines_are_aligned_by_started_at() {
        let t0 = Utc::now();
        let mut a = summary("a", &[10, 10]);
        a.started_at = t0;
        a.timeline = (0..3)
            .map(|second| Second {
                second,
                ops: 100,
                ..Default::default()
            })
            .collect();
        // b started 3.2 s later: its second 0 happened in a's second 3.
        let mut b = a.clone();
        b.worker_ids = vec!["b".into()];
        b.started_at = t0 + chrono::Duration::milliseconds(3_200);
        for s in &mut b.timeline {
            s.ops = 1;
        }
        let m = Summary::merge(&[b.clone(), a.clone()]).unwrap();
        assert_eq!(m.started_at, t0);
        let ops: Vec<(u64, u64)> = m.timeline.iter().map(|s| (s.second, s.ops)).collect();
        assert_eq!(ops, [(0, 100), (1, 100), (2, 100), (3, 1), (4, 1), (5, 1)]);
        // A part of another day is not a worker of this run.
        b.started_at = t0 + chrono::Duration::days(40);
        let e = Summary::merge(&[a, b]).unwrap_err().to_string();
        assert!(e.contains("not workers of one run"), "{e}");
    }

    #[test]
    fn failed_ops_latency_merges_exactly_into_the_all_ops_figures() {
        let (mut a, mut b) = (summary("a", &[100; 98]), summary("b", &[100; 1]));
        // a: 2 timeouts at 30 s; b: one not_found at 2 ms.
        let fail = |s: &mut Summary, kind: &str, us: u64, n: u64| {
            let g = s.ops.get_mut(&OpKind::Get).unwrap();
            for _ in 0..n {
                g.count += 1;
                g.errors += 1;
                *g.errors_by_kind.entry(kind.into()).or_default() += 1;
                g.failed_latency
                    .entry(kind.into())
                    .or_default()
                    .record(Duration::from_micros(us));
            }
        };
        fail(&mut a, "timeout", 30_000_000, 2);
        fail(&mut b, "not_found", 2_000, 1);
        let a: Summary = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        let m = Summary::merge(&[a, b]).unwrap();
        let r = &m.report[&OpKind::Get];
        // Successful ops only: 100 us everywhere; all 102 ops: the two timeouts are the top 2%.
        assert_eq!((r.p99_ms, r.max_ms), (0.1, 0.1));
        let all_p99 = r.all_p99_ms.expect("failed ops recorded");
        assert!((29_000.0..31_000.0).contains(&all_p99), "{all_p99}");
        assert_eq!(r.all_p50_ms, Some(0.1));
        let g = &m.ops[&OpKind::Get];
        assert_eq!(g.failed_latency["timeout"].count(), 2);
        assert_eq!(g.failed_latency["not_found"].count(), 1);
        assert_eq!(g.all_latency().unwrap().count(), 102);
        // Nothing failed: no all-ops figures (they would equal the successful ones).
        let ok = summary("c", &[5]);
        assert_eq!(ok.report[&OpKind::Get].all_p99_ms, None);
        assert!(!serde_json::to_string(&ok)
            .unwrap()
            .contains("failedLatency"));
    }

    #[test]
    fn ops_in_flight_at_the_deadline_merge_over_workers() {
        let (mut a, mut b) = (summary("a", &[1]), summary("b", &[1]));
        let mut f = InFlight::default();
        f.add_op(Duration::from_millis(900), Duration::from_secs(30));
        f.add_op(Duration::from_millis(100), Duration::from_millis(150));
        a.in_flight_at_deadline = Some(f);
        let mut g = InFlight::default();
        g.add_op(Duration::from_millis(2), Duration::from_millis(3));
        b.in_flight_at_deadline = Some(g);
        let m = Summary::merge(&[a, b, summary("c", &[1])]).unwrap();
        let f = m
            .in_flight_at_deadline
            .expect("kept when any worker had some");
        assert_eq!(
            (f.ops, f.age_max_us, f.latency_max_us),
            (3, 900_000, 30_000_000)
        );
        assert_eq!(f.age_mean_ms(), 334.0);
        let none = Summary::merge(&[summary("d", &[1])]).unwrap();
        assert!(none.in_flight_at_deadline.is_none());
    }

    #[test]
    fn merge_rejects_empty_and_unknown_versions() {
        assert!(matches!(Summary::merge(&[]), Err(MergeError::Empty)));
        let mut s = summary("a", &[1]);
        s.schema_version = 99;
        assert!(Summary::merge(&[s])
            .unwrap_err()
            .to_string()
            .contains("schemaVersion 99"));
    }

    #[test]
    fn a_forged_timeline_or_count_cannot_blow_up_a_merge() {
        let mut bad = summary("w1", &[100]);
        bad.timeline[0].second = u64::MAX;
        let e = Summary::merge(&[summary("w0", &[100]), bad]).unwrap_err();
        assert!(
            e.to_string()
                .contains("timeline second 18446744073709551615"),
            "{e}"
        );
        let mut big = summary("w1", &[100]);
        big.ops.get_mut(&OpKind::Get).unwrap().count = u64::MAX;
        big.timeline[0].ops = u64::MAX;
        let m = Summary::merge(&[summary("w0", &[100]), big]).unwrap();
        assert_eq!(m.ops[&OpKind::Get].count, u64::MAX, "saturates");
        assert_eq!(m.timeline[0].ops, u64::MAX);
    }
}
