//! The latency histogram memory a task keeps, which [`Workload::validate`] bounds.

use super::*;

/// The ops of `w`'s mix (weight above 0): a task keeps a histogram for these only.
pub fn mix_ops(w: &Workload) -> Vec<OpKind> {
    OpKind::ALL
        .into_iter()
        .filter(|op| w.weight_of(*op) > 0)
        .collect()
}

/// Histogram memory of one task running `w`: one per op of the mix, plus GET's TTFB (twice
/// with a warm-up), plus one per endpoint of the measured stage with several
/// `storage.endpoints`. Here, not
/// in `stats` or the worker's recorder, because [`Workload::validate`] bounds it (`concurrency`
/// x this at most [`MAX_HISTOGRAM_BYTES`](limits::MAX_HISTOGRAM_BYTES)).
pub fn histogram_bytes_per_task(w: &Workload) -> u64 {
    let ops = mix_ops(w);
    let n = ops.len() as u64 + ops.contains(&OpKind::Get) as u64;
    // With a warm-up a task keeps the warm-up's histograms apart, as many again.
    let stages = 1 + w.warmup.is_some() as u64;
    // Several endpoints: a task keeps one latency histogram per endpoint (measured stage).
    let endpoints = match w.storage.endpoint_list().len() {
        n if n > 1 && !w.target_uri().is_ok_and(|u| u.is_local()) => n as u64,
        _ => 0,
    };
    (stages * n + endpoints) * crate::latency::Latency::bytes()
}
