//! Mann-Whitney U (Wilcoxon rank-sum) test on two runs' per-second throughput.
//!
//! A run's throughput is one number, but its timeline has one sample per second: the test
//! asks whether the seconds of one run are systematically faster than the other's. It assumes
//! nothing about their distribution (a stall makes per-second rates far from normal), and
//! with few seconds its p-value is exact: the share of the C(n+m, n) orderings of the pooled
//! seconds with a U as extreme. With ties or many seconds it uses the normal approximation
//! with tie and continuity corrections.

use serde::Serialize;

/// Largest sample size for which the exact distribution of U is computed.
const EXACT_MAX: usize = 30;

/// The result of the test.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RankSum {
    /// Samples (seconds) of the first side.
    pub n: usize,
    /// Samples (seconds) of the second side.
    pub m: usize,
    /// Pairs (first, second) with the first larger, ties counted half: `n m / 2` when neither
    /// side is larger, 0 when every sample of the second is larger.
    pub u: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// Whether the p-value is exact (no ties, both sides at most 30 samples).
    pub exact: bool,
}

/// Test two samples; `None` when either is empty.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<RankSum> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return None;
    }
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|v| (*v, true))
        .chain(b.iter().map(|v| (*v, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Mid-ranks (1-based) and the tie correction sum(t^3 - t).
    let (mut rank_sum_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += mid * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let (nf, mf) = (n as f64, m as f64);
    let u = rank_sum_a - nf * (nf + 1.0) / 2.0;
    let exact = ties == 0.0 && n <= EXACT_MAX && m <= EXACT_MAX;
    let p_value = if exact {
        exact_p(n, m, u.round() as usize)
    } else {
        let big_n = nf + mf;
        let var = nf * mf / 12.0 * ((big_n + 1.0) - ties / (big_n * (big_n - 1.0)));
        if var <= 0.0 {
            1.0
        } else {
            let z = ((u - nf * mf / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
            erfc(z / std::f64::consts::SQRT_2).min(1.0)
        }
    };
    Some(RankSum {
        n,
        m,
        u,
        p_value,
        exact,
    })
}

/// The smallest p-value the test can give with `n` and `m` seconds: that of two samples
/// with every value of one side above every value of the other (1 when either is empty).
/// With 4 and 4 it is 2 / 70 = 0.029, so such runs can never be called significant at 1%.
pub fn smallest_p(n: usize, m: usize) -> f64 {
    let a: Vec<f64> = (0..n).map(|v| v as f64).collect();
    let b: Vec<f64> = (n..n + m).map(|v| v as f64).collect();
    mann_whitney(&a, &b).map_or(1.0, |t| t.p_value)
}

/// The shift of the second sample against the first (Hodges-Lehmann: the median of every
/// difference `b_j - a_i`) and its confidence interval, the one that goes with the rank-sum
/// test: the differences of ranks `C` and `n m + 1 - C` with `C = n m / 2 - z sqrt(n m (n + m
/// + 1) / 12)` (normal approximation, ties not corrected). `z` is the two-sided normal
/// quantile of the confidence (1.96 for 95%). `None` when either side is empty or the samples
/// are too few for such an interval (`C < 1`).
pub fn shift(a: &[f64], b: &[f64], z: f64) -> Option<Shift> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return None;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let pairs = (n * m) as f64;
    let sd = (pairs * (n + m + 1) as f64 / 12.0).sqrt();
    let c = (pairs / 2.0 - z * sd).floor();
    if c < 1.0 {
        return None;
    }
    let c = c as u64;
    let total = (n * m) as u64;
    Some(Shift {
        estimate: (kth_difference(&a, &b, total.div_ceil(2))
            + kth_difference(&a, &b, total / 2 + 1))
            / 2.0,
        low: kth_difference(&a, &b, c),
        high: kth_difference(&a, &b, total + 1 - c),
    })
}

/// A shift and its confidence interval, in the samples' unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Shift {
    /// The median difference.
    pub estimate: f64,
    /// The interval's lower end.
    pub low: f64,
    /// The interval's upper end.
    pub high: f64,
}

/// The `k`-th smallest (1-based) of the differences `b_j - a_i` of two sorted samples, found
/// by bisection on the value with a count in `O(n + m)`, so that `n m` differences (13 million
/// for two hours of seconds) are never held.
fn kth_difference(a: &[f64], b: &[f64], k: u64) -> f64 {
    let (Some(a_first), Some(a_last), Some(b_first), Some(b_last)) =
        (a.first(), a.last(), b.first(), b.last())
    else {
        return 0.0;
    };
    let (mut lo, mut hi) = (b_first - a_last, b_last - a_first);
    // At most `k - 1` differences lie at or below `lo - 1`; at least `k` at or below `hi`.
    lo -= 1.0;
    for _ in 0..200 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi {
            break;
        }
        if differences_at_most(a, b, mid) >= k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // `hi` is within a rounding of the k-th difference: return the difference itself.
    largest_difference_at_most(a, b, hi)
}

/// The largest difference `b_j - a_i` that is at most `d` (as [`differences_at_most`]
/// counts), or `d` when there is none.
fn largest_difference_at_most(a: &[f64], b: &[f64], d: f64) -> f64 {
    let mut i = 0;
    let mut best: Option<f64> = None;
    for bj in b {
        while i < a.len() && a[i] < bj - d {
            i += 1;
        }
        if let Some(ai) = a.get(i) {
            let diff = bj - ai;
            best = Some(best.map_or(diff, |x: f64| x.max(diff)));
        }
    }
    best.unwrap_or(d)
}

/// How many differences `b_j - a_i` are at most `d` (both samples sorted).
fn differences_at_most(a: &[f64], b: &[f64], d: f64) -> u64 {
    // For each b_j: the a_i >= b_j - d. As b_j grows, the first such a_i moves right.
    let mut i = 0;
    let mut count = 0u64;
    for bj in b {
        while i < a.len() && a[i] < bj - d {
            i += 1;
        }
        count += (a.len() - i) as u64;
    }
    count
}

/// Two-sided exact p-value of `U = u` for sizes `n`, `m` without ties.
fn exact_p(n: usize, m: usize, u: usize) -> f64 {
    let counts = u_distribution(n, m);
    let total: f64 = counts.iter().sum();
    let below: f64 = counts[..=u.min(n * m)].iter().sum();
    let above: f64 = counts[u.min(n * m)..].iter().sum();
    (2.0 * below.min(above) / total).min(1.0)
}

/// How many orderings of `n` + `m` distinct values give each U, `0..=n m`: the coefficients
/// of the Gaussian binomial `[n+m choose n]_q`, by `f(i, j) = f(i-1, j) shifted by j +
/// f(i, j-1)` (the largest value is either from the first sample, above all `j` of the
/// second, or from the second).
fn u_distribution(n: usize, m: usize) -> Vec<f64> {
    // row[j] = f(i, j) for the current i.
    let mut row: Vec<Vec<f64>> = (0..=m).map(|_| vec![1.0]).collect();
    for i in 1..=n {
        let mut next: Vec<Vec<f64>> = Vec::with_capacity(m + 1);
        next.push(vec![1.0]);
        for j in 1..=m {
            let mut f = vec![0.0; i * j + 1];
            for (k, c) in row[j].iter().enumerate() {
                f[k + j] += c;
            }
            for (k, c) in next[j - 1].iter().enumerate() {
                f[k] += c;
            }
            next.push(f);
        }
        row = next;
    }
    row.pop().unwrap_or_else(|| vec![1.0])
}

/// The complementary error function, relative error below 1.2e-7 (Numerical Recipes'
/// Chebyshev fit), which is plenty for a p-value.
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_small_samples_have_the_exact_p_value() {
        // 3 vs 3, every second of b faster: U = 0, one ordering in C(6,3) = 20 on each side.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!((t.n, t.m, t.u, t.exact), (3, 3, 0.0, true));
        assert!((t.p_value - 0.1).abs() < 1e-15, "{}", t.p_value);
        // 4 vs 4: 2 / C(8,4) = 2/70.
        let t = mann_whitney(&[5.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 16.0);
        assert!((t.p_value - 2.0 / 70.0).abs() < 1e-15, "{}", t.p_value);
    }

    #[test]
    fn the_distribution_of_u_is_the_gaussian_binomial() {
        // [4 choose 2]_q = 1 + q + 2q^2 + q^3 + q^4.
        assert_eq!(u_distribution(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        // Sums to C(n+m, n) and is symmetric.
        let d = u_distribution(7, 5);
        assert_eq!(d.iter().sum::<f64>(), 792.0);
        assert!(d.iter().eq(d.iter().rev()));
        // Interleaved, a = {1, 3, 5} against b = {2, 4, 6}: U = 0 + 1 + 2 = 3;
        // [6 choose 3]_q = 1 1 2 3 3 3 3 2 1 1, P(U <= 3) = 7 / 20, two-sided 0.7.
        let t = mann_whitney(&[1.0, 3.0, 5.0], &[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(t.u, 3.0);
        assert!((t.p_value - 0.7).abs() < 1e-15, "{}", t.p_value);
    }

    #[test]
    fn ties_and_large_samples_use_the_normal_approximation() {
        // a = 40 x 10, 1 x 11; b = 41 x 10: ties, so the normal approximation.
        let mut a = vec![10.0; 40];
        a.push(11.0);
        let b = vec![10.0; 41];
        let t = mann_whitney(&a, &b).unwrap();
        assert!(!t.exact);
        // U = 40 x 41 / 2 (ties) + 41 (11 beats every b) = 861; mean 840.5.
        assert_eq!(t.u, 861.0);
        // var = 41*41/12 * (83 - (81^3 - 81 + 1 - 1) / (82 * 81)) = 140.0833 * (83 - 80) = 420.25,
        // z = (20.5 - 0.5) / 20.5 = 0.97561, p = erfc(z / sqrt 2) = 0.329258.
        assert!((t.p_value - 0.329_258).abs() < 1e-5, "{}", t.p_value);
        // 40 distinct seconds each, fully separated: far beyond any doubt.
        let a: Vec<f64> = (0..40).map(|v| v as f64).collect();
        let b: Vec<f64> = (100..140).map(|v| v as f64).collect();
        let t = mann_whitney(&a, &b).unwrap();
        assert!(!t.exact && t.u == 0.0 && t.p_value < 1e-12, "{t:?}");
        assert!(mann_whitney(&[], &[1.0]).is_none());
    }

    #[test]
    fn the_shift_is_the_median_difference_with_its_interval() {
        // b = a + 10 exactly: every interval and estimate is 10 when all differences are ranked
        // around it. Differences b_j - a_i of 1..=10 against 11..=20 run from 1 to 19, the
        // median 10.
        let a: Vec<f64> = (1..=10).map(f64::from).collect();
        let b: Vec<f64> = (11..=20).map(f64::from).collect();
        let s = shift(&a, &b, 1.959_964).expect("shift");
        assert_eq!(s.estimate, 10.0);
        // n m = 100, sd = sqrt(100 * 21 / 12) = 13.229, C = floor(50 - 25.93) = 24: the 24th
        // smallest difference is 7 (1 + 2 + ... + 6 = 21 differences are below 7, 28 at or
        // below), the 77th is 13.
        assert_eq!((s.low, s.high), (7.0, 13.0));
        // Too few samples for a 95% interval: 2 and 2.
        assert!(shift(&[1.0, 2.0], &[3.0, 4.0], 1.959_964).is_none());
        assert!(shift(&[], &[3.0], 1.96).is_none());
        assert_eq!(differences_at_most(&a, &b, 0.0), 0);
        assert_eq!(differences_at_most(&a, &b, 19.0), 100);
    }

    #[test]
    fn erfc_matches_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
        // 1.96 sigma two-sided: 0.05.
        assert!((erfc(1.959_964 / std::f64::consts::SQRT_2) - 0.05).abs() < 1e-6);
    }
}
