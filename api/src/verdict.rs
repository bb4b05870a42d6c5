//! The one rule of "slower than the baseline", for `benchrun-worker compare --fail-if-slower`,
//! `kubectl benchrun compare --fail-if-slower` (of data-plane and control-plane runs) and the
//! operator's `Regressed` condition (`spec.baselineRef`, scheduled runs).
//!
//! Per op, each figure is judged on its own, by a test about that figure:
//! - **ops/s**: lower than the baseline's by more than the tolerance, and the rank-sum test of
//!   the op's per-second rates says the new seconds are slower (p < 0.01, [`rank_sum`]). The
//!   timeline counts all ops together, so an op's rate in a second is that second's ops times
//!   the op's share of the run's ops: a PUT rate halved in a GET-heavy mix is tested as PUTs,
//!   whatever the GETs did.
//! - **p99**: higher than the baseline's by more than the tolerance, and more of the new run's
//!   operations exceed the baseline's p99 than the baseline's own do (Fisher's exact test,
//!   one-sided, p < 0.01, [`exceed`]): a test of the percentile, not of where two whole
//!   distributions differ most.
//!
//! Against several baseline runs (a median), the figure is the median of theirs and the test
//! must be significant against every one of them. Where a test cannot be made (no full
//! second, too few samples ever to reach p < 0.01), the tolerance alone decides and the
//! verdict says why. Each verdict carries its effect size, a 95% confidence interval and the
//! baseline runs it was measured against.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::latency::Latency;
use crate::significance::{exceed, ops_per_second, rank_sum, STRONG};
use crate::stats::Summary;

/// The percentile judged beside ops/s.
pub const PERCENTILE: f64 = 0.99;

/// Two-sided normal quantile of the 95% intervals.
const Z_95: f64 = 1.959_963_984_540_054;

/// Two-sided normal quantile of 97.5%: a percentile's interval on each side, so that the pair
/// (and the ratio built from their ends) covers at least 95%.
const Z_97_5: f64 = 2.241_402_727_604_947;

/// A run's latencies of one op: a histogram, or only percentiles reported from one (a
/// control-plane run's status keeps p50, p95, p99 and max, not the histogram).
#[derive(Clone, Debug)]
pub enum Tail {
    /// Every sample, in the project's HDR histogram.
    Histogram(Latency),
    /// The sample count and some `(quantile, ms)` points (the maximum as quantile 1).
    Reported {
        /// Samples.
        count: u64,
        /// `(quantile, ms)`, in any order.
        points: Vec<(f64, f64)>,
    },
}

impl Default for Tail {
    fn default() -> Self {
        Tail::Histogram(Latency::default())
    }
}

impl Tail {
    /// Samples.
    pub fn count(&self) -> u64 {
        match self {
            Tail::Histogram(h) => h.count(),
            Tail::Reported { count, .. } => *count,
        }
    }

    /// The value at quantile `q`, ms (a reported tail: only a quantile it reports).
    pub fn value_ms(&self, q: f64) -> Option<f64> {
        match self {
            Tail::Histogram(h) if h.count() > 0 => Some(h.quantile_us(q) as f64 / 1000.0),
            Tail::Histogram(_) => None,
            Tail::Reported { points, .. } => points
                .iter()
                .find(|(pq, _)| (pq - q).abs() < 1e-12)
                .map(|p| p.1),
        }
    }

    /// Samples above `t_ms`, as `(at least, at most)`: exact for a histogram (HDR buckets
    /// compared by their highest value, the same buckets on both sides); for reported
    /// percentiles, the bounds they imply. A quantile `q` reported at `v` means
    /// `ceil(q n)` samples are at most `v` and fewer than that are below it, so at least
    /// `n - ceil(q n) + 1` are at `v` or above.
    pub fn above(&self, t_ms: f64) -> (u64, u64) {
        match self {
            Tail::Histogram(h) => {
                let t_us = (t_ms * 1000.0).round() as u64;
                let n =
                    h.0.iter_recorded()
                        .filter(|v| h.0.highest_equivalent(v.value_iterated_to()) > t_us)
                        .map(|v| v.count_at_value())
                        .sum();
                (n, n)
            }
            Tail::Reported { count, points } => {
                let n = *count;
                let rank = |q: f64| ((q * n as f64) - 1e-9).ceil().clamp(0.0, n as f64) as u64;
                let least = points
                    .iter()
                    .filter(|(_, v)| *v > t_ms)
                    .map(|(q, _)| n - rank(*q) + 1)
                    .max()
                    .unwrap_or(0)
                    .min(n);
                let most = points
                    .iter()
                    .filter(|(_, v)| *v <= t_ms)
                    .map(|(q, _)| n - rank(*q))
                    .min()
                    .unwrap_or(n);
                (least, most.max(least))
            }
        }
    }

    /// A confidence interval of the quantile `q`, ms, from the order statistics around rank
    /// `q n` (`z` normal quantile); `None` for reported percentiles (no order statistics).
    fn interval_ms(&self, q: f64, z: f64) -> Option<(f64, f64)> {
        let Tail::Histogram(h) = self else {
            return None;
        };
        let n = h.count();
        if n == 0 {
            return None;
        }
        let nf = n as f64;
        let half = z * (nf * q * (1.0 - q)).sqrt();
        let lo = ((nf * q - half).floor() as u64).clamp(1, n);
        let hi = ((nf * q + half).ceil() as u64 + 1).clamp(1, n);
        Some((rank_ms(h, lo)?, rank_ms(h, hi)?))
    }
}

/// The `r`-th smallest sample (1-based), ms, at its bucket's highest value.
fn rank_ms(h: &Latency, r: u64) -> Option<f64> {
    let mut seen = 0;
    h.0.iter_recorded().find_map(|v| {
        seen += v.count_at_value();
        (seen >= r).then(|| h.0.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0)
    })
}

/// What one run offers the rule for one op.
#[derive(Clone, Debug, Default)]
pub struct OpEvidence {
    /// Operations completed, successful or not: the op's share of the run's operations.
    pub count: u64,
    /// Operations per second over the measured stage; `None` where the run measures no rate
    /// (a control-plane run's operations).
    pub ops_per_sec: Option<f64>,
    /// The successful operations' latencies.
    pub latency: Tail,
}

/// What one run offers the rule: per op (and `all`), and its per-second throughput.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    /// How verdicts name it (`run NAME`, `configmap NAME/KEY`, `this run`, a file name).
    pub name: String,
    /// Operations per second (all ops) of each full second of the measured stage.
    pub per_second: Vec<f64>,
    /// Operations completed (all ops), the denominator of an op's share.
    pub total: u64,
    /// Per op and `all`.
    pub ops: BTreeMap<String, OpEvidence>,
}

impl Evidence {
    /// The evidence of `summary`, named `name` (taken out of it, so a median of 20 runs does
    /// not hold 20 summaries).
    pub fn of(name: impl Into<String>, summary: &Summary) -> Self {
        let elapsed = summary.elapsed_seconds;
        let one = |s: &crate::stats::OpStats| OpEvidence {
            count: s.count,
            ops_per_sec: Some(s.report(elapsed).ops_per_sec),
            latency: Tail::Histogram(s.latency.clone()),
        };
        let mut ops: BTreeMap<String, OpEvidence> = summary
            .ops
            .iter()
            .map(|(op, s)| (op.to_string(), one(s)))
            .collect();
        let total = summary.total();
        ops.insert("all".into(), one(&total));
        Evidence {
            name: name.into(),
            per_second: ops_per_second(summary),
            total: total.count,
            ops,
        }
    }

    /// The op's rate in each full second: the second's ops times the op's share of the run's
    /// ops (the timeline is not kept per op). Empty without a timeline or an op count.
    pub fn op_per_second(&self, op: &str) -> Vec<f64> {
        let share = match self.ops.get(op) {
            _ if op == "all" => 1.0,
            Some(e) if self.total > 0 => e.count as f64 / self.total as f64,
            _ => return vec![],
        };
        self.per_second.iter().map(|s| s * share).collect()
    }
}

/// The figure a verdict is about.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Figure {
    /// Operations per second (lower is slower).
    OpsPerSec,
    /// The 99th percentile latency (higher is slower).
    P99,
}

impl Figure {
    /// `ops/s`, `p99`.
    pub fn name(self) -> &'static str {
        match self {
            Figure::OpsPerSec => "ops/s",
            Figure::P99 => "p99",
        }
    }
}

/// What the rule says of one figure of one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Not worse than the baseline by more than the tolerance.
    WithinTolerance,
    /// Worse by more than the tolerance, but the test cannot tell it from noise.
    NotSignificant,
    /// Slower: worse by more than the tolerance, and the test confirms it (or could not be
    /// made, and the tolerance alone decided).
    Slower,
}

/// The test of one figure against the baseline: one test per baseline run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Test {
    /// `rank-sum` (the op's per-second rates) or `exceedance` (samples above the baseline's
    /// p99, Fisher's exact test).
    pub name: String,
    /// The largest p-value of the tests; `None` when not tested.
    pub p_value: Option<f64>,
    /// Tests made (one per baseline run; 0 when not tested).
    pub runs: u32,
    /// Every test had p < 0.01 with this run on the slower side.
    pub significant: bool,
    /// Why no test was made.
    pub not_tested: Option<String>,
}

/// A relative change and its 95% confidence interval, in percent of the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Effect {
    /// The estimate: for ops/s the median difference of the op's per-second rates (new minus
    /// baseline, Hodges-Lehmann) over the baseline's median second; for p99 the change of the
    /// p99 itself.
    pub percent: f64,
    /// The interval's lower end.
    pub low_percent: f64,
    /// The interval's upper end.
    pub high_percent: f64,
}

/// The verdict on one figure of one op.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The op (`get`, `put`, `all`, a control-plane operation).
    pub op: String,
    /// The figure.
    pub figure: Figure,
    /// This run's value (ops/s, or ms).
    pub now: f64,
    /// The baseline's value (the median of its runs').
    pub baseline: f64,
    /// `(now - baseline) / baseline` in percent, rounded to 0.1: what the tolerance is
    /// applied to.
    pub change_percent: f64,
    /// The effect as the test's samples estimate it, with its 95% interval; `None` where the
    /// samples cannot give one (too few seconds, reported percentiles only). Against several
    /// baseline runs, the interval spans every run's.
    pub effect: Option<Effect>,
    /// The significance test.
    pub test: Test,
    /// The baseline runs it was measured against.
    pub against: Vec<String>,
    /// The rule's answer.
    pub outcome: Outcome,
}

impl Verdict {
    /// Slower than the baseline.
    pub fn is_slower(&self) -> bool {
        self.outcome == Outcome::Slower
    }

    /// `get ops/s 14.80 vs 20.50 (-27.8%, 95% CI -31.0% to -24.2%; rank-sum p=0.0043)`.
    pub fn describe(&self) -> String {
        let (now, base) = match self.figure {
            Figure::OpsPerSec => (format!("{:.2}", self.now), format!("{:.2}", self.baseline)),
            Figure::P99 => (
                format!("{:.3}ms", self.now),
                format!("{:.3}ms", self.baseline),
            ),
        };
        let ci = self.effect.map_or(String::new(), |e| {
            format!(", 95% CI {:+.1}% to {:+.1}%", e.low_percent, e.high_percent)
        });
        format!(
            "{} {} {now} vs {base} ({:+.1}%{ci}; {})",
            self.op,
            self.figure.name(),
            self.change_percent,
            test_note(&self.test)
        )
    }
}

/// The two figures the rule judges of one op, each `(now, baseline)`; `None` where a side
/// has no such figure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    /// Operations per second.
    pub ops_per_sec: Option<(f64, f64)>,
    /// The 99th percentile latency, ms.
    pub p99_ms: Option<(f64, f64)>,
}

impl Figures {
    /// The figures of `op` in `now` and the median of `then`'s (each run that has it).
    pub fn of(op: &str, now: &Evidence, then: &[Evidence]) -> Self {
        let Some(n) = now.ops.get(op) else {
            return Figures::default();
        };
        let of_then = |f: &dyn Fn(&OpEvidence) -> Option<f64>| {
            median(
                then.iter()
                    .filter_map(|t| t.ops.get(op).and_then(f))
                    .collect(),
            )
        };
        Figures {
            ops_per_sec: n.ops_per_sec.zip(of_then(&|e: &OpEvidence| e.ops_per_sec)),
            p99_ms: n
                .latency
                .value_ms(PERCENTILE)
                .zip(of_then(&|e: &OpEvidence| e.latency.value_ms(PERCENTILE))),
        }
    }
}

/// The rule on one op: ops/s (where both sides measure a rate) and p99, each against the
/// median of `then`'s figures, with `tolerance_percent`.
pub fn slower(op: &str, now: &Evidence, then: &[Evidence], tolerance_percent: f64) -> Vec<Verdict> {
    judge(op, Figures::of(op, now, then), now, then, tolerance_percent)
}

/// [`slower`] with the figures given (a caller that keeps its own, rounded as it shows them).
pub fn judge(
    op: &str,
    figures: Figures,
    now: &Evidence,
    then: &[Evidence],
    tolerance_percent: f64,
) -> Vec<Verdict> {
    let mut out = vec![];
    if let Some((v, b)) = figures.ops_per_sec {
        out.push(ops_per_sec(op, v, b, now, then, tolerance_percent));
    }
    if let Some((v, b)) = figures.p99_ms {
        out.push(p99(op, v, b, now, then, tolerance_percent));
    }
    out
}

/// The ops/s verdict of `op`: `now_value` against `base_value`, the rank-sum test of the op's
/// per-second rates against each of `then`.
pub fn ops_per_sec(
    op: &str,
    now_value: f64,
    base_value: f64,
    now: &Evidence,
    then: &[Evidence],
    tolerance_percent: f64,
) -> Verdict {
    let mine = now.op_per_second(op);
    let mut effects = vec![];
    let results = then
        .iter()
        .map(|b| {
            let theirs = b.op_per_second(op);
            let (n, m) = (theirs.len(), mine.len());
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
            let t =
                rank_sum::mann_whitney(&theirs, &mine).ok_or_else(|| format!("no {op} seconds"))?;
            effects.push(shift_effect(&theirs, &mine));
            // U counts the pairs with the baseline's second the faster.
            Ok((t.p_value, t.u > (n * m) as f64 / 2.0))
        })
        .collect();
    let change = percent(now_value, base_value);
    let test = combine("rank-sum", results);
    Verdict {
        op: op.into(),
        figure: Figure::OpsPerSec,
        now: now_value,
        baseline: base_value,
        change_percent: change,
        effect: envelope(&effects),
        outcome: outcome(-change, &test, tolerance_percent),
        test,
        against: then.iter().map(|b| b.name.clone()).collect(),
    }
}

/// The p99 verdict of `op`: `now_value` against `base_value` (ms), the exceedance test of the
/// new run's samples above each baseline run's own p99.
pub fn p99(
    op: &str,
    now_value: f64,
    base_value: f64,
    now: &Evidence,
    then: &[Evidence],
    tolerance_percent: f64,
) -> Verdict {
    let q = PERCENTILE;
    let mine = now.ops.get(op).map(|e| &e.latency);
    let mut effects = vec![];
    let results = then
        .iter()
        .map(|b| {
            let theirs = b.ops.get(op).map(|e| &e.latency);
            let (n, m) = (theirs.map_or(0, Tail::count), mine.map_or(0, Tail::count));
            let (Some(theirs), Some(mine)) = (theirs.filter(|_| n > 0), mine.filter(|_| m > 0))
            else {
                let who = if m == 0 { &now.name } else { &b.name };
                return Err(format!("{who} has no successful {op} op"));
            };
            if exceed::smallest_p(q, n, m) >= STRONG {
                return Err(format!(
                    "{m} {op} ops in {} and {n} in {} cannot reach p < 0.01",
                    now.name, b.name
                ));
            }
            let t_ms = theirs
                .value_ms(q)
                .ok_or_else(|| format!("{} reports no {op} p99", b.name))?;
            // Conservative where only percentiles are known: the most the baseline may
            // exceed its own p99, the least the new run must.
            let (_, k0) = theirs.above(t_ms);
            let (k1, _) = mine.above(t_ms);
            let t = exceed::test(k0, n, k1, m).ok_or_else(|| format!("no {op} latency"))?;
            effects.push(percentile_effect(q, theirs, mine));
            Ok((t.p_value, true))
        })
        .collect();
    let change = percent(now_value, base_value);
    let test = combine("exceedance", results);
    Verdict {
        op: op.into(),
        figure: Figure::P99,
        now: now_value,
        baseline: base_value,
        change_percent: change,
        effect: envelope(&effects),
        outcome: outcome(change, &test, tolerance_percent),
        test,
        against: then.iter().map(|b| b.name.clone()).collect(),
    }
}

/// The outcome of a change `worse_percent` (positive: worse) beyond the tolerance or not.
fn outcome(worse_percent: f64, test: &Test, tolerance_percent: f64) -> Outcome {
    if worse_percent <= tolerance_percent {
        Outcome::WithinTolerance
    } else if test.significant || test.not_tested.is_some() {
        Outcome::Slower
    } else {
        Outcome::NotSignificant
    }
}

/// The Hodges-Lehmann shift of the op's seconds relative to the baseline's median second.
fn shift_effect(theirs: &[f64], mine: &[f64]) -> Option<Effect> {
    let base = median(theirs.to_vec()).filter(|b| *b > 0.0)?;
    let s = rank_sum::shift(theirs, mine, Z_95)?;
    let pct = |x: f64| x / base * 100.0;
    Some(Effect {
        percent: pct(s.estimate),
        low_percent: pct(s.low),
        high_percent: pct(s.high),
    })
}

/// The change of the percentile, and an interval from each side's 97.5% order-statistic
/// interval (their ends' ratios: together at least 95%).
fn percentile_effect(q: f64, theirs: &Tail, mine: &Tail) -> Option<Effect> {
    let (b, n) = (theirs.value_ms(q)?, mine.value_ms(q)?);
    let (b_lo, b_hi) = theirs.interval_ms(q, Z_97_5)?;
    let (n_lo, n_hi) = mine.interval_ms(q, Z_97_5)?;
    if b <= 0.0 || b_lo <= 0.0 || b_hi <= 0.0 {
        return None;
    }
    Some(Effect {
        percent: (n / b - 1.0) * 100.0,
        low_percent: (n_lo / b_hi - 1.0) * 100.0,
        high_percent: (n_hi / b_lo - 1.0) * 100.0,
    })
}

/// Against several runs: the estimate of the first and an interval spanning every run's;
/// `None` when any run has none.
fn envelope(effects: &[Option<Effect>]) -> Option<Effect> {
    let all: Option<Vec<Effect>> = effects.iter().copied().collect();
    let all = all?;
    let first = *all.first()?;
    Some(Effect {
        percent: if all.len() == 1 {
            first.percent
        } else {
            median(all.iter().map(|e| e.percent).collect()).unwrap_or(first.percent)
        },
        low_percent: all.iter().map(|e| e.low_percent).fold(f64::MAX, f64::min),
        high_percent: all.iter().map(|e| e.high_percent).fold(f64::MIN, f64::max),
    })
}

/// One test per baseline run, each `(p, this run on the slower side)` or why it could not be
/// made, into one [`Test`]: not tested if any could not be made, else its largest p-value and
/// whether every one is significant on the slower side.
fn combine(name: &str, results: Vec<Result<(f64, bool), String>>) -> Test {
    let mut t = Test {
        name: name.into(),
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
    t.significant = ok.iter().all(|(p, slower)| *p < STRONG && *slower);
    t
}

/// The median (the mean of the middle two for an even count); `None` when empty.
pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    match xs.len() {
        0 => None,
        n if n % 2 == 1 => Some(xs[n / 2]),
        n => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

/// `(now - then) / then` in percent, rounded to 0.1; 0 when both are 0, +100% when only the
/// baseline is 0 (something that was free now costs).
pub fn percent(now: f64, then: f64) -> f64 {
    match crate::change::percent(then, now) {
        Some(p) => p,
        None if now == 0.0 => 0.0,
        None => 100.0,
    }
}

/// `rank-sum p=0.0043`, `exceedance p<=3.1e-9 against each of 3 runs`, `not tested: why`.
pub fn test_note(t: &Test) -> String {
    let verdict = if t.significant {
        ""
    } else {
        ", not significant"
    };
    match (t.p_value, &t.not_tested) {
        (_, Some(why)) => format!("not tested: {why}"),
        (Some(p), None) if t.runs > 1 => format!(
            "{} p{} against each of {} runs{verdict}",
            t.name,
            p_is(p, "<="),
            t.runs
        ),
        (Some(p), None) => format!("{} p{}{verdict}", t.name, p_is(p, "=")),
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
pub fn p_text(p: f64) -> String {
    if p >= 0.001 {
        let decimals = (1 - p.log10().floor() as i32).max(0) as usize;
        let s = format!("{p:.decimals$}");
        let s = s.trim_end_matches('0');
        s.trim_end_matches('.').to_string()
    } else {
        format!("{p:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::significance::ks;
    use crate::spec::OpKind;
    use crate::stats::OpStats;
    use crate::timeline::Second;

    /// A standard normal draw (Box-Muller).
    fn normal(rng: &mut rand::rngs::SmallRng) -> f64 {
        let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// `n` latencies (us) around `median_ms`, spread by `sigma` (log-normal).
    fn latencies(rng: &mut rand::rngs::SmallRng, n: usize, median_ms: f64, sigma: f64) -> Vec<u64> {
        (0..n)
            .map(|_| (median_ms * 1000.0 * (sigma * normal(rng)).exp()) as u64)
            .collect()
    }

    /// `seconds` full seconds of about `rate` ops each (2% noise).
    fn seconds(rng: &mut rand::rngs::SmallRng, n: usize, rate: f64) -> Vec<u64> {
        (0..n)
            .map(|_| (rate * (1.0 + 0.02 * normal(rng))).round() as u64)
            .collect()
    }

    /// A summary of these ops (each with its latencies, us) over these full seconds.
    fn summary(ops: Vec<(OpKind, Vec<u64>)>, per_second: &[u64]) -> Summary {
        Summary {
            elapsed_seconds: per_second.len() as f64,
            ops: ops
                .into_iter()
                .map(|(op, us)| {
                    let mut s = OpStats::default();
                    for u in us {
                        s.count += 1;
                        s.latency.record(Duration::from_micros(u));
                    }
                    (op, s)
                })
                .collect(),
            timeline: per_second
                .iter()
                .enumerate()
                .map(|(i, n)| Second {
                    second: i as u64,
                    ops: *n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn verdict(vs: &[Verdict], figure: Figure) -> &Verdict {
        vs.iter().find(|v| v.figure == figure).expect("verdict")
    }

    #[test]
    fn a_faster_median_does_not_hide_a_four_times_slower_p99() {
        // New firmware: p50 4 -> 3 ms, p99 5 -> 20 ms (3% of the GETs now take about 20 ms).
        let mut rng = rand::rngs::SmallRng::seed_from_u64(47);
        let base_lat = latencies(&mut rng, 20_000, 4.0, 0.1);
        let mut new_lat = latencies(&mut rng, 19_400, 3.0, 0.1);
        new_lat.extend(latencies(&mut rng, 600, 20.0, 0.05));
        let base_s = seconds(&mut rng, 10, 2000.0);
        let new_s = seconds(&mut rng, 10, 2000.0);
        let base = Evidence::of("run old", &summary(vec![(OpKind::Get, base_lat)], &base_s));
        let now = Evidence::of("this run", &summary(vec![(OpKind::Get, new_lat)], &new_s));
        let (Tail::Histogram(b), Tail::Histogram(n)) =
            (&base.ops["get"].latency, &now.ops["get"].latency)
        else {
            panic!("histograms")
        };
        assert!((b.quantile_us(0.5) as f64 / 1000.0 - 4.0).abs() < 0.1);
        assert!((n.quantile_us(0.5) as f64 / 1000.0 - 3.0).abs() < 0.1);
        // The whole distributions differ most where the new run is faster: a test of that
        // maximum says nothing of the tail.
        let k = ks::two_sample(&b.0, &n.0).expect("ks");
        assert!(!k.second_slower, "{k:?}");

        let vs = slower("get", &now, std::slice::from_ref(&base), 10.0);
        let p99 = verdict(&vs, Figure::P99);
        assert!(p99.change_percent > 250.0, "{p99:?}");
        assert_eq!(p99.outcome, Outcome::Slower, "{p99:?}");
        assert_eq!(p99.test.name, "exceedance");
        assert!(p99.test.p_value.is_some_and(|p| p < 1e-20), "{p99:?}");
        assert_eq!(p99.against, ["run old"]);
        // The interval of the change lies wholly above the tolerance and holds the estimate.
        let e = p99.effect.expect("effect");
        assert!(e.low_percent > 100.0 && e.low_percent <= e.percent, "{e:?}");
        assert!(e.high_percent >= e.percent, "{e:?}");
        assert!(p99.describe().starts_with("get p99 "), "{}", p99.describe());
        // The same ops/s: not slower.
        assert_eq!(
            verdict(&vs, Figure::OpsPerSec).outcome,
            Outcome::WithinTolerance
        );
    }

    #[test]
    fn a_halved_put_rate_in_a_get_heavy_mix_is_judged_as_puts() {
        // 90% GETs and 10% PUTs at 1000 ops/s, then more GETs and half the PUTs: all ops
        // went up by 5%.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mix = |rng: &mut rand::rngs::SmallRng, gets: usize, puts: usize, rate: f64| {
            let s = seconds(rng, 10, rate);
            summary(
                vec![
                    (OpKind::Get, latencies(rng, gets, 2.0, 0.2)),
                    (OpKind::Put, latencies(rng, puts, 5.0, 0.2)),
                ],
                &s,
            )
        };
        let base = Evidence::of("run old", &mix(&mut rng, 9000, 1000, 1000.0));
        let now = Evidence::of("this run", &mix(&mut rng, 10_000, 500, 1050.0));
        let then = [base];
        let put = slower("put", &now, &then, 10.0);
        let ops = verdict(&put, Figure::OpsPerSec);
        assert_eq!(ops.change_percent, -50.0);
        assert_eq!(ops.outcome, Outcome::Slower, "{ops:?}");
        assert!(ops.test.significant && ops.test.runs == 1, "{ops:?}");
        // Each second's PUTs, about 100 then 50: the interval is around -50%.
        let e = ops.effect.expect("effect");
        assert!(e.low_percent < -45.0 && e.high_percent > -55.0, "{e:?}");
        assert!(e.high_percent < -40.0, "{e:?}");
        // The GETs and all ops got faster: not slower.
        for op in ["get", "all"] {
            let v = slower(op, &now, &then, 10.0);
            assert_eq!(
                verdict(&v, Figure::OpsPerSec).outcome,
                Outcome::WithinTolerance,
                "{op}"
            );
        }
    }

    #[test]
    fn the_same_storage_measured_twice_is_not_slower() {
        // Two runs of one distribution (different draws): whatever moved is noise. With a
        // tolerance of 0 every worse figure goes to the tests, and they must say noise.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2026);
        let run = |rng: &mut rand::rngs::SmallRng| {
            let s = seconds(rng, 20, 500.0);
            summary(vec![(OpKind::Get, latencies(rng, 10_000, 4.0, 0.3))], &s)
        };
        let base = Evidence::of("run old", &run(&mut rng));
        let now = Evidence::of("this run", &run(&mut rng));
        let vs = slower("get", &now, std::slice::from_ref(&base), 0.0);
        assert_eq!(vs.len(), 2);
        for v in &vs {
            assert_ne!(v.outcome, Outcome::Slower, "{v:?}");
            assert!(v.test.p_value.is_some_and(|p| p >= STRONG), "{v:?}");
            // The interval of a change that is noise holds no change.
            let e = v.effect.expect("effect");
            assert!(e.low_percent < 0.0 && e.high_percent > 0.0, "{v:?}");
        }
    }

    #[test]
    fn reported_percentiles_are_tested_with_the_bounds_they_imply() {
        // 20 lifecycles each. B's p50 above A's max: at least 11 of B's above A's p99, at
        // most 0 of A's: p = C(20, 11) / C(40, 11).
        let side = |name: &str, p50: f64, p95: f64, p99: f64| Evidence {
            name: name.into(),
            ops: [(
                "provision".to_string(),
                OpEvidence {
                    count: 20,
                    ops_per_sec: None,
                    latency: Tail::Reported {
                        count: 20,
                        points: vec![(0.5, p50), (0.95, p95), (0.99, p99), (1.0, p99)],
                    },
                },
            )]
            .into(),
            ..Default::default()
        };
        let a = side("a", 100.0, 200.0, 300.0);
        let b = side("b", 400.0, 450.0, 450.0);
        let vs = slower("provision", &b, std::slice::from_ref(&a), 10.0);
        assert_eq!(vs.len(), 1, "no rate: p99 alone");
        let v = &vs[0];
        assert_eq!((v.figure, v.change_percent), (Figure::P99, 50.0));
        let want = 167_960.0 / 2_311_801_440.0;
        assert!(
            v.test
                .p_value
                .is_some_and(|p| ((p - want) / want).abs() < 1e-9),
            "{v:?}"
        );
        assert_eq!(v.outcome, Outcome::Slower);
        assert!(v.effect.is_none(), "no order statistics, no interval");
        // Only the tail moved (B's p95 below A's p99): at least 1 of B's above, not enough:
        // p = P(X >= 1) with one exceedance in 40 = 20 / 40.
        let b = side("b", 100.0, 200.0, 450.0);
        let v = &slower("provision", &b, std::slice::from_ref(&a), 10.0)[0];
        assert_eq!(v.outcome, Outcome::NotSignificant, "{v:?}");
        assert_eq!(
            v.describe(),
            "provision p99 450.000ms vs 300.000ms (+50.0%; exceedance p=0.5, not significant)"
        );
    }

    #[test]
    fn without_a_test_the_tolerance_alone_decides_and_says_why() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let base = summary(
            vec![(OpKind::Get, latencies(&mut rng, 100, 4.0, 0.1))],
            &[50, 50],
        );
        let now = summary(
            vec![(OpKind::Get, latencies(&mut rng, 50, 4.0, 0.1))],
            &[25, 25],
        );
        let vs = slower(
            "get",
            &Evidence::of("this run", &now),
            &[Evidence::of("run old", &base)],
            10.0,
        );
        let v = verdict(&vs, Figure::OpsPerSec);
        assert_eq!(v.outcome, Outcome::Slower);
        assert_eq!(
            v.test.not_tested.as_deref(),
            Some("2 full seconds in this run and 2 in run old cannot reach p < 0.01 (5 and 5 can)")
        );
        assert!(v.effect.is_none());
        assert_eq!(
            combine("rank-sum", vec![]).not_tested.as_deref(),
            Some("no baseline run to test against")
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
