//! Significance tests of two runs: could their difference be noise?
//!
//! Throughput is compared with a rank-sum test on the per-second timeline ([`rank_sum`]), a
//! percentile with a test of how many samples exceed the baseline's ([`exceed`]), whole
//! latency distributions with a two-sample Kolmogorov-Smirnov test on an op's HDR histogram
//! ([`ks`], a description shown by `compare`, no part of any verdict). The rule that says a run
//! is slower than its baseline, built on the first two, is [`crate::verdict`], with the
//! threshold [`STRONG`].

pub mod exceed;
pub mod ks;
pub mod rank_sum;

use crate::stats::Summary;
use crate::timeline::Second;

/// p-value below which a difference is called significant.
pub const STRONG: f64 = 0.01;
/// p-value below which a difference is called weak evidence.
pub const WEAK: f64 = 0.05;

/// How strong the evidence of a difference is.
pub fn significance(p: f64) -> &'static str {
    if p < STRONG {
        "significant"
    } else if p < WEAK {
        "weak"
    } else {
        "not significant"
    }
}

/// The timeline entries of the measured stage that lie wholly inside it (the last one
/// usually does not: it would look like a drop); warm-up entries are left out. Entries later
/// in a long run span more than a second: read their rates with [`Second::per_second`].
pub fn full_seconds(s: &Summary) -> impl Iterator<Item = &Second> {
    s.timeline.iter().filter(move |t| {
        !t.warmup && t.second.saturating_add(t.span.max(1)) as f64 <= s.elapsed_seconds + 1e-9
    })
}

/// The ops per second (all ops) of each full entry of the measured stage.
pub fn ops_per_second(s: &Summary) -> Vec<f64> {
    full_seconds(s).map(|t| t.per_second(t.ops)).collect()
}
