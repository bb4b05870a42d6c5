//! A test about one percentile: does the new run exceed the baseline's p99 (or any q-quantile)
//! more often than the baseline itself does?
//!
//! A percentile is a statement about a share: 1% of the operations took longer than p99. So a
//! p99 that rose is tested on that share: of the baseline's operations, `k0` of `n` lie above
//! its own p99 (about 1%); of the new run's, `k1` of `m` lie above that same value. Under "no
//! change" both are draws of one share, and Fisher's exact test (one-sided: the new run's share
//! is larger) gives the probability of `k1` or more. Unlike a test of the whole distribution,
//! it cannot be outvoted by the rest of it: a run whose median got faster and whose tail got
//! four times slower exceeds the old p99 far more than 1% of the time, and is called slower.
//!
//! The threshold is taken from the baseline, so its own noise is in `k0` and counted. As with
//! every test on a run's operations, operations of one run are not independent samples (a slow
//! second slows many), so with millions of them the p-value is optimistic: the tolerance on
//! the size of the change is what keeps a tiny shift from being a regression.

use serde::Serialize;

/// The result of the test.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exceedances {
    /// Baseline samples above the threshold.
    pub k0: u64,
    /// Baseline samples.
    pub n: u64,
    /// New samples above the threshold.
    pub k1: u64,
    /// New samples.
    pub m: u64,
    /// One-sided p-value: the probability of `k1` or more exceedances if both runs share one
    /// exceedance probability (hypergeometric tail, Fisher's exact test).
    pub p_value: f64,
}

/// Test `k1` of `m` new samples above the threshold against `k0` of `n` baseline samples;
/// `None` when either side has no sample or a count is larger than its side.
pub fn test(k0: u64, n: u64, k1: u64, m: u64) -> Option<Exceedances> {
    if n == 0 || m == 0 || k0 > n || k1 > m {
        return None;
    }
    Some(Exceedances {
        k0,
        n,
        k1,
        m,
        p_value: fisher_greater(k0, n, k1, m),
    })
}

/// The smallest p-value the test can give for quantile `q` with `n` baseline samples and `m`
/// new ones: every new sample above a threshold that `n (1 - q)` baseline samples exceed.
pub fn smallest_p(q: f64, n: u64, m: u64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    // The epsilon keeps 100 x (1 - 0.99) = 0.99999... from flooring to 0.
    let k0 = ((n as f64) * (1.0 - q) + 1e-9).floor() as u64;
    fisher_greater(k0.min(n), n, m, m)
}

/// `P(X >= k1)` for `X ~ Hypergeometric(N = n + m, K = k0 + k1, m draws)`: the one-sided
/// Fisher exact p-value of the 2x2 table (above, not above) x (baseline, new).
pub fn fisher_greater(k0: u64, n: u64, k1: u64, m: u64) -> f64 {
    let big_n = n + m;
    let k = k0 + k1;
    let lo = (m + k).saturating_sub(big_n);
    let hi = k.min(m);
    if k1 <= lo {
        return 1.0;
    }
    let mean = k as f64 * m as f64 / big_n as f64;
    // Sum the tail on the side of the mean where the terms fall away fast: the upper tail when
    // k1 is above the mean, else one minus the lower tail.
    if k1 as f64 > mean {
        tail_sum(k1, hi, k, m, big_n, true).min(1.0)
    } else {
        (1.0 - tail_sum(k1 - 1, lo, k, m, big_n, false)).clamp(0.0, 1.0)
    }
}

/// The hypergeometric probabilities from `from` to `to` (upwards or downwards) summed,
/// stopping once the terms no longer count.
fn tail_sum(from: u64, to: u64, k: u64, m: u64, big_n: u64, up: bool) -> f64 {
    let mut term = ln_pmf(from, k, m, big_n).exp();
    let mut sum = term;
    let mut x = from;
    while (up && x < to) || (!up && x > to) {
        let (kf, mf, nf) = (k as f64, m as f64, big_n as f64);
        let xf = x as f64;
        // P(x + 1) / P(x) = (K - x)(m - x) / ((x + 1)(N - K - m + x + 1)).
        let ratio_up = (kf - xf) * (mf - xf) / ((xf + 1.0) * (nf - kf - mf + xf + 1.0));
        let ratio = if up {
            ratio_up
        } else {
            // P(x - 1) / P(x) is the reciprocal of the step up from x - 1.
            let xm = xf - 1.0;
            (xm + 1.0) * (nf - kf - mf + xm + 1.0) / ((kf - xm) * (mf - xm))
        };
        term *= ratio;
        x = if up { x + 1 } else { x - 1 };
        sum += term;
        if ratio < 1.0 && term < sum * 1e-17 {
            break;
        }
    }
    sum
}

/// `ln P(X = x)` for `X ~ Hypergeometric(N, K, m draws)`.
fn ln_pmf(x: u64, k: u64, m: u64, big_n: u64) -> f64 {
    ln_choose(k, x) + ln_choose(big_n - k, m - x) - ln_choose(big_n, m)
}

/// `ln C(n, k)`.
fn ln_choose(n: u64, k: u64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// `ln Gamma(x)` for `x >= 1` (Lanczos, g = 7, 9 terms: relative error about 1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let t = x + G + 0.5;
    let s = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |s, (i, c)| s + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within `rel` of `want`, relatively.
    fn close(got: f64, want: f64, rel: f64) -> bool {
        ((got - want) / want).abs() < rel
    }

    #[test]
    fn ln_gamma_gives_factorials() {
        // ln(9!) = ln 362880; ln(170!) from its known value 706.5730622457874.
        assert!(close(ln_gamma(10.0), 362_880f64.ln(), 1e-13));
        assert!(close(ln_gamma(171.0), 706.573_062_245_787_4, 1e-13));
        assert!(ln_gamma(1.0).abs() < 1e-13 && ln_gamma(2.0).abs() < 1e-13);
    }

    #[test]
    fn small_tables_have_the_exact_fisher_p_value() {
        // Baseline 1 of 10 above, new 5 of 10 above: K = 6 of N = 20, 10 drawn.
        // P(X >= 5) = sum_{x=5..6} C(6,x) C(14,10-x) / C(20,10)
        //           = (6 * 2002 + 1 * 1001) / 184756 = 13013 / 184756.
        let t = test(1, 10, 5, 10).expect("test");
        assert!(close(t.p_value, 13_013.0 / 184_756.0, 1e-12), "{t:?}");
        // The other way round the new run exceeds less: P(X >= 1) = 1 - C(14,10)/C(20,10).
        let t = test(5, 10, 1, 10).expect("test");
        assert!(close(t.p_value, 1.0 - 1001.0 / 184_756.0, 1e-12), "{t:?}");
        // No exceedance anywhere: nothing to tell apart.
        assert_eq!(test(0, 10, 0, 10).map(|t| t.p_value), Some(1.0));
        assert!(test(0, 0, 0, 10).is_none() && test(11, 10, 0, 10).is_none());
    }

    #[test]
    fn large_counts_sum_a_short_tail() {
        // 100,000 samples each, 1% of the baseline above its p99, 1.1% of the new run: the
        // normal approximation of the pooled two-proportion z-test gives z = 2.1905, one-sided
        // p = 0.01424; the exact tail is close to it.
        let t = test(1000, 100_000, 1100, 100_000).expect("test");
        assert!((t.p_value - 0.0142).abs() < 0.002, "{t:?}");
        // Four times the exceedances: far beyond any doubt, and no underflow to a negative.
        let t = test(1000, 100_000, 4000, 100_000).expect("test");
        assert!(t.p_value >= 0.0 && t.p_value < 1e-100, "{t:?}");
        // The same share: about one half.
        let t = test(1000, 100_000, 1000, 100_000).expect("test");
        assert!((t.p_value - 0.5).abs() < 0.02, "{t:?}");
    }

    #[test]
    fn the_smallest_p_says_when_a_test_can_never_be_significant() {
        // 20 lifecycles each: 0 baseline samples above its p99, all 20 new ones above:
        // 1 / C(40, 20).
        assert!(close(
            smallest_p(0.99, 20, 20),
            1.0 / 137_846_528_820.0,
            1e-9
        ));
        // 3 and 3: at best 1 / C(6, 3) = 0.05.
        assert!(close(smallest_p(0.99, 3, 3), 0.05, 1e-12));
        assert_eq!(smallest_p(0.99, 0, 5), 1.0);
    }
}
