//! Failed operations' latency, per op and error kind, kept by each task at the cost of the
//! failures it saw rather than of a full histogram each.
//!
//! A full latency histogram is ~190 KiB ([`Latency::bytes`]): one per task, op and error
//! kind would cost a 1,024-task run ~190 MiB per kind before a single op failed, and the
//! workload's validation bounds histogram memory without them. A task therefore records a
//! failure's latency as the value of its histogram bucket (rounded down to the bucket's
//! lowest equivalent value) with a count, in a sorted map: as exact as the histogram, since
//! recording that value puts the sample in the same bucket. Past [`SPARSE_MAX`] distinct
//! buckets (failures spread over more than a few thousand latencies) it switches to a full
//! histogram, which is then smaller.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::spec::OpKind;
use crate::stats::Latency;

/// Distinct buckets kept sparse (at ~40 bytes each, about the size of a full histogram).
const SPARSE_MAX: usize = 4_096;

/// One (op, error kind)'s failed latencies.
#[derive(Debug)]
enum Samples {
    /// Bucket value (us) -> count.
    Sparse(BTreeMap<u64, u64>),
    /// A full histogram.
    Dense(Box<Latency>),
}

impl Samples {
    fn record_n(&mut self, us: u64, n: u64) {
        match self {
            Samples::Sparse(m) => {
                let v = bucket(us);
                *m.entry(v).or_default() += n;
                if m.len() > SPARSE_MAX {
                    *self = Samples::Dense(Box::new(self.to_latency()));
                }
            }
            Samples::Dense(l) => l.0.saturating_record_n(bucket(us), n),
        }
    }

    fn to_latency(&self) -> Latency {
        match self {
            Samples::Sparse(m) => {
                let mut l = Latency::default();
                for (&v, &n) in m {
                    l.0.saturating_record_n(v, n);
                }
                l
            }
            Samples::Dense(l) => (**l).clone(),
        }
    }
}

/// The histogram bucket of `us` as its lowest equivalent value, clamped as
/// [`Latency::record`] clamps.
fn bucket(us: u64) -> u64 {
    static TEMPLATE: std::sync::OnceLock<Latency> = std::sync::OnceLock::new();
    let t = TEMPLATE.get_or_init(Latency::default);
    let us = us.clamp(1, t.0.high());
    t.0.lowest_equivalent(us)
}

/// A task's (or the merged tasks') failed ops' latency, per op and error kind.
#[derive(Debug, Default)]
pub struct FailedLatency(BTreeMap<(OpKind, String), Samples>);

impl FailedLatency {
    /// One failed `op` of `kind` that took `latency`.
    pub fn record(&mut self, op: OpKind, kind: &str, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        match self.0.get_mut(&(op, kind.to_string())) {
            Some(s) => s.record_n(us, 1),
            None => {
                let mut s = Samples::Sparse(BTreeMap::new());
                s.record_n(us, 1);
                self.0.insert((op, kind.to_string()), s);
            }
        }
    }

    /// Add another task's.
    pub fn merge(&mut self, o: FailedLatency) {
        for (key, theirs) in o.0 {
            let mine = self
                .0
                .entry(key)
                .or_insert_with(|| Samples::Sparse(BTreeMap::new()));
            match theirs {
                Samples::Sparse(m) => m.into_iter().for_each(|(v, n)| mine.record_n(v, n)),
                Samples::Dense(l) => {
                    if let Samples::Sparse(_) = mine {
                        *mine = Samples::Dense(Box::new(mine.to_latency()));
                    }
                    if let Samples::Dense(d) = mine {
                        d.add(&l);
                    }
                }
            }
        }
    }

    /// The histograms per op and error kind, for the summary's `failedLatency`.
    pub fn into_histograms(self) -> impl Iterator<Item = (OpKind, String, Latency)> {
        self.0
            .into_iter()
            .map(|((op, kind), s)| (op, kind, s.to_latency()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_and_dense_record_exactly_what_a_histogram_would() {
        let mut rng = 12345u64;
        let mut want = Latency::default();
        let (mut a, mut b) = (FailedLatency::default(), FailedLatency::default());
        // Enough spread values that one side turns dense, and the other stays sparse.
        for i in 0..40_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let us = if i % 2 == 0 {
                rng % 5_000_000
            } else {
                30_000_000 + i % 7
            };
            let d = Duration::from_micros(us);
            want.record(d);
            if i % 2 == 0 { &mut a } else { &mut b }.record(OpKind::Get, "timeout", d);
        }
        assert!(matches!(a.0.values().next(), Some(Samples::Dense(_))));
        assert!(matches!(b.0.values().next(), Some(Samples::Sparse(_))));
        b.merge(a);
        let got: Vec<_> = b.into_histograms().collect();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].2, want);
    }
}
