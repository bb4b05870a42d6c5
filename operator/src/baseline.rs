//! Baselines: compare a finished run's merged result with another finished run's (or a stored
//! summary, or the median of several runs), op by op, and say whether it regressed
//! (`spec.baselineRef`).
//!
//! The comparison is of the same figures as `status.results`, each from exact merged
//! histograms. A run regressed when, for any op both results have, throughput fell or p99 rose
//! by more than the tolerance. The verdict is the `Regressed` condition; the run's phase is not
//! changed by it (thresholds are the gate that fails a run).
//!
//! A median baseline (`baselineRef.runs`) is taken figure by figure: per op, the median of
//! the runs' ops/s, the median of their p99, and so on, each run's figure computed from its own
//! merged histograms. It is not the p99 of the runs' histograms merged: that would be ruled by
//! the one run with the worst tail, where the median is what a single odd night cannot move.

use std::collections::BTreeMap;

use benchrun_api::stats::OpReport;
use benchrun_api::Summary;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::crd::baseline::{BaselineRef, BaselineStatus, OpDelta, MAX_BASELINE_RUNS};
use crate::crd::{BenchmarkRun, Phase, MERGED_KEY};
use crate::resources::result_cm_name;

/// The figures of one op a baseline is compared on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    /// Operations per second.
    pub ops_per_sec: f64,
    /// MiB per second.
    pub mib_per_sec: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Failed operations over all operations.
    pub error_rate: f64,
}

impl From<&OpReport> for Figures {
    fn from(r: &OpReport) -> Self {
        Figures {
            ops_per_sec: r.ops_per_sec,
            mib_per_sec: r.mib_per_sec,
            p50_ms: r.p50_ms,
            p99_ms: r.p99_ms,
            error_rate: r.error_rate(),
        }
    }
}

/// Per op (and `all`) figures of one result.
pub type OpFigures = BTreeMap<String, Figures>;

/// The figures of a summary, per op and `all`.
pub fn figures(summary: &Summary) -> OpFigures {
    crate::run_rules::op_results(summary)
        .iter()
        .map(|(op, r)| (op.clone(), Figures::from(r)))
        .collect()
}

/// The median of several results, op by op and figure by figure; an op counts only the
/// results that have it. The median of an even count is the mean of the middle two.
pub fn median(results: &[OpFigures]) -> OpFigures {
    let mut ops: BTreeMap<&str, Vec<&Figures>> = BTreeMap::new();
    for r in results {
        for (op, f) in r {
            ops.entry(op.as_str()).or_default().push(f);
        }
    }
    ops.into_iter()
        .map(|(op, fs)| {
            let m = |get: fn(&Figures) -> f64| median_of(fs.iter().map(|f| get(f)).collect());
            let f = Figures {
                ops_per_sec: m(|f| f.ops_per_sec),
                mib_per_sec: m(|f| f.mib_per_sec),
                p50_ms: m(|f| f.p50_ms),
                p99_ms: m(|f| f.p99_ms),
                error_rate: m(|f| f.error_rate),
            };
            (op.to_string(), f)
        })
        .collect()
}

/// The median of `xs` (NaN sorts last); 0 when empty.
fn median_of(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    match xs.len() {
        0 => 0.0,
        n if n % 2 == 1 => xs[n / 2],
        n => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// Check what the schema's CEL rules also say (for runs created before them): each problem
/// as "spec.baselineRef...: why".
pub fn validate(r: &BaselineRef, own_name: &str) -> Vec<String> {
    let mut errs = vec![];
    let given = [r.run.is_some(), !r.runs.is_empty(), r.config_map.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        errs.push("spec.baselineRef: give run, runs or configMap (exactly one)".into());
    }
    if r.run.as_deref() == Some(own_name) {
        errs.push("spec.baselineRef.run: a run cannot be its own baseline".into());
    }
    if r.runs.iter().any(|n| n == own_name) {
        errs.push("spec.baselineRef.runs: a run cannot be its own baseline".into());
    }
    if r.runs.len() > MAX_BASELINE_RUNS {
        errs.push(format!(
            "spec.baselineRef.runs: at most {MAX_BASELINE_RUNS} runs (got {})",
            r.runs.len()
        ));
    }
    let t = r.tolerance();
    if !t.is_finite() || !(0.0..=1000.0).contains(&t) {
        errs.push(format!(
            "spec.baselineRef.tolerancePercent: must be from 0 to 1000 (got {t})"
        ));
    }
    errs
}

/// Why a baseline could not be compared with.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The run or ConfigMap named does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The baseline run has not succeeded (its phase).
    #[error("{0} has not succeeded (phase {1})")]
    NotSucceeded(String, String),
    /// The ConfigMap has no readable summary under the key.
    #[error("{0} holds no summary: {1}")]
    NoSummary(String, String),
    /// None of the runs of a median could be read (each one's reason).
    #[error("none of the runs of the median can be read: {0}")]
    NoneReadable(String),
    /// The API server could not be read.
    #[error("reading {0}: {1}")]
    Kube(String, kube::Error),
}

/// A baseline, loaded: its figures and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Loaded {
    /// Per op (and `all`).
    pub figures: OpFigures,
    /// `run NAME`, `configmap NAME/KEY`, or `median of 2 runs: A, B` (naming the runs left
    /// out and why).
    pub source: String,
}

/// Fetch the baseline: one summary's figures, or the median of several runs'.
pub async fn load(
    r: &BaselineRef,
    runs: &Api<BenchmarkRun>,
    cms: &Api<ConfigMap>,
) -> Result<Loaded, BaselineError> {
    if r.runs.is_empty() {
        let s = load_one(r, runs, cms).await?;
        return Ok(Loaded {
            figures: figures(&s),
            source: r.source(),
        });
    }
    let mut read = Vec::new();
    let mut used = Vec::new();
    let mut left_out = Vec::new();
    for name in r.runs.iter().take(MAX_BASELINE_RUNS) {
        let one = BaselineRef {
            run: Some(name.clone()),
            ..Default::default()
        };
        match load_one(&one, runs, cms).await {
            Ok(s) => {
                read.push(figures(&s));
                used.push(name.clone());
            }
            // The API server failing is no reason to compare with fewer runs.
            Err(e @ BaselineError::Kube(..)) => return Err(e),
            Err(e) => left_out.push(e.to_string()),
        }
    }
    if read.is_empty() {
        return Err(BaselineError::NoneReadable(left_out.join("; ")));
    }
    Ok(Loaded {
        figures: median(&read),
        source: median_source(&used, &left_out),
    })
}

/// `median of 2 runs: a, b` (`; left out: c does not exist`).
pub fn median_source(used: &[String], left_out: &[String]) -> String {
    let mut s = format!(
        "median of {} run{}: {}",
        used.len(),
        if used.len() == 1 { "" } else { "s" },
        used.join(", ")
    );
    if !left_out.is_empty() {
        s.push_str(&format!("; left out: {}", left_out.join("; ")));
    }
    s
}

/// Fetch one summary: of a run (`run`) or a ConfigMap.
async fn load_one(
    r: &BaselineRef,
    runs: &Api<BenchmarkRun>,
    cms: &Api<ConfigMap>,
) -> Result<Summary, BaselineError> {
    let source = r.source();
    let (cm_name, key) = match (&r.run, &r.config_map) {
        (Some(run), _) => {
            let other = runs
                .get_opt(run)
                .await
                .map_err(|e| BaselineError::Kube(source.clone(), e))?
                .ok_or_else(|| BaselineError::NotFound(source.clone()))?;
            let phase = other.status.map(|s| s.phase).unwrap_or_default();
            if phase != Phase::Succeeded {
                return Err(BaselineError::NotSucceeded(source, phase.as_str().into()));
            }
            (result_cm_name(run), MERGED_KEY.to_string())
        }
        (None, Some(c)) => (
            c.name.clone(),
            c.key.clone().unwrap_or_else(|| MERGED_KEY.into()),
        ),
        (None, None) => return Err(BaselineError::NotFound(source)),
    };
    let cm = cms
        .get_opt(&cm_name)
        .await
        .map_err(|e| BaselineError::Kube(source.clone(), e))?
        .ok_or_else(|| BaselineError::NotFound(format!("configmap {cm_name} of {source}")))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(&key))
        .ok_or_else(|| BaselineError::NoSummary(source.clone(), format!("no key {key}")))?;
    // Any format version this operator reads (a baseline may be older than the operator).
    benchrun_api::summary_read::read(text)
        .map_err(|e| BaselineError::NoSummary(source, e.to_string()))
}

/// Compare `current` with `baseline`, op by op (only ops both have).
pub fn compare(current: &Summary, baseline: &Summary, tolerance_percent: f64) -> BaselineStatus {
    compare_figures(&figures(current), &figures(baseline), tolerance_percent)
}

/// Compare figures with a baseline's, op by op (only ops both have).
pub fn compare_figures(
    now: &OpFigures,
    then: &OpFigures,
    tolerance_percent: f64,
) -> BaselineStatus {
    let mut out = BaselineStatus {
        tolerance_percent,
        ..Default::default()
    };
    for (op, c) in now {
        let Some(b) = then.get(op) else { continue };
        let d = OpDelta {
            ops_per_sec_percent: percent(c.ops_per_sec, b.ops_per_sec),
            mib_per_sec_percent: percent(c.mib_per_sec, b.mib_per_sec),
            p50_percent: percent(c.p50_ms, b.p50_ms),
            p99_percent: percent(c.p99_ms, b.p99_ms),
            error_rate_change: round3(c.error_rate - b.error_rate),
        };
        if d.ops_per_sec_percent < -tolerance_percent {
            out.regressions.push(format!(
                "{op} ops/s {:.2} vs {:.2} ({:+.1}%)",
                c.ops_per_sec, b.ops_per_sec, d.ops_per_sec_percent
            ));
        }
        if d.p99_percent > tolerance_percent {
            out.regressions.push(format!(
                "{op} p99 {:.3}ms vs {:.3}ms ({:+.1}%)",
                c.p99_ms, b.p99_ms, d.p99_percent
            ));
        }
        out.deltas.insert(op.clone(), d);
    }
    out
}

/// `(now - then) / then` in percent, rounded to 0.1; 0 when both are 0, +100% per unit when
/// only the baseline is 0 (something that was free now costs).
fn percent(now: f64, then: f64) -> f64 {
    match benchrun_api::change::percent(then, now) {
        Some(p) => p,
        None if now == 0.0 => 0.0,
        None => 100.0,
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::spec::OpKind;
    use benchrun_api::stats::OpStats;
    use std::time::Duration;

    /// `count` gets in 10 s, each taking `ms`.
    fn summary(count: u64, ms: u64) -> Summary {
        let mut get = OpStats {
            count,
            bytes: count << 20,
            ..Default::default()
        };
        for _ in 0..count {
            get.latency.record(Duration::from_millis(ms));
        }
        Summary {
            target: "s3://bench".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: 10.0,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn equal_results_do_not_regress() {
        let s = summary(1000, 4);
        let b = compare(&s, &s, 10.0);
        assert!(b.regressions.is_empty(), "{b:?}");
        assert_eq!(b.deltas["get"], OpDelta::default());
        assert_eq!(b.deltas.keys().collect::<Vec<_>>(), ["all", "get"]);
    }

    #[test]
    fn slower_and_fewer_ops_regress_beyond_the_tolerance_only() {
        // 20% fewer ops, p99 from 4 ms to 5 ms (+25%).
        let base = summary(1000, 4);
        let now = summary(800, 5);
        let b = compare(&now, &base, 10.0);
        assert_eq!(b.deltas["get"].ops_per_sec_percent, -20.0);
        assert_eq!(b.deltas["get"].p99_percent, 25.0);
        assert_eq!(
            b.regressions,
            [
                "all ops/s 80.00 vs 100.00 (-20.0%)",
                "all p99 5.003ms vs 4.001ms (+25.0%)",
                "get ops/s 80.00 vs 100.00 (-20.0%)",
                "get p99 5.003ms vs 4.001ms (+25.0%)",
            ]
        );
        // Within a 30% tolerance nothing regressed; faster is never a regression.
        assert!(compare(&now, &base, 30.0).regressions.is_empty());
        assert!(compare(&base, &now, 0.0).regressions.is_empty());
    }

    #[test]
    fn validation_says_what_is_wrong() {
        let r: BaselineRef = serde_yaml::from_str("{run: me, tolerancePercent: -1}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            [
                "spec.baselineRef.run: a run cannot be its own baseline",
                "spec.baselineRef.tolerancePercent: must be from 0 to 1000 (got -1)",
            ]
        );
        let r: BaselineRef = serde_yaml::from_str("{}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            ["spec.baselineRef: give run, runs or configMap (exactly one)"]
        );
        let r: BaselineRef = serde_yaml::from_str("{run: a, runs: [b]}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            ["spec.baselineRef: give run, runs or configMap (exactly one)"]
        );
        let r: BaselineRef = serde_yaml::from_str("{runs: [a, me]}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            ["spec.baselineRef.runs: a run cannot be its own baseline"]
        );
        assert_eq!(r.source(), "median of runs a, me");
        let r: BaselineRef = serde_yaml::from_str("{configMap: {name: saved}}").expect("ref");
        assert!(validate(&r, "me").is_empty());
        assert_eq!(r.source(), "configmap saved/merged.json");
    }

    fn fig(ops_per_sec: f64, p99_ms: f64) -> Figures {
        Figures {
            ops_per_sec,
            mib_per_sec: ops_per_sec / 4.0,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            error_rate: 0.0,
        }
    }

    fn one(op: &str, f: Figures) -> OpFigures {
        [(op.to_string(), f)].into()
    }

    #[test]
    fn the_median_is_taken_figure_by_figure_and_one_odd_run_cannot_move_it() {
        // Three nights: one with a bad tail, one slow. The median p99 and ops/s are those of
        // the typical nights, though no single night has both.
        let nights = [
            one("get", fig(100.0, 4.0)),
            one("get", fig(98.0, 40.0)),
            one("get", fig(50.0, 5.0)),
        ];
        let m = median(&nights);
        assert_eq!(m["get"].ops_per_sec, 98.0);
        assert_eq!(m["get"].p99_ms, 5.0);
        assert_eq!(m["get"].mib_per_sec, 24.5);
        assert_eq!(m["get"].p50_ms, 2.5);
        // An even count: the mean of the middle two.
        let m = median(&nights[..2]);
        assert_eq!(m["get"].ops_per_sec, 99.0);
        assert_eq!(m["get"].p99_ms, 22.0);
        // One run: itself.
        assert_eq!(median(&nights[..1]), nights[0]);
        assert!(median(&[]).is_empty());
    }

    #[test]
    fn an_op_counts_only_the_runs_that_have_it() {
        let mut a = one("get", fig(100.0, 4.0));
        a.insert("put".into(), fig(10.0, 8.0));
        let b = one("get", fig(80.0, 6.0));
        let m = median(&[a, b]);
        assert_eq!(m["get"].ops_per_sec, 90.0);
        assert_eq!(m["put"], fig(10.0, 8.0));
    }

    #[test]
    fn a_run_is_compared_with_the_median_and_names_the_op_that_moved() {
        let mut night = one("get", fig(100.0, 4.0));
        night.insert("put".into(), fig(10.0, 8.0));
        let base = median(&[night.clone(), night.clone(), night.clone()]);
        // Only get got slower.
        let mut now = night.clone();
        now.insert("get".into(), fig(50.0, 4.0));
        let b = compare_figures(&now, &base, 10.0);
        assert_eq!(b.regressions, ["get ops/s 50.00 vs 100.00 (-50.0%)"]);
        assert_eq!(b.deltas["put"], OpDelta::default());
        assert_eq!(b.deltas["get"].mib_per_sec_percent, -50.0);
    }

    #[test]
    fn the_source_names_the_runs_used_and_those_left_out() {
        assert_eq!(median_source(&["a".into()], &[]), "median of 1 run: a");
        assert_eq!(
            median_source(&["a".into(), "b".into()], &["run c does not exist".into()]),
            "median of 2 runs: a, b; left out: run c does not exist"
        );
    }
}
