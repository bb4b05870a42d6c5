//! Statistics: per-op HDR histograms, counters, a per-second timeline, and the summary that
//! carries them.
//!
//! Summaries serialize their histograms, so summaries from many workers merge *exactly*:
//! the merged p99 is the p99 of all samples, never an average of per-worker p99s.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use hdrhistogram::serialization::{Deserializer as HdrDe, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::spec::{OpKind, Workload};

/// Highest latency tracked: one hour, in microseconds.
const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits, serialized as base64 of the
/// HdrHistogram V2 compressed format (readable by every HdrHistogram implementation).
#[derive(Clone, Debug)]
pub struct Latency(pub Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Self(Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds"))
    }
}

impl PartialEq for Latency {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Latency {
    /// Memory of one histogram's counts (fixed by its bounds and precision).
    pub fn bytes() -> u64 {
        static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        *BYTES.get_or_init(|| {
            (Latency::default().0.distinct_values() * std::mem::size_of::<u64>()) as u64
        })
    }

    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(1, MAX_US);
        // saturating_record cannot fail: the value is clamped to the bounds.
        self.0.saturating_record(us);
    }

    pub fn add(&mut self, other: &Latency) {
        // Same bounds on both sides, so `add` cannot fail; fall back to sample-by-sample.
        if self.0.add(&other.0).is_err() {
            for v in other.0.iter_recorded() {
                self.0
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
    }

    /// The value at quantile `q` (0..=1), in microseconds.
    pub fn quantile_us(&self, q: f64) -> u64 {
        self.0.value_at_quantile(q)
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }
}

/// The ops of `w`'s mix (weight above 0): a task keeps a histogram for these only.
pub fn mix_ops(w: &Workload) -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .filter(|op| w.weight_of(*op) > 0)
        .collect()
}

/// Histogram memory of one task running `w`: one per op of the mix, plus GET's TTFB. Here and
/// not in the worker's recorder because [`Workload::validate`] bounds it (`concurrency` x this
/// at most [`MAX_HISTOGRAM_BYTES`](crate::spec::limits::MAX_HISTOGRAM_BYTES)).
pub fn histogram_bytes_per_task(w: &Workload) -> u64 {
    let ops = mix_ops(w);
    let n = ops.len() as u64 + ops.contains(&OpKind::Get) as u64;
    n * Latency::bytes()
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut out)
            .map_err(|e| serde::ser::Error::custom(format!("histogram: {e:?}")))?;
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(out))
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let s = String::deserialize(d)?;
        if s.len() > MAX_HISTOGRAM_TEXT {
            return Err(D::Error::custom(format!(
                "histogram is {} bytes of text, more than the {MAX_HISTOGRAM_TEXT} a histogram of this tool takes",
                s.len()
            )));
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map_err(|e| D::Error::custom(format!("histogram is not base64: {e}")))?;
        let v2 = checked_v2(&raw).map_err(|e| D::Error::custom(format!("histogram: {e}")))?;
        let h: Histogram<u64> = HdrDe::new()
            .deserialize(&mut v2.as_slice())
            .map_err(|e| D::Error::custom(format!("histogram is not HdrHistogram V2: {e:?}")))?;
        let mut l = Latency::default();
        l.add(&Latency(h));
        Ok(l)
    }
}

/// Longest base64 text of a histogram accepted in a summary. A full histogram of this tool
/// (every one of its ~24,000 buckets used) compresses to well under this.
const MAX_HISTOGRAM_TEXT: usize = 1 << 20;
/// Largest decompressed histogram accepted: the V2 header plus at most 9 bytes per bucket.
const MAX_HISTOGRAM_V2: u64 = 1 << 20;

/// The plain HdrHistogram V2 bytes of a V2 (compressed or not) histogram, after checking what
/// its header would make a decoder allocate: the decompressed size is bounded, the payload
/// length must match what is there, and the bounds and precision must be this tool's own or
/// narrower (HdrHistogram sizes its counts from them, and a forged header would otherwise
/// allocate gigabytes from a few bytes).
fn checked_v2(raw: &[u8]) -> Result<Vec<u8>, String> {
    use std::io::Read;
    const V2: u32 = 0x1c84_9313;
    const V2_COMPRESSED: u32 = 0x1c84_9314;
    let be32 = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let be64 = |b: &[u8], at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let v2 = match be32(raw, 0) {
        Some(V2) => raw.to_vec(),
        Some(V2_COMPRESSED) => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(raw.get(8..).unwrap_or_default())
                .take(MAX_HISTOGRAM_V2 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("not zlib data: {e}"))?;
            out
        }
        _ => return Err("not HdrHistogram V2 (unknown cookie)".into()),
    };
    if v2.len() as u64 > MAX_HISTOGRAM_V2 {
        return Err(format!("more than {MAX_HISTOGRAM_V2} bytes decompressed"));
    }
    let header = 40;
    let bad = || "truncated V2 header".to_string();
    if be32(&v2, 0) != Some(V2) {
        return Err("not HdrHistogram V2 (bad inner cookie)".into());
    }
    let payload = be32(&v2, 4).ok_or_else(bad)? as usize;
    let digits = be32(&v2, 12).ok_or_else(bad)?;
    let low = be64(&v2, 16).ok_or_else(bad)?;
    let high = be64(&v2, 24).ok_or_else(bad)?;
    if payload > v2.len().saturating_sub(header) {
        return Err(format!(
            "header announces {payload} payload bytes but {} follow",
            v2.len().saturating_sub(header)
        ));
    }
    if digits > 3 || low < 1 || high > MAX_US || low > high {
        return Err(format!(
            "bounds {low}..{high} with {digits} digits are not this tool's (1..{MAX_US}, 3 digits)"
        ));
    }
    Ok(v2)
}

/// Everything measured for one operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Latency of successful operations.
    pub latency: Latency,
    /// Time to first byte of successful GETs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb: Option<Latency>,
}

impl OpStats {
    pub fn merge(&mut self, o: &OpStats) {
        // Saturating: summaries come from other processes, and a forged count must not
        // overflow (a panic in a debug build, a wrap in release).
        self.count = self.count.saturating_add(o.count);
        self.errors = self.errors.saturating_add(o.errors);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.requests = self.requests.saturating_add(o.requests);
        for (k, v) in &o.errors_by_kind {
            let e = self.errors_by_kind.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
        self.latency.add(&o.latency);
        if let Some(t) = &o.ttfb {
            self.ttfb.get_or_insert_with(Latency::default).add(t);
        }
    }

    /// Human-facing figures over `elapsed` seconds.
    pub fn report(&self, elapsed: f64) -> OpReport {
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
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: if l.count() == 0 {
                0.0
            } else {
                l.0.max() as f64 / 1000.0
            },
        }
    }
}

/// Derived figures for one op; recomputed from the histograms, never merged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpReport {
    pub count: u64,
    pub errors: u64,
    pub ops_per_sec: f64,
    pub mib_per_sec: f64,
    pub requests_per_op: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// One second of the measured stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Second {
    /// Seconds since the start of the measured stage.
    pub second: u64,
    pub ops: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Sum of the latencies of this second's successful operations (`ops - errors` of
    /// them), in microseconds: their mean latency, for latency over time. A sum merges
    /// exactly across tasks and workers, where a per-second percentile would not (and a
    /// per-second histogram would cost ~190 KiB a second). 0 in summaries of older versions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_sum_us: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Second {
    /// The entry for `sec` in a timeline, growing it with empty, correctly numbered seconds.
    /// Public for the worker's recorder, which builds the timeline.
    pub fn at(timeline: &mut Vec<Second>, sec: u64) -> &mut Second {
        let from = timeline.len() as u64;
        if from <= sec {
            timeline.extend((from..=sec).map(|second| Second {
                second,
                ..Default::default()
            }));
        }
        &mut timeline[sec as usize]
    }

    /// Add another task's or worker's counts for the same second.
    /// Public for the worker's recorder, which merges tasks' timelines.
    pub fn add(&mut self, o: &Second) {
        self.ops = self.ops.saturating_add(o.ops);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.errors = self.errors.saturating_add(o.errors);
        self.latency_sum_us = self.latency_sum_us.saturating_add(o.latency_sum_us);
    }

    /// Mean latency of this second's successful operations in milliseconds, if it had any
    /// and the summary records latency per second.
    pub fn mean_latency_ms(&self) -> Option<f64> {
        let ok = self.ops.saturating_sub(self.errors);
        (ok > 0 && self.latency_sum_us > 0).then(|| self.latency_sum_us as f64 / ok as f64 / 1000.0)
    }
}

/// CPU time and page faults of the worker process during the measured stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStats {
    pub cpu_user_seconds: f64,
    pub cpu_system_seconds: f64,
    pub minor_faults: u64,
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StageStats {
    pub seconds: f64,
    pub objects: u64,
    pub bytes: u64,
    pub requests: u64,
    pub errors: u64,
}

impl StageStats {
    fn merge(&mut self, o: &StageStats) {
        self.seconds = self.seconds.max(o.seconds);
        self.objects = self.objects.saturating_add(o.objects);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.requests = self.requests.saturating_add(o.requests);
        self.errors = self.errors.saturating_add(o.errors);
    }
}

/// The result of a run, or of several merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Format version of this document.
    pub version: u32,
    /// The workload's target URI.
    pub target: String,
    /// Workers merged into this summary (1 for a single run).
    pub workers: u32,
    /// Worker ids merged into this summary.
    #[serde(default)]
    pub worker_ids: Vec<String>,
    /// Wall-clock start of the measured stage (the earliest, once merged).
    pub started_at: DateTime<Utc>,
    /// Length of the measured stage in seconds (the longest, once merged).
    pub elapsed_seconds: f64,
    /// Why the measured stage ended: `duration`, `totalOps`, `errorBudget: ...`, `interrupted`.
    pub stopped_by: String,
    /// Per-operation statistics.
    pub ops: BTreeMap<OpKind, OpStats>,
    /// Figures derived from `ops`, recomputed whenever the summary changes.
    pub report: BTreeMap<OpKind, OpReport>,
    /// All operations together, per second of the measured stage.
    pub timeline: Vec<Second>,
    /// CPU and page faults during the measured stage (summed over workers).
    pub process: ProcessStats,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<StageStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stat: Option<StageStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup: Option<StageStats>,
    /// The measured stage was stopped from outside (a signal, a shutdown request) before its
    /// duration or op count: the figures cover only what ran. True once merged if any part is.
    #[serde(default)]
    pub partial: bool,
}

pub const SUMMARY_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("summary version {0} is not supported (this build reads version {SUMMARY_VERSION})")]
    Version(u32),
    #[error("summary of {worker}: timeline second {second} is past the longest run ({MAX_TIMELINE_SECONDS} s)")]
    Timeline { worker: String, second: u64 },
}

/// The last timeline second a summary may have: the longest `duration` plus a day (a
/// `totalOps` run has no duration, but one so long is refused too). Merging allocates one
/// entry per second up to the last, so this bounds the merge's memory (about 80 MiB).
pub const MAX_TIMELINE_SECONDS: u64 = crate::spec::limits::MAX_DURATION_SECS + 24 * 3600;

impl Summary {
    /// Recompute `report` from the histograms.
    pub fn refresh(&mut self) {
        self.report = self
            .ops
            .iter()
            .map(|(k, v)| (*k, v.report(self.elapsed_seconds)))
            .collect();
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
        if let Some(p) = parts.iter().find(|p| p.version != SUMMARY_VERSION) {
            return Err(MergeError::Version(p.version));
        }
        let mut out = Summary {
            version: SUMMARY_VERSION,
            target: first.target.clone(),
            workers: 0,
            worker_ids: vec![],
            started_at: first.started_at,
            elapsed_seconds: 0.0,
            stopped_by: first.stopped_by.clone(),
            ops: BTreeMap::new(),
            report: BTreeMap::new(),
            timeline: vec![],
            process: ProcessStats::default(),
            prepare: None,
            pre_stat: None,
            cleanup: None,
            partial: false,
        };
        for p in parts {
            if let Some(s) = p.timeline.iter().find(|s| s.second > MAX_TIMELINE_SECONDS) {
                return Err(MergeError::Timeline {
                    worker: crate::spec::clip(&p.worker_ids.join(",")).into_owned(),
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
            for (k, v) in &p.ops {
                out.ops.entry(*k).or_default().merge(v);
            }
            for s in &p.timeline {
                Second::at(&mut out.timeline, s.second).add(s);
            }
            out.process.merge(&p.process);
            for (mine, theirs) in [
                (&mut out.prepare, &p.prepare),
                (&mut out.pre_stat, &p.pre_stat),
                (&mut out.cleanup, &p.cleanup),
            ] {
                if let Some(t) = theirs {
                    mine.get_or_insert_with(StageStats::default).merge(t);
                }
            }
        }
        out.refresh();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn summary(id: &str, samples: &[u64]) -> Summary {
        let mut get = OpStats::default();
        for &us in samples {
            get.count += 1;
            get.bytes += 100;
            get.latency.record(Duration::from_micros(us));
        }
        let mut s = Summary {
            version: SUMMARY_VERSION,
            target: "file:///x".into(),
            workers: 1,
            worker_ids: vec![id.into()],
            started_at: Utc::now(),
            elapsed_seconds: 2.0,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            report: BTreeMap::new(),
            timeline: vec![Second {
                second: 0,
                ops: samples.len() as u64,
                bytes: 1,
                errors: 0,
                latency_sum_us: 0,
            }],
            process: ProcessStats::default(),
            prepare: None,
            pre_stat: None,
            cleanup: None,
            partial: false,
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
    fn merge_rejects_empty_and_unknown_versions() {
        assert!(matches!(Summary::merge(&[]), Err(MergeError::Empty)));
        let mut s = summary("a", &[1]);
        s.version = 99;
        assert!(Summary::merge(&[s])
            .unwrap_err()
            .to_string()
            .contains("version 99"));
    }

    #[test]
    fn bad_histogram_text_is_a_clear_error() {
        let e = serde_json::from_str::<Latency>("\"!!!\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not base64"), "{e}");
    }

    /// A V2 histogram header with the given fields, compressed as V2 deflate, as base64 JSON.
    fn forged(payload_len: u32, digits: u32, low: u64, high: u64, payload: &[u8]) -> String {
        use std::io::Write;
        let mut v2 = Vec::new();
        v2.extend_from_slice(&0x1c84_9313u32.to_be_bytes());
        v2.extend_from_slice(&payload_len.to_be_bytes());
        v2.extend_from_slice(&0u32.to_be_bytes());
        v2.extend_from_slice(&digits.to_be_bytes());
        v2.extend_from_slice(&low.to_be_bytes());
        v2.extend_from_slice(&high.to_be_bytes());
        v2.extend_from_slice(&1.0f64.to_be_bytes());
        v2.extend_from_slice(payload);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&v2).unwrap();
        let z = z.finish().unwrap();
        let mut raw = Vec::new();
        raw.extend_from_slice(&0x1c84_9314u32.to_be_bytes());
        raw.extend_from_slice(&(z.len() as u32).to_be_bytes());
        raw.extend_from_slice(&z);
        format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(raw)
        )
    }

    #[test]
    fn forged_histogram_headers_are_refused_before_allocating() {
        // Announces a 4 GiB payload: HdrHistogram would zero a 4 GiB buffer for it.
        let e = serde_json::from_str::<Latency>(&forged(u32::MAX, 3, 1, MAX_US, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("payload bytes"), "{e}");
        // Bounds and precision that would size the counts array in the hundreds of MiB.
        let e = serde_json::from_str::<Latency>(&forged(0, 5, 1, u64::MAX / 2, &[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("are not this tool's"), "{e}");
        // A zlib bomb: 8 MiB of zeros after the header.
        let e = serde_json::from_str::<Latency>(&forged(0, 3, 1, MAX_US, &vec![0; 8 << 20]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("decompressed"), "{e}");
        // A genuine histogram still round-trips through the same checks.
        let mut l = Latency::default();
        l.record(Duration::from_millis(3));
        let back: Latency = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back, l);
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
