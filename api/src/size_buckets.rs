//! Figures per object-size bucket, for workloads whose sizes vary (a size distribution, a
//! listed dataset, a mix of block sizes): report 000's tables are per size, and a mean over
//! 4 KiB and 1 GiB objects hides both.
//!
//! # Buckets
//!
//! A bucket is a power of two: an operation that moved `n` payload bytes counts in the bucket
//! `[2^k, 2^(k+1))` with `2^k <= n` (0 bytes: bucket 0). Powers of two, not the distinct sizes,
//! because a distribution draws thousands of distinct sizes; a list of sizes that are powers
//! of two (4KiB, 64KiB, 1MiB) gets one bucket per size. Each bucket also keeps the smallest
//! and largest size it saw, so a bucket that held one size is shown as that size.
//!
//! Only successful operations are bucketed (a failed GET has no size). A bucket keeps counts
//! and a latency histogram, so buckets merge across tasks and workers exactly as ops do
//! (`stats` turns one into an op's figures).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::latency::Latency;
use crate::spec::{OpKind, SizeDistribution, SizeSpec, Workload};
use crate::units::ByteSize;

/// Buckets of one op, by their lower bound in bytes (a power of two, or 0).
pub type SizeBuckets = BTreeMap<u64, SizeBucket>;

/// One bucket's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SizeBucket {
    /// Smallest payload size seen in the bucket, in bytes.
    pub smallest: u64,
    /// Largest payload size seen in the bucket, in bytes.
    pub largest: u64,
    /// Successful operations in the bucket.
    pub count: u64,
    /// Payload bytes they moved.
    pub bytes: u64,
    /// Requests (or syscalls) they took.
    pub requests: u64,
    /// Their latency.
    pub latency: Latency,
}

impl SizeBucket {
    /// Fold another task's or worker's bucket into this one (counts and histograms add).
    pub fn merge(&mut self, o: &SizeBucket) {
        if self.count == 0 {
            self.smallest = o.smallest;
            self.largest = o.largest;
        } else if o.count > 0 {
            self.smallest = self.smallest.min(o.smallest);
            self.largest = self.largest.max(o.largest);
        }
        // Saturating: summaries come from other processes (see `OpStats::merge`).
        self.count = self.count.saturating_add(o.count);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.requests = self.requests.saturating_add(o.requests);
        self.latency.add(&o.latency);
    }

    /// The sizes the bucket held: `64KiB` when it saw one size, else `4KiB-7.9KiB`.
    pub fn label(&self) -> String {
        if self.smallest == self.largest {
            human(self.smallest)
        } else {
            format!("{}-{}", human(self.smallest), human(self.largest))
        }
    }
}

/// A size for a table: exact when it is a whole number of a binary unit, else one decimal.
fn human(b: u64) -> String {
    let exact = ByteSize(b).to_string();
    if !exact.chars().all(|c| c.is_ascii_digit()) || b < 1024 {
        return exact;
    }
    for (unit, m) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if b >= m {
            return format!("{:.1}{unit}", b as f64 / m as f64);
        }
    }
    exact
}

/// Merge `o` into `into`, bucket by bucket.
pub fn merge(into: &mut SizeBuckets, o: &SizeBuckets) {
    for (k, b) in o {
        into.entry(*k).or_default().merge(b);
    }
}

/// The bucket of an operation that moved `bytes`: the largest power of two not above it.
pub fn bucket_of(bytes: u64) -> u64 {
    if bytes == 0 {
        0
    } else {
        1u64 << (63 - bytes.leading_zeros())
    }
}

/// Count one successful operation that moved `bytes` in `requests`.
pub fn record(buckets: &mut SizeBuckets, bytes: u64, requests: u64, latency: std::time::Duration) {
    let b = buckets.entry(bucket_of(bytes)).or_default();
    if b.count == 0 {
        b.smallest = bytes;
        b.largest = bytes;
    } else {
        b.smallest = b.smallest.min(bytes);
        b.largest = b.largest.max(bytes);
    }
    b.count += 1;
    b.bytes = b.bytes.saturating_add(bytes);
    b.requests = b.requests.saturating_add(requests);
    b.latency.record(latency);
}

/// Buckets a size spec can produce (1 for a fixed size).
fn span(spec: &SizeSpec) -> u64 {
    let (min, max) = match spec {
        SizeSpec::Fixed(_) => return 1,
        SizeSpec::Distribution(
            SizeDistribution::Uniform { min, max } | SizeDistribution::Lognormal { min, max, .. },
        ) => (min.0, max.0),
    };
    between(min, max)
}

/// Buckets from the one of `min` to the one of `max`, inclusive.
fn between(min: u64, max: u64) -> u64 {
    let k = |b: u64| {
        if b == 0 {
            0
        } else {
            64 - b.leading_zeros() as u64
        }
    };
    k(max).saturating_sub(k(min)) + 1
}

/// Buckets a listed dataset's objects may fall in (any size up to the largest object).
const ANY_SIZE: u64 = 64 - crate::spec::limits::MAX_OBJECT_SIZE.leading_zeros() as u64 + 1;

/// For each op of `w`'s mix whose payload size can vary, the buckets it can fall in: PUT
/// the object size's, GET the dataset's (any size when the dataset is listed), block READ
/// and WRITE the block sizes'. Ops of one possible size are left out.
pub fn varying_ops(w: &Workload) -> Vec<(OpKind, u64)> {
    let block = w.block.as_ref().map(|b| {
        let sizes = b.sizes();
        let min = sizes.iter().map(|s| s.0).min().unwrap_or(0);
        let max = sizes.iter().map(|s| s.0).max().unwrap_or(0);
        if sizes.len() > 1 {
            between(min, max)
        } else {
            1
        }
    });
    crate::spec::mix_ops(w)
        .into_iter()
        .filter_map(|op| {
            let n = match (op, block) {
                (OpKind::Read | OpKind::Write, Some(n)) => n,
                (OpKind::Put, None) => span(&w.object_size),
                (OpKind::Get, None) if !w.dataset.prepare => ANY_SIZE,
                (OpKind::Get, None) => span(w.dataset_size()),
                _ => 1,
            };
            (n > 1).then_some((op, n))
        })
        .collect()
}

/// Whether a run of `w` keeps per-size figures: when some op's size can vary, and the
/// buckets' histograms (each task keeps its own, as it does per op) fit in what
/// [`MAX_HISTOGRAM_BYTES`](crate::spec::limits::MAX_HISTOGRAM_BYTES) leaves beside the
/// per-op histograms. Otherwise the run has no per-size figures (never an invalid workload:
/// they are an addition). The bound counts every bucket possible; a task allocates only the
/// buckets its sizes fall in.
pub fn kept(w: &Workload) -> bool {
    let varying = varying_ops(w);
    if varying.is_empty() {
        return false;
    }
    let buckets: u64 = varying.iter().map(|(_, n)| n).sum();
    let per_task = crate::spec::histogram_bytes_per_task(w)
        .saturating_add(buckets.saturating_mul(Latency::bytes()));
    per_task.saturating_mul(w.concurrency as u64) <= crate::spec::limits::MAX_HISTOGRAM_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 1);
        assert_eq!(bucket_of(4096), 4096);
        assert_eq!(bucket_of(8191), 4096);
        assert_eq!(bucket_of(u64::MAX), 1 << 63);
        assert_eq!(between(4096, 65536), 5);
        assert_eq!(between(4096, 8191), 1);
    }

    #[test]
    fn merged_buckets_equal_one_recording_of_all_samples() {
        // Two workers' buckets, merged through JSON, against one set of buckets that saw
        // every operation: counts, bytes, bounds and every percentile agree exactly.
        let ops: Vec<(u64, u64)> = (0..3_000u64)
            .map(|i| {
                (
                    [4096, 6000, 65536, 1 << 20][(i % 4) as usize],
                    50 + i * 7 % 900,
                )
            })
            .collect();
        let (mut a, mut b, mut one) = (SizeBuckets::new(), SizeBuckets::new(), SizeBuckets::new());
        for (i, (size, us)) in ops.iter().enumerate() {
            let half = if i % 3 == 0 { &mut a } else { &mut b };
            record(half, *size, 1, Duration::from_micros(*us));
            record(&mut one, *size, 1, Duration::from_micros(*us));
        }
        let through_json = |s: &SizeBuckets| -> SizeBuckets {
            serde_json::from_str(&serde_json::to_string(s).unwrap()).unwrap()
        };
        let mut merged = through_json(&a);
        merge(&mut merged, &through_json(&b));
        assert_eq!(merged, one);
        assert_eq!(
            merged.keys().copied().collect::<Vec<_>>(),
            [4096, 65536, 1 << 20]
        );
        let small = &merged[&4096];
        assert_eq!((small.smallest, small.largest), (4096, 6000));
        assert_eq!(small.count, 1_500);
        assert_eq!(small.bytes, 750 * 4096 + 750 * 6000);
        assert_eq!(small.label(), "4KiB-5.9KiB");
        assert_eq!(merged[&65536].label(), "64KiB");
        for q in [0.5, 0.95, 0.99, 1.0] {
            assert_eq!(
                merged[&65536].latency.quantile_us(q),
                one[&65536].latency.quantile_us(q)
            );
        }
        // A bucket with nothing in it takes the other's bounds, not 0.
        let mut empty = SizeBucket::default();
        empty.merge(&merged[&65536]);
        assert_eq!((empty.smallest, empty.largest), (65536, 65536));
    }

    #[test]
    fn per_size_figures_are_kept_only_where_sizes_vary_and_memory_allows() {
        let w = |rest: &str| {
            Workload::from_yaml(&format!("target: file:///tmp/x\nduration: 1s\n{rest}")).unwrap()
        };
        assert!(!kept(&w("objectSize: 1MiB\nops: [{op: get}, {op: put}]\n")));
        let uniform = w("objectSize: {uniform: {min: 4KiB, max: 64KiB}}\nops: [{op: put}]\n");
        assert_eq!(varying_ops(&uniform), [(OpKind::Put, 5)]);
        assert!(kept(&uniform));
        let listed = w("dataset: {prepare: false}\nops: [{op: get}]\n");
        assert_eq!(varying_ops(&listed), [(OpKind::Get, ANY_SIZE)]);
        assert!(kept(&listed));
        // So many tasks that the buckets' histograms would pass the bound: none kept.
        let many = w("dataset: {prepare: false}\nconcurrency: 4096\nops: [{op: get}]\n");
        assert!(!kept(&many));
    }
}
