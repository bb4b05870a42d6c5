//! Two-sample Kolmogorov-Smirnov test on two latency histograms.
//!
//! Means and percentiles say *how much* two runs differ; whether the difference could be
//! noise is a question about the whole distributions. The summaries keep every latency in
//! an HDR histogram, so the test runs on all samples, not on a few percentiles: D is the
//! largest distance between the two empirical CDFs, evaluated at every bucket edge.
//!
//! Both histograms of a summary have the same buckets (3 significant digits), so the CDFs are
//! exact at every edge; within a bucket values are equal for the test (ties), which can only
//! make D smaller (conservative). Latencies of one run are not independent samples (a slow
//! second slows many operations), so with millions of operations the p-value is optimistic:
//! read D (the effect size) beside it.

use hdrhistogram::Histogram;
use serde::Serialize;

/// The result of the test.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KsTest {
    /// Samples of the first distribution.
    pub n: u64,
    /// Samples of the second distribution.
    pub m: u64,
    /// Largest distance between the two empirical CDFs (0 = same, 1 = disjoint).
    pub d: f64,
    /// The latency where that distance is largest, in microseconds.
    pub at_us: u64,
    /// Whether the second distribution is the slower one at that point (its CDF is below).
    pub second_slower: bool,
    /// Probability of a D at least this large if both came from one distribution
    /// (asymptotic Kolmogorov distribution with Stephens' small-sample correction).
    pub p_value: f64,
    /// D above which the difference is significant at the 5% level.
    pub critical_d_5pct: f64,
    /// D above which the difference is significant at the 1% level.
    pub critical_d_1pct: f64,
}

/// Test two histograms; `None` when either is empty.
pub fn two_sample(a: &Histogram<u64>, b: &Histogram<u64>) -> Option<KsTest> {
    let pairs = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
        h.iter_recorded()
            .map(|v| {
                (
                    h.highest_equivalent(v.value_iterated_to()),
                    v.count_at_value(),
                )
            })
            .collect()
    };
    test(&pairs(a), &pairs(b))
}

/// Test two samples given as `(value, count)` pairs sorted by value; `None` when either is
/// empty.
pub fn test(a: &[(u64, u64)], b: &[(u64, u64)]) -> Option<KsTest> {
    let n: u64 = a.iter().map(|p| p.1).sum();
    let m: u64 = b.iter().map(|p| p.1).sum();
    if n == 0 || m == 0 {
        return None;
    }
    let (mut i, mut j) = (0, 0);
    let (mut ca, mut cb) = (0u64, 0u64);
    let (mut d, mut at_us, mut second_slower) = (0.0f64, 0, false);
    while i < a.len() || j < b.len() {
        // The next value in either sample; every count at it is added before comparing.
        let v = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.0.min(y.0),
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (None, None) => break,
        };
        while let Some(x) = a.get(i).filter(|x| x.0 == v) {
            ca += x.1;
            i += 1;
        }
        while let Some(y) = b.get(j).filter(|y| y.0 == v) {
            cb += y.1;
            j += 1;
        }
        let (fa, fb) = (ca as f64 / n as f64, cb as f64 / m as f64);
        if (fa - fb).abs() > d {
            d = (fa - fb).abs();
            at_us = v;
            second_slower = fb < fa;
        }
    }
    let (nf, mf) = (n as f64, m as f64);
    let ne = nf * mf / (nf + mf);
    let lambda = (ne.sqrt() + 0.12 + 0.11 / ne.sqrt()) * d;
    let scale = ((nf + mf) / (nf * mf)).sqrt();
    Some(KsTest {
        n,
        m,
        d,
        at_us,
        second_slower,
        p_value: kolmogorov_q(lambda),
        critical_d_5pct: critical_coefficient(0.05) * scale,
        critical_d_1pct: critical_coefficient(0.01) * scale,
    })
}

/// The smallest p-value the test can give with `n` and `m` samples: that of two disjoint
/// samples (D = 1); 1 when either is empty.
pub fn smallest_p(n: u64, m: u64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let (nf, mf) = (n as f64, m as f64);
    let ne = nf * mf / (nf + mf);
    kolmogorov_q(ne.sqrt() + 0.12 + 0.11 / ne.sqrt())
}

/// `c(alpha)` of the two-sample critical value `c(alpha) * sqrt((n + m) / (n m))`:
/// `sqrt(-ln(alpha / 2) / 2)` (1.358 at 5%, 1.628 at 1%).
pub fn critical_coefficient(alpha: f64) -> f64 {
    (-(alpha / 2.0).ln() / 2.0).sqrt()
}

/// The Kolmogorov distribution's tail `Q(lambda) = P(K > lambda)
/// = 2 sum_{j>=1} (-1)^(j-1) exp(-2 j^2 lambda^2)`.
///
/// That series converges slowly for small lambda; there the equivalent
/// `1 - sqrt(2 pi) / lambda sum_{j>=1} exp(-(2j-1)^2 pi^2 / (8 lambda^2))` converges fast.
pub fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 1.0;
    }
    if lambda < 1.18 {
        let x = -std::f64::consts::PI.powi(2) / (8.0 * lambda * lambda);
        let s: f64 = (1..=5)
            .map(|j| {
                let k = (2 * j - 1) as f64;
                (k * k * x).exp()
            })
            .sum();
        (1.0 - (2.0 * std::f64::consts::PI).sqrt() / lambda * s).clamp(0.0, 1.0)
    } else {
        let mut s = 0.0;
        for j in 1..=100 {
            let jf = j as f64;
            let term = (-2.0 * jf * jf * lambda * lambda).exp();
            s += if j % 2 == 1 { term } else { -term };
            if term < 1e-300 {
                break;
            }
        }
        (2.0 * s).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(from: u64, to: u64) -> Vec<(u64, u64)> {
        (from..=to).map(|v| (v, 1)).collect()
    }

    #[test]
    fn the_kolmogorov_tail_matches_the_published_critical_values() {
        // Smirnov's table: P(K > 1.2238) = 0.10, P(K > 1.3581) = 0.05, P(K > 1.6276) = 0.01.
        assert!((kolmogorov_q(1.2238) - 0.10).abs() < 1e-4);
        assert!((kolmogorov_q(1.3581) - 0.05).abs() < 1e-4);
        assert!((kolmogorov_q(1.6276) - 0.01).abs() < 1e-4);
        // Both series agree where they meet, and the median of K is 0.8276.
        assert!((kolmogorov_q(1.179_999) - kolmogorov_q(1.180_001)).abs() < 1e-5);
        assert!((kolmogorov_q(0.8276) - 0.5).abs() < 1e-4);
        assert_eq!(kolmogorov_q(0.0), 1.0);
        assert!(kolmogorov_q(0.2) > 0.999_999);
        assert!(kolmogorov_q(6.0) < 1e-30);
        assert!((critical_coefficient(0.05) - 1.358_1).abs() < 1e-4);
        assert!((critical_coefficient(0.01) - 1.627_6).abs() < 1e-4);
    }

    #[test]
    fn identical_samples_have_d_zero_and_p_one() {
        let t = test(&uniform(1, 100), &uniform(1, 100)).unwrap();
        assert_eq!((t.n, t.m, t.d, t.p_value), (100, 100, 0.0, 1.0));
    }

    #[test]
    fn shifted_uniforms_have_the_exact_d() {
        // 1..=100 against 51..=150: at 50 the first CDF is 0.5, the second 0: D = 0.5,
        // and the second is the slower one.
        let t = test(&uniform(1, 100), &uniform(51, 150)).unwrap();
        assert_eq!(t.d, 0.5);
        assert_eq!(t.at_us, 50);
        assert!(t.second_slower);
        // ne = 50, lambda = (sqrt(50) + 0.12 + 0.11 / sqrt(50)) * 0.5 = 3.60331,
        // Q = 2 exp(-2 lambda^2) (later terms below 1e-100).
        let lambda: f64 = (50f64.sqrt() + 0.12 + 0.11 / 50f64.sqrt()) * 0.5;
        let q = 2.0 * (-2.0 * lambda * lambda).exp();
        assert!((t.p_value - q).abs() / q < 1e-12, "{} vs {q}", t.p_value);
        assert!((t.p_value - 1.0553e-11).abs() < 0.0001e-11, "{}", t.p_value);
        // Critical D at 1%: 1.6276 * sqrt(200 / 10000) = 0.2302.
        assert!((t.critical_d_1pct - 0.2302).abs() < 1e-4);
        // The other way round, the first is the slower one.
        assert!(
            !test(&uniform(51, 150), &uniform(1, 100))
                .unwrap()
                .second_slower
        );
    }

    #[test]
    fn disjoint_samples_have_d_one_and_counts_weigh_in() {
        let t = test(&[(10, 3)], &[(20, 5)]).unwrap();
        assert_eq!((t.n, t.m, t.d, t.at_us), (3, 5, 1.0, 10));
        // Weighted: a = {1 x 9, 5 x 1}, b = {1 x 1, 5 x 9}: at 1, 0.9 vs 0.1.
        let t = test(&[(1, 9), (5, 1)], &[(1, 1), (5, 9)]).unwrap();
        assert!((t.d - 0.8).abs() < 1e-12);
        assert_eq!(t.at_us, 1);
    }

    #[test]
    fn empty_samples_have_no_test() {
        assert!(test(&[], &uniform(1, 3)).is_none());
        assert!(test(&uniform(1, 3), &[(5, 0)]).is_none());
    }

    #[test]
    fn histograms_are_tested_at_their_bucket_edges() {
        let mut a = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        let mut b = a.clone();
        for v in 1..=1000 {
            a.record(v).unwrap();
            b.record(v + 500).unwrap();
        }
        // Values below 2048 are exact at 3 digits: D = 500 / 1000 at 500.
        let t = two_sample(&a, &b).unwrap();
        assert_eq!((t.n, t.m, t.d, t.at_us), (1000, 1000, 0.5, 500));
        assert!(two_sample(&a, &Histogram::new(3).unwrap()).is_none());
    }
}
