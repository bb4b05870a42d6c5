//! Baselines: compare a finished run's merged result with another finished run's (or a stored
//! summary, or the median of several runs), op by op, and say whether it regressed
//! (`spec.baselineRef`).
//!
//! The comparison is of the same figures as `status.results`, each from exact merged
//! histograms. Whether the run is slower is the project's one rule ([`verdict`], also
//! `compare --fail-if-slower`'s): per op, ops/s lower or p99 higher than the baseline's by more
//! than the tolerance, **and** a test of that figure says it is no noise (p < 0.01 against
//! the baseline run, against every run of a median): the rank-sum test of the op's
//! per-second rates for ops/s, the test of how many of the op's operations exceed the
//! baseline's p99 for p99. Each op is judged on its own. Where a test cannot be made (a run
//! without full seconds, too few samples to ever reach p < 0.01), the tolerance alone
//! decides and the status says `not tested: why`. The verdict is the `Regressed` condition;
//! the run's phase is not changed by it (thresholds are the gate that fails a run).
//!
//! A median baseline (`baselineRef.runs`) is taken figure by figure: per op, the median of
//! the runs' ops/s, the median of their p99, and so on, each run's figure computed from its own
//! merged histograms. It is not the p99 of the runs' histograms merged: that would be ruled by
//! the one run with the worst tail, where the median is what a single odd night cannot move.

use std::collections::BTreeMap;

use benchrun_api::stats::OpReport;
use benchrun_api::verdict::{self, Evidence, Outcome, Verdict};
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

/// The median of `xs`, the rule's own; 0 when empty.
fn median_of(xs: Vec<f64>) -> f64 {
    verdict::median(xs).unwrap_or(0.0)
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
    pub samples: Vec<Evidence>,
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
            samples: vec![Evidence::of(r.source(), &s)],
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
                samples.push(Evidence::of(one.source(), &s));
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
        &Evidence::of("this run", current),
        &[Evidence::of(baseline_name, baseline)],
        tolerance_percent,
    )
}

/// Compare figures with a baseline's, op by op (only ops both have), by the one rule
/// ([`verdict::judge`]): a figure beyond the tolerance in the worse direction is a regression
/// when its test against every one of `then_samples` is significant (or cannot be made), else
/// it is `not_significant`.
pub fn compare_figures(
    now: &OpFigures,
    then: &OpFigures,
    now_samples: &Evidence,
    then_samples: &[Evidence],
    tolerance_percent: f64,
) -> BaselineStatus {
    let mut out = BaselineStatus {
        tolerance_percent,
        ..Default::default()
    };
    for (op, c) in now {
        let Some(b) = then.get(op) else { continue };
        let figures = verdict::Figures {
            ops_per_sec: Some((c.ops_per_sec, b.ops_per_sec)),
            p99_ms: Some((c.p99_ms, b.p99_ms)),
        };
        let verdicts = verdict::judge(op, figures, now_samples, then_samples, tolerance_percent);
        let test_of = |f: verdict::Figure| {
            verdicts
                .iter()
                .find(|v| v.figure == f)
                .map(SignificanceTest::from)
        };
        let d = OpDelta {
            ops_per_sec_percent: percent(c.ops_per_sec, b.ops_per_sec),
            mib_per_sec_percent: percent(c.mib_per_sec, b.mib_per_sec),
            p50_percent: percent(c.p50_ms, b.p50_ms),
            p99_percent: percent(c.p99_ms, b.p99_ms),
            error_rate_change: round3(c.error_rate - b.error_rate),
            ops_per_sec_test: test_of(verdict::Figure::OpsPerSec),
            p99_test: test_of(verdict::Figure::P99),
        };
        for v in &verdicts {
            file(&mut out, v);
        }
        out.deltas.insert(op.clone(), d);
    }
    out
}

impl From<&Verdict> for SignificanceTest {
    fn from(v: &Verdict) -> Self {
        SignificanceTest {
            test: v.test.name.clone(),
            p_value: v.test.p_value,
            runs: v.test.runs,
            significant: v.test.significant,
            not_tested: v.test.not_tested.clone(),
            effect: v.effect,
            against: v.against.clone(),
        }
    }
}

/// A verdict into the status's lists: slower is a regression, beyond the tolerance but
/// noise is `notSignificant`.
fn file(out: &mut BaselineStatus, v: &Verdict) {
    match v.outcome {
        Outcome::Slower => out.regressions.push(v.describe()),
        Outcome::NotSignificant => out.not_significant.push(v.describe()),
        Outcome::WithinTolerance => {}
    }
}

/// `(now - then) / then` in percent, rounded to 0.1; 0 when both are 0, +100% per unit when
/// only the baseline is 0 (something that was free now costs).
fn percent(now: f64, then: f64) -> f64 {
    verdict::percent(now, then)
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use benchrun_api::significance::{rank_sum, STRONG};
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
                "all p99 5.003ms vs 4.001ms (+25.0%, 95% CI +25.0% to +25.0%; exceedance p<1e-300)",
                "get ops/s 80.00 vs 100.00 (-20.0%; not tested: this run has no full second of throughput)",
                "get p99 5.003ms vs 4.001ms (+25.0%, 95% CI +25.0% to +25.0%; exceedance p<1e-300)",
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
        let b = compare_figures(&now, &base, &Evidence::default(), &[], 10.0);
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

    /// Ops with these latencies (us) each, over these full seconds (all ops per second).
    fn mixed(ops: Vec<(OpKind, Vec<u64>)>, seconds: &[u64]) -> Summary {
        // The timeline of `timed`; its one GET replaced by `ops`.
        let mut s = timed(1000..=1000, seconds, 0.0);
        s.ops = ops
            .into_iter()
            .map(|(op, us)| {
                let mut st = OpStats::default();
                for u in us {
                    st.count += 1;
                    st.latency.record(Duration::from_micros(u));
                }
                (op, st)
            })
            .collect();
        s
    }

    /// `n` latencies spread evenly over `from..to` us.
    fn spread(n: u64, from: u64, to: u64) -> Vec<u64> {
        (0..n).map(|i| from + (to - from) * i / n).collect()
    }

    /// Ten seconds of about `rate` ops: +-1% in a fixed pattern.
    fn ten_seconds(rate: u64) -> Vec<u64> {
        [0i64, 1, -1, 2, -2, 1, 0, -1, 2, -2]
            .iter()
            .map(|d| (rate as i64 + d * rate as i64 / 200) as u64)
            .collect()
    }

    /// New firmware: p50 4 -> 3 ms, p99 5 -> 20 ms (3% of the GETs now take 20 ms), the same
    /// ops/s. `(now, baseline)`.
    pub(crate) fn firmware() -> (Summary, Summary) {
        let base = mixed(
            vec![(OpKind::Get, spread(2000, 3000, 5000))],
            &ten_seconds(200),
        );
        let mut new = spread(1940, 2000, 4000);
        new.extend([20_000; 60]);
        (mixed(vec![(OpKind::Get, new)], &ten_seconds(200)), base)
    }

    #[test]
    fn new_firmware_with_a_faster_median_and_a_four_times_slower_p99_regressed() {
        let (now, base) = firmware();
        let b = compare(&now, &base, "run old", 10.0);
        let get = &b.deltas["get"];
        assert!(
            get.p50_percent < -20.0 && get.p99_percent > 290.0,
            "{get:?}"
        );
        let t = get.p99_test.clone().expect("p99 test");
        assert_eq!((t.test.as_str(), t.significant), ("exceedance", true));
        assert!(
            b.regressions
                .iter()
                .any(|r| r.starts_with("get p99 20.") && r.contains("exceedance p=")),
            "{b:#?}"
        );
        assert!(b.not_significant.is_empty(), "{b:#?}");
    }

    #[test]
    fn a_halved_put_rate_in_a_get_heavy_mix_regressed_though_all_ops_went_up() {
        // 900 GETs and 100 PUTs a second, then 1000 GETs and 50 PUTs: all ops +5%.
        let run = |gets: u64, puts: u64| {
            mixed(
                vec![
                    (OpKind::Get, spread(gets * 10, 1000, 3000)),
                    (OpKind::Put, spread(puts * 10, 4000, 6000)),
                ],
                &ten_seconds(gets + puts),
            )
        };
        let b = compare(&run(1000, 50), &run(900, 100), "run old", 10.0);
        assert_eq!(b.deltas["all"].ops_per_sec_percent, 5.0);
        assert_eq!(b.deltas["put"].ops_per_sec_percent, -50.0);
        let t = b.deltas["put"].ops_per_sec_test.clone().expect("test");
        assert!(t.significant, "{t:?}");
        assert_eq!(b.regressions.len(), 1, "{b:#?}");
        assert!(
            b.regressions[0].starts_with("put ops/s 50.00 vs 100.00 (-50.0%, 95% CI "),
            "{b:#?}"
        );
    }

    #[test]
    fn the_operator_files_what_the_shared_rule_says() {
        // Whatever the rule decides, op by op, is what the status lists: one rule.
        let base = mixed(
            vec![
                (OpKind::Get, spread(9000, 1000, 3000)),
                (OpKind::Put, spread(1000, 4000, 6000)),
            ],
            &ten_seconds(1000),
        );
        let now = mixed(
            vec![
                (OpKind::Get, spread(9000, 1000, 4000)),
                (OpKind::Put, spread(800, 4000, 6000)),
            ],
            &ten_seconds(980),
        );
        let b = compare(&now, &base, "run old", 5.0);
        let (now_e, then_e) = (
            Evidence::of("this run", &now),
            [Evidence::of("run old", &base)],
        );
        let (mut slower, mut noise) = (vec![], vec![]);
        for op in ["all", "get", "put"] {
            for v in verdict::slower(op, &now_e, &then_e, 5.0) {
                match v.outcome {
                    Outcome::Slower => slower.push(v.describe()),
                    Outcome::NotSignificant => noise.push(v.describe()),
                    Outcome::WithinTolerance => {}
                }
            }
        }
        assert!(!slower.is_empty(), "the case must have a regression");
        assert_eq!((b.regressions, b.not_significant), (slower, noise));
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
        // Hodges-Lehmann: the 30 differences of seconds (new minus old) have median -6, and
        // the 4th and 27th (C = floor(15 - 1.96 sqrt(30))) are -9 and -3: over the old median
        // second 20.5, -29.3% in -43.9% to -14.6%.
        let e = t.effect.expect("effect");
        assert!(
            (e.percent + 600.0 / 20.5).abs() < 1e-9
                && (e.low_percent + 900.0 / 20.5).abs() < 1e-9
                && (e.high_percent + 300.0 / 20.5).abs() < 1e-9,
            "{e:?}"
        );
        assert_eq!(t.against, ["the baseline"]);
        let k = get.p99_test.clone().expect("latency test");
        // The old p99 is 1121 us, 1 of 123 above it; 52 of the new 74 (1122..=1173) are:
        // the hypergeometric tail P(X >= 52), X ~ H(197, 53, 74).
        assert!(close(k.p_value, 1.067_587_831_425_460_1e-28), "{k:?}");
        assert_eq!((k.test.as_str(), k.significant), ("exceedance", true));
        assert_eq!(
            b.regressions,
            [
                "all ops/s 14.80 vs 20.50 (-27.8%, 95% CI -43.9% to -14.6%; rank-sum p=0.0043)",
                "all p99 1.173ms vs 1.121ms (+4.6%, 95% CI +4.3% to +4.9%; exceedance p=1.1e-28)",
                "get ops/s 14.80 vs 20.50 (-27.8%, 95% CI -43.9% to -14.6%; rank-sum p=0.0043)",
                "get p99 1.173ms vs 1.121ms (+4.6%, 95% CI +4.3% to +4.9%; exceedance p=1.1e-28)",
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
        assert_eq!(b.not_significant.len(), 2, "{b:#?}");
        for (line, op) in b.not_significant.iter().zip(["all", "get"]) {
            assert!(
                line.starts_with(&format!("{op} ops/s 16.95 vs 20.00 (-15.3%, 95% CI "))
                    && line.ends_with("; rank-sum p=1, not significant)"),
                "{line}"
            );
        }
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
        let samples: Vec<Evidence> = nights
            .iter()
            .enumerate()
            .map(|(i, s)| Evidence::of(format!("run n{i}"), s))
            .collect();
        let figs: Vec<OpFigures> = nights.iter().map(figures).collect();
        let against = |k: usize| {
            compare_figures(
                &figures(&now),
                &median(&figs[..k]),
                &Evidence::of("this run", &now),
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
        assert_eq!(t.against, ["run n0", "run n1"]);
        // The interval spans both runs': -40% to -15% against n0, -43.9% to -14.6% against n1.
        assert_eq!(
            b.regressions[0],
            "all ops/s 14.80 vs 20.25 (-26.9%, 95% CI -43.9% to -14.6%; rank-sum p<=0.008 against each of 2 runs)"
        );
        // With the slow night in the median (p = 1 against it), the figures still cross
        // the tolerance but the change is not significant against every run.
        let b = against(3);
        let t = b.deltas["get"].ops_per_sec_test.clone().expect("test");
        assert!(near(t.p_value, 1.0), "{t:?}");
        assert_eq!((t.runs, t.significant), (3, false));
        assert!(b.regressions.is_empty(), "{b:#?}");
        assert!(
            b.not_significant[0]
                .ends_with("; rank-sum p<=1 against each of 3 runs, not significant)"),
            "{}",
            b.not_significant[0]
        );
        // One run of the median without seconds: not tested, named.
        let mut bare = samples.clone();
        bare[1].per_second.clear();
        let b = compare_figures(
            &figures(&now),
            &median(&figs),
            &Evidence::of("this run", &now),
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
}
