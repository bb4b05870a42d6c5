//! Baselines: compare a finished run's merged result with another finished run's (or a stored
//! summary, or the median of several runs), op by op, and say whether it regressed
//! (`spec.baselineRef`).
//!
//! The comparison is of the same figures as `status.results`, each from exact merged
//! histograms. A run regressed when, for any op both results have, throughput fell or p99 rose
//! by more than the tolerance **and** `benchrun-worker compare`'s significance test of that
//! figure says it is no noise: p < 0.01 with this run on the worse side (the rank-sum test of
//! per-second throughput, of all ops; the Kolmogorov-Smirnov test of the op's latency
//! histogram), against the baseline run, or against every run of a median. Where a test
//! cannot be made (a run without full seconds, too few samples to ever reach p < 0.01), the
//! tolerance alone decides and the status says `not tested: why`. The verdict is the
//! `Regressed` condition; the run's phase is not changed by it (thresholds are the gate that
//! fails a run).
//!
//! A median baseline (`baselineRef.runs`) is taken figure by figure: per op, the median of
//! the runs' ops/s, the median of their p99, and so on, each run's figure computed from its own
//! merged histograms. It is not the p99 of the runs' histograms merged: that would be ruled by
//! the one run with the worst tail, where the median is what a single odd night cannot move.

use std::collections::BTreeMap;

use benchrun_api::latency::Latency;
use benchrun_api::significance::{ks, ops_per_second, rank_sum, STRONG};
use benchrun_api::stats::OpReport;
use benchrun_api::Summary;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::crd::baseline::{
    BaselineRef, BaselineStatus, OpDelta, SignificanceTest, MAX_BASELINE_RUNS,
};
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

/// What the significance tests need of one run: its per-second throughput and its latency
/// histograms (taken out of its summary, so a median of 20 runs does not hold 20 summaries).
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// How messages name it (`run NAME`, `configmap NAME/KEY`, `this run`).
    pub name: String,
    /// Ops per second (all ops) of each full second of its measured stage.
    pub per_second: Vec<f64>,
    /// Per op and `all`: the successful ops' latency histogram.
    pub latency: BTreeMap<String, Latency>,
}

impl Samples {
    /// The samples of `summary`, named `name` in messages.
    pub fn of(name: impl Into<String>, summary: &Summary) -> Self {
        let mut latency: BTreeMap<String, Latency> = summary
            .ops
            .iter()
            .map(|(op, s)| (op.to_string(), s.latency.clone()))
            .collect();
        latency.insert("all".into(), summary.total().latency);
        Samples {
            name: name.into(),
            per_second: ops_per_second(summary),
            latency,
        }
    }
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
#[derive(Clone, Debug)]
pub struct Loaded {
    /// Per op (and `all`).
    pub figures: OpFigures,
    /// The samples of each run read (one, or each run of a median), for the significance
    /// tests.
    pub samples: Vec<Samples>,
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
            samples: vec![Samples::of(r.source(), &s)],
            source: r.source(),
        });
    }
    let mut read = Vec::new();
    let mut samples = Vec::new();
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
                samples.push(Samples::of(one.source(), &s));
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
        samples,
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

/// Compare `current` with `baseline` (named `baseline_name` in messages: `run NAME`), op by
/// op (only ops both have), with the tests.
pub fn compare(
    current: &Summary,
    baseline: &Summary,
    baseline_name: &str,
    tolerance_percent: f64,
) -> BaselineStatus {
    compare_figures(
        &figures(current),
        &figures(baseline),
        &Samples::of("this run", current),
        &[Samples::of(baseline_name, baseline)],
        tolerance_percent,
    )
}

/// Compare figures with a baseline's, op by op (only ops both have): a figure beyond the
/// tolerance in the worse direction is a regression when its test against every one of
/// `then_samples` is significant (or cannot be made), else it is `not_significant`.
pub fn compare_figures(
    now: &OpFigures,
    then: &OpFigures,
    now_samples: &Samples,
    then_samples: &[Samples],
    tolerance_percent: f64,
) -> BaselineStatus {
    let mut out = BaselineStatus {
        tolerance_percent,
        ..Default::default()
    };
    // Throughput is tested on all ops' seconds, the same test for every op's row.
    let lower = now.get("all").zip(then.get("all"));
    let all_lower = lower.is_none_or(|(c, b)| c.ops_per_sec <= b.ops_per_sec);
    let throughput = throughput_test(now_samples, then_samples, all_lower);
    for (op, c) in now {
        let Some(b) = then.get(op) else { continue };
        let mut d = OpDelta {
            ops_per_sec_percent: percent(c.ops_per_sec, b.ops_per_sec),
            mib_per_sec_percent: percent(c.mib_per_sec, b.mib_per_sec),
            p50_percent: percent(c.p50_ms, b.p50_ms),
            p99_percent: percent(c.p99_ms, b.p99_ms),
            error_rate_change: round3(c.error_rate - b.error_rate),
            ops_per_sec_test: Some(throughput.clone()),
            p99_test: Some(latency_test(
                op,
                now_samples,
                then_samples,
                c.p99_ms >= b.p99_ms,
            )),
        };
        // An op whose ops/s moved the other way from all ops': its test is not in its
        // direction.
        if (c.ops_per_sec <= b.ops_per_sec) != all_lower {
            if let Some(t) = d.ops_per_sec_test.as_mut() {
                t.significant = false;
            }
        }
        if d.ops_per_sec_percent < -tolerance_percent {
            let line = format!(
                "{op} ops/s {:.2} vs {:.2} ({:+.1}%; {})",
                c.ops_per_sec,
                b.ops_per_sec,
                d.ops_per_sec_percent,
                test_note(d.ops_per_sec_test.as_ref())
            );
            judge(&mut out, d.ops_per_sec_test.as_ref(), line);
        }
        if d.p99_percent > tolerance_percent {
            let line = format!(
                "{op} p99 {:.3}ms vs {:.3}ms ({:+.1}%; {})",
                c.p99_ms,
                b.p99_ms,
                d.p99_percent,
                test_note(d.p99_test.as_ref())
            );
            judge(&mut out, d.p99_test.as_ref(), line);
        }
        out.deltas.insert(op.clone(), d);
    }
    out
}

/// A change beyond the tolerance: a regression when its test is significant or could not
/// be made (the tolerance alone decides then), else not significant.
fn judge(out: &mut BaselineStatus, t: Option<&SignificanceTest>, line: String) {
    match t {
        Some(t) if !t.significant && t.not_tested.is_none() => out.not_significant.push(line),
        _ => out.regressions.push(line),
    }
}

/// `rank-sum p=0.0028`, `ks p<=3.1e-9 against each of 3 runs`, `not tested: why`.
pub fn test_note(t: Option<&SignificanceTest>) -> String {
    let Some(t) = t else {
        return "not tested".into();
    };
    match (t.p_value, &t.not_tested) {
        (_, Some(why)) => format!("not tested: {why}"),
        (Some(p), None) if t.runs > 1 => format!(
            "{} p{} against each of {} runs{}",
            t.test,
            p_is(p, "<="),
            t.runs,
            if t.significant {
                ""
            } else {
                ", not significant"
            }
        ),
        (Some(p), None) => format!(
            "{} p{}{}",
            t.test,
            p_is(p, "="),
            if t.significant {
                ""
            } else {
                ", not significant"
            }
        ),
        (None, None) => "not tested".into(),
    }
}

/// `=0.0043` (with `op` `=`), `<1e-300` for a p-value that underflowed to 0.
fn p_is(p: f64, op: &str) -> String {
    if p <= 0.0 {
        "<1e-300".into()
    } else {
        format!("{op}{}", p_text(p))
    }
}

/// A p-value in two significant digits.
fn p_text(p: f64) -> String {
    if p >= 0.001 {
        let decimals = (1 - p.log10().floor() as i32).max(0) as usize;
        let s = format!("{p:.decimals$}");
        let s = s.trim_end_matches('0');
        s.trim_end_matches('.').to_string()
    } else {
        format!("{p:.1e}")
    }
}

/// One test per baseline run, each `(p, this run on the side the figure moved to)` or why it
/// could not be made, into one [`SignificanceTest`]: not tested if any could not be made,
/// else its largest p-value and whether every one is significant in the direction.
fn combine(test: &str, results: Vec<Result<(f64, bool), String>>) -> SignificanceTest {
    let mut t = SignificanceTest {
        test: test.into(),
        ..Default::default()
    };
    if results.is_empty() {
        t.not_tested = Some("no baseline run to test against".into());
        return t;
    }
    let why: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().cloned())
        .collect();
    if !why.is_empty() {
        t.not_tested = Some(why.join("; "));
        return t;
    }
    let ok: Vec<(f64, bool)> = results.into_iter().filter_map(Result::ok).collect();
    t.runs = ok.len() as u32;
    t.p_value = ok.iter().map(|r| r.0).reduce(f64::max);
    t.significant = ok.iter().all(|(p, dir)| *p < STRONG && *dir);
    t
}

/// The rank-sum test of this run's per-second throughput against each baseline run's, in
/// the direction `lower` (this run slower) or not.
fn throughput_test(now: &Samples, then: &[Samples], lower: bool) -> SignificanceTest {
    let results = then
        .iter()
        .map(|b| {
            let (n, m) = (b.per_second.len(), now.per_second.len());
            if m == 0 || n == 0 {
                let who = if m == 0 { &now.name } else { &b.name };
                return Err(format!("{who} has no full second of throughput"));
            }
            if rank_sum::smallest_p(n, m) >= STRONG {
                return Err(format!(
                    "{m} full seconds in {} and {n} in {} cannot reach p < 0.01 (5 and 5 can)",
                    now.name, b.name
                ));
            }
            let t = rank_sum::mann_whitney(&b.per_second, &now.per_second)
                .ok_or_else(|| "no seconds".to_string())?;
            // U counts the pairs with the baseline's second the faster.
            let half = (n * m) as f64 / 2.0;
            let dir = if lower { t.u > half } else { t.u < half };
            Ok((t.p_value, dir))
        })
        .collect();
    combine("rank-sum", results)
}

/// The Kolmogorov-Smirnov test of this run's latency histogram of `op` against each baseline
/// run's, in the direction `slower` (this run slower) or not.
fn latency_test(op: &str, now: &Samples, then: &[Samples], slower: bool) -> SignificanceTest {
    let count = |s: &Samples| s.latency.get(op).map_or(0, Latency::count);
    let results = then
        .iter()
        .map(|b| {
            let (n, m) = (count(b), count(now));
            if m == 0 || n == 0 {
                let who = if m == 0 { &now.name } else { &b.name };
                return Err(format!("{who} has no successful {op} op"));
            }
            if ks::smallest_p(n, m) >= STRONG {
                return Err(format!(
                    "{m} {op} ops in {} and {n} in {} cannot reach p < 0.01",
                    now.name, b.name
                ));
            }
            let (Some(lb), Some(ln)) = (b.latency.get(op), now.latency.get(op)) else {
                return Err(format!("no {op} latency"));
            };
            let t = ks::two_sample(&lb.0, &ln.0).ok_or_else(|| format!("no {op} latency"))?;
            Ok((t.p_value, t.second_slower == slower))
        })
        .collect();
    combine("ks", results)
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
        let b = compare(&s, &s, "the baseline", 10.0);
        assert!(b.regressions.is_empty(), "{b:?}");
        let get = &b.deltas["get"];
        assert_eq!(
            (
                get.ops_per_sec_percent,
                get.p99_percent,
                get.error_rate_change
            ),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(b.deltas.keys().collect::<Vec<_>>(), ["all", "get"]);
    }

    #[test]
    fn slower_and_fewer_ops_regress_beyond_the_tolerance_only() {
        // 20% fewer ops, p99 from 4 ms to 5 ms (+25%).
        let base = summary(1000, 4);
        let now = summary(800, 5);
        let b = compare(&now, &base, "the baseline", 10.0);
        assert_eq!(b.deltas["get"].ops_per_sec_percent, -20.0);
        assert_eq!(b.deltas["get"].p99_percent, 25.0);
        assert_eq!(
            b.regressions,
            [
                "all ops/s 80.00 vs 100.00 (-20.0%; not tested: this run has no full second of throughput)",
                "all p99 5.003ms vs 4.001ms (+25.0%; ks p<1e-300)",
                "get ops/s 80.00 vs 100.00 (-20.0%; not tested: this run has no full second of throughput)",
                "get p99 5.003ms vs 4.001ms (+25.0%; ks p<1e-300)",
            ]
        );
        // Within a 30% tolerance nothing regressed; faster is never a regression.
        assert!(compare(&now, &base, "the baseline", 30.0)
            .regressions
            .is_empty());
        assert!(compare(&base, &now, "the baseline", 0.0)
            .regressions
            .is_empty());
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
        // No samples to test with: the tolerance alone decides, and says so.
        let b = compare_figures(&now, &base, &Samples::default(), &[], 10.0);
        assert_eq!(
            b.regressions,
            ["get ops/s 50.00 vs 100.00 (-50.0%; not tested: no baseline run to test against)"]
        );
        assert_eq!(b.deltas["put"].ops_per_sec_percent, 0.0);
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

    /// GETs with these latencies (us), one timeline entry per `seconds` value, over as many
    /// seconds as entries plus `partial` (a last second that is not full).
    fn timed(
        latencies_us: std::ops::RangeInclusive<u64>,
        seconds: &[u64],
        partial: f64,
    ) -> Summary {
        let mut get = OpStats::default();
        for us in latencies_us {
            get.count += 1;
            get.bytes += 1 << 20;
            get.latency.record(Duration::from_micros(us));
        }
        Summary {
            target: "s3://bench".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: seconds.len() as f64 + partial,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            timeline: seconds
                .iter()
                .enumerate()
                .map(|(i, n)| benchrun_api::timeline::Second {
                    second: i as u64,
                    ops: *n,
                    bytes: n << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Within 1e-9 of `want`, relatively: exact p-values and the Kolmogorov tail.
    fn close(got: Option<f64>, want: f64) -> bool {
        got.is_some_and(|g| ((g - want) / want).abs() < 1e-9)
    }

    /// Within 1e-6 of `want`, relatively: the normal approximation's erfc is a Chebyshev fit
    /// good to 1.2e-7 (api/src/significance/rank_sum.rs).
    fn near(got: Option<f64>, want: f64) -> bool {
        got.is_some_and(|g| ((g - want) / want).abs() < 1e-6)
    }

    // References from scipy 1.17 (scipy.stats.mannwhitneyu two-sided; ks_2samp for D, and
    // kstwobign.sf at Stephens' lambda = (sqrt(ne) + 0.12 + 0.11 / sqrt(ne)) D, the
    // correction compare applies), computed apart from this code.

    #[test]
    fn a_slower_run_regresses_with_the_p_value_of_each_test() {
        // 6 seconds of 18..23 ops (123 GETs at 1000..=1122 us), then 5 seconds of 12..17 (74
        // GETs at 1100..=1173 us): no second of the new run is as fast as any of the old.
        let base = timed(1000..=1122, &[18, 20, 19, 21, 23, 22], 0.0);
        let now = timed(1100..=1173, &[15, 14, 16, 12, 17], 0.0);
        let b = compare(&now, &base, "the baseline", 4.0);
        let get = &b.deltas["get"];
        let t = get.ops_per_sec_test.clone().expect("throughput test");
        // Exact: the one most extreme ordering on each side of C(11, 5) = 462.
        assert!(close(t.p_value, 2.0 / 462.0), "{t:?}");
        assert!(close(t.p_value, 0.004_329_004_329_004_329), "{t:?}");
        assert_eq!(
            (t.test.as_str(), t.runs, t.significant),
            ("rank-sum", 1, true)
        );
        let k = get.p99_test.clone().expect("latency test");
        // D = 100 / 123 at 1099 us.
        assert!(close(k.p_value, 5.026_951_111_472_713e-28), "{k:?}");
        assert_eq!((k.test.as_str(), k.significant), ("ks", true));
        assert_eq!(
            b.regressions,
            [
                "all ops/s 14.80 vs 20.50 (-27.8%; rank-sum p=0.0043)",
                "all p99 1.173ms vs 1.121ms (+4.6%; ks p=5.0e-28)",
                "get ops/s 14.80 vs 20.50 (-27.8%; rank-sum p=0.0043)",
                "get p99 1.173ms vs 1.121ms (+4.6%; ks p=5.0e-28)",
            ]
        );
        assert!(b.not_significant.is_empty());
    }

    #[test]
    fn a_change_the_tests_cannot_tell_from_noise_is_no_regression() {
        // The same seconds as the baseline's, and a stall of 0.9 s at the end (not a full
        // second): ops/s 15% lower, per-second throughput the same.
        let base = timed(1000..=1119, &[19, 21, 20, 18, 22, 20], 0.0);
        let now = timed(1000..=1099, &[20, 21, 19, 22, 18], 0.9);
        let b = compare(&now, &base, "the baseline", 10.0);
        assert!(b.regressions.is_empty(), "{b:#?}");
        // Ties: the normal approximation; scipy's asymptotic p is 1.0.
        let t = b.deltas["get"].ops_per_sec_test.clone().expect("test");
        assert!(near(t.p_value, 1.0), "{t:?}");
        assert!(!t.significant);
        assert_eq!(
            b.not_significant,
            [
                "all ops/s 16.95 vs 20.00 (-15.3%; rank-sum p=1, not significant)",
                "get ops/s 16.95 vs 20.00 (-15.3%; rank-sum p=1, not significant)",
            ]
        );
    }

    #[test]
    fn without_data_for_a_test_the_tolerance_alone_decides_and_says_why() {
        // 3 full seconds each: even fully separated, the smallest p is 2 / C(6, 3) = 0.1.
        let base = timed(1000..=1059, &[20, 20, 20], 0.0);
        let now = timed(1000..=1029, &[10, 10, 10], 0.0);
        let b = compare(&now, &base, "the baseline", 10.0);
        assert_eq!(
            b.regressions[0],
            "all ops/s 10.00 vs 20.00 (-50.0%; not tested: 3 full seconds in this run and 3 in the baseline cannot reach p < 0.01 (5 and 5 can))"
        );
        // No timeline at all (a summary of an old version, or a run under a second).
        let b = compare(&summary(500, 4), &summary(1000, 4), "the baseline", 10.0);
        assert_eq!(
            b.regressions[0],
            "all ops/s 50.00 vs 100.00 (-50.0%; not tested: this run has no full second of throughput)"
        );
        let t = b.deltas["get"].p99_test.clone().expect("latency test");
        assert_eq!((t.p_value, t.runs, t.significant), (Some(1.0), 1, false));
        assert_eq!(
            rank_sum::smallest_p(4, 4),
            2.0 / 70.0,
            "4 and 4 seconds cannot reach 1% either"
        );
        assert!(rank_sum::smallest_p(5, 5) < STRONG);
    }

    #[test]
    fn against_a_median_every_run_must_be_significant() {
        let nights = [
            timed(1000..=1119, &[19, 21, 20, 18, 22, 20], 0.0),
            timed(1000..=1122, &[18, 20, 19, 21, 23, 22], 0.0),
            // A slow night, as slow as the run compared.
            timed(1000..=1089, &[15, 14, 16, 13, 17, 15], 0.0),
        ];
        let now = timed(1000..=1073, &[15, 14, 16, 12, 17], 0.0);
        let samples: Vec<Samples> = nights
            .iter()
            .enumerate()
            .map(|(i, s)| Samples::of(format!("run n{i}"), s))
            .collect();
        let figs: Vec<OpFigures> = nights.iter().map(figures).collect();
        let against = |k: usize| {
            compare_figures(
                &figures(&now),
                &median(&figs[..k]),
                &Samples::of("this run", &now),
                &samples[..k],
                10.0,
            )
        };
        // The two good nights: 0.0079694 (ties: asymptotic) and 2/462 (exact); the
        // largest is reported.
        let b = against(2);
        let t = b.deltas["get"].ops_per_sec_test.clone().expect("test");
        assert!(near(t.p_value, 0.007_969_413_024_121_784), "{t:?}");
        assert_eq!((t.runs, t.significant), (2, true));
        assert_eq!(
            b.regressions[0],
            "all ops/s 14.80 vs 20.25 (-26.9%; rank-sum p<=0.008 against each of 2 runs)"
        );
        // With the slow night in the median (p = 1 against it), the figures still cross
        // the tolerance but the change is not significant against every run.
        let b = against(3);
        let t = b.deltas["get"].ops_per_sec_test.clone().expect("test");
        assert!(near(t.p_value, 1.0), "{t:?}");
        assert_eq!((t.runs, t.significant), (3, false));
        assert!(b.regressions.is_empty(), "{b:#?}");
        assert_eq!(
            b.not_significant[0],
            "all ops/s 14.80 vs 20.00 (-26.0%; rank-sum p<=1 against each of 3 runs, not significant)"
        );
        // One run of the median without seconds: not tested, named.
        let mut bare = samples.clone();
        bare[1].per_second.clear();
        let b = compare_figures(
            &figures(&now),
            &median(&figs),
            &Samples::of("this run", &now),
            &bare,
            10.0,
        );
        assert_eq!(
            b.deltas["get"]
                .ops_per_sec_test
                .clone()
                .and_then(|t| t.not_tested),
            Some("run n1 has no full second of throughput".into())
        );
    }

    #[test]
    fn p_values_read_in_two_digits() {
        assert_eq!(p_text(0.004_329), "0.0043");
        assert_eq!(p_text(0.21), "0.21");
        assert_eq!(p_text(1.0), "1");
        assert_eq!(p_text(5.03e-28), "5.0e-28");
        assert_eq!(p_is(0.0, "="), "<1e-300");
        assert_eq!(p_is(0.0079694, "<="), "<=0.008");
    }
}
