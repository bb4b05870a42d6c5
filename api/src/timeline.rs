//! The per-second timeline, bounded whatever the run's length.
//!
//! A summary carries all ops together over time. One entry per second costs about 90 bytes
//! of JSON (331 KB an hour), so a 30-day run would send some 240 MB, far past the 1 MiB the
//! operator reads of a worker's summary. Entries therefore cover longer spans the further
//! they are from the start ([`TIERS`]): every second for the first hour, five minutes each up
//! to the end of the first day, an hour each after. A 30-day timeline has 4,596 entries (about
//! 440 KB of JSON; with the longest warm-up's 600 seconds, 500 KB).
//!
//! The spans depend only on an entry's offset from the start, never on the run, so the
//! entries of every task and every worker line up: merging adds counts entry by entry and is
//! as exact as it was per second (counts, bytes, errors and latency sums all add).
//!
//! Warm-up seconds (`warmup`) come first in a summary's timeline, marked `warmup: true` and
//! numbered from the warm-up's start; the measured stage's seconds follow, numbered from its
//! own start, so everything that reads "the measured stage" skips the marked ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The timeline's resolution by offset from the start: `(end of the tier, span of each
/// entry)`, in seconds. Each tier's length is a multiple of its span.
pub const TIERS: [(u64, u64); 3] = [(3_600, 1), (86_400, 300), (u64::MAX, 3_600)];

/// The entry that holds offset `sec`: its index in a timeline, its first second and its span.
pub fn bucket_of(sec: u64) -> (usize, u64, u64) {
    let (mut from, mut base) = (0u64, 0u64);
    for (i, (end, span)) in TIERS.into_iter().enumerate() {
        // The last tier holds everything after it began (u64::MAX included).
        if sec < end || i == TIERS.len() - 1 {
            let k = (sec - from) / span;
            return (
                usize::try_from(base + k).unwrap_or(usize::MAX),
                from + k * span,
                span,
            );
        }
        base += (end - from) / span;
        from = end;
    }
    (usize::MAX, sec, 1)
}

/// The first second and the span of the entry at `index`.
fn bucket_at(index: usize) -> (u64, u64) {
    let (mut from, mut base) = (0u64, 0u64);
    let index = index as u64;
    for (end, span) in TIERS {
        let n = (end - from) / span;
        if index < base + n {
            return (from + (index - base) * span, span);
        }
        base += n;
        from = end;
    }
    (u64::MAX, 1)
}

/// One entry of the timeline: a second, or a longer span later in a long run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Second {
    /// The entry's first second, since the start of the measured stage (of the warm-up, for
    /// a warm-up entry).
    pub second: u64,
    /// Seconds the entry covers: 1 in the first hour, then 300, then 3,600 ([`TIERS`]).
    /// Absent (1) in summaries of older versions, which had one entry per second.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub span: u64,
    /// A second of the warm-up (`warmup`): its operations are not in the summary's results.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warmup: bool,
    /// Operations completed in this entry, successful or not.
    pub ops: u64,
    /// Payload bytes moved in this entry.
    pub bytes: u64,
    /// Operations failed in this entry.
    pub errors: u64,
    /// Sum of the latencies of this entry's successful operations (`ops - errors` of
    /// them), in microseconds: their mean latency, for latency over time. A sum merges
    /// exactly across tasks and workers, where a per-second percentile would not (and a
    /// per-second histogram would cost ~190 KiB a second). 0 in summaries of older versions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_sum_us: u64,
}

impl Default for Second {
    fn default() -> Self {
        Self {
            second: 0,
            span: 1,
            warmup: false,
            ops: 0,
            bytes: 0,
            errors: 0,
            latency_sum_us: 0,
        }
    }
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Second {
    /// The entry holding offset `sec` in a measured-stage timeline, growing it with empty,
    /// correctly numbered entries. Public for the worker's recorder, which builds timelines.
    pub fn at(timeline: &mut Vec<Second>, sec: u64) -> &mut Second {
        Self::at_stage(timeline, sec, false)
    }

    /// [`Second::at`] in a warm-up timeline (`warmup` true) or a measured one.
    pub fn at_stage(timeline: &mut Vec<Second>, sec: u64, warmup: bool) -> &mut Second {
        let (index, _, _) = bucket_of(sec);
        let from = timeline.len();
        if from <= index {
            timeline.extend((from..=index).map(|i| {
                let (second, span) = bucket_at(i);
                Second {
                    second,
                    span,
                    warmup,
                    ..Default::default()
                }
            }));
        }
        &mut timeline[index]
    }

    /// Add another task's or worker's counts for the same entry.
    /// Public for the worker's recorder, which merges tasks' timelines.
    pub fn add(&mut self, o: &Second) {
        self.ops = self.ops.saturating_add(o.ops);
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.errors = self.errors.saturating_add(o.errors);
        self.latency_sum_us = self.latency_sum_us.saturating_add(o.latency_sum_us);
    }

    /// `n` (of this entry's ops or bytes) per second of its span.
    pub fn per_second(&self, n: u64) -> f64 {
        n as f64 / self.span.max(1) as f64
    }

    /// Mean latency of this entry's successful operations in milliseconds, if it had any
    /// and the summary records latency per second.
    pub fn mean_latency_ms(&self) -> Option<f64> {
        let ok = self.ops.saturating_sub(self.errors);
        (ok > 0 && self.latency_sum_us > 0).then(|| self.latency_sum_us as f64 / ok as f64 / 1000.0)
    }
}

/// Add up the entries of several timelines (tasks' or workers'), exactly: each entry goes to
/// the entry of [`TIERS`] that holds its first second, so per-second timelines of older
/// summaries and compacted ones merge alike. Warm-up entries first, then the measured stage's.
pub fn merge<'a>(entries: impl IntoIterator<Item = &'a Second>) -> Vec<Second> {
    merge_shifted(entries.into_iter().map(|s| (0, s)))
}

/// [`merge`] of entries each moved `shift` seconds later: workers' timelines aligned on the
/// wall clock. A worker's seconds count from its own start (`startedAt`); one that started
/// 3 s after the earliest has its second 0 at the merged timeline's second 3. Counts still
/// add exactly; only where they land moves.
pub fn merge_shifted<'a>(entries: impl IntoIterator<Item = (u64, &'a Second)>) -> Vec<Second> {
    let mut out: BTreeMap<(bool, u64), Second> = BTreeMap::new();
    for (shift, s) in entries {
        let (_, start, span) = bucket_of(s.second.saturating_add(shift));
        out.entry((!s.warmup, start))
            .or_insert_with(|| Second {
                second: start,
                span,
                warmup: s.warmup,
                ..Default::default()
            })
            .add(s);
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_time_without_gaps() {
        assert_eq!(bucket_of(0), (0, 0, 1));
        assert_eq!(bucket_of(3_599), (3_599, 3_599, 1));
        assert_eq!(bucket_of(3_600), (3_600, 3_600, 300));
        assert_eq!(bucket_of(3_899), (3_600, 3_600, 300));
        assert_eq!(bucket_of(3_900), (3_601, 3_900, 300));
        assert_eq!(bucket_of(86_399), (3_875, 86_100, 300));
        assert_eq!(bucket_of(86_400), (3_876, 86_400, 3_600));
        // Every index maps back to the bucket it came from, and buckets are contiguous.
        let mut next = 0;
        for i in 0..6_000 {
            let (start, span) = bucket_at(i);
            assert_eq!(start, next, "bucket {i}");
            assert_eq!(bucket_of(start), (i, start, span));
            assert_eq!(bucket_of(start + span - 1).0, i);
            next = start + span;
        }
        // 31 days (the longest run plus its day of slack) fit in 4,596 entries.
        assert_eq!(bucket_of(31 * 86_400 - 1).0 + 1, 3_600 + 276 + 30 * 24);
        assert!(bucket_of(u64::MAX).0 > 0, "no overflow on a forged second");
    }

    /// A per-second timeline of `secs` seconds with varying counts.
    fn per_second(secs: u64, seed: u64) -> Vec<Second> {
        let mut x = seed;
        (0..secs)
            .map(|second| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Second {
                    second,
                    ops: x % 1_000,
                    bytes: x % 1_000_000,
                    errors: x % 3,
                    latency_sum_us: x % 10_000_000,
                    ..Default::default()
                }
            })
            .collect()
    }

    /// Compacted as the recorder does: each second added to the entry that holds it.
    fn compacted(raw: &[Second]) -> Vec<Second> {
        let mut t = vec![];
        for s in raw {
            Second::at(&mut t, s.second).add(s);
        }
        t
    }

    #[test]
    fn merging_compacted_timelines_is_exact() {
        // Two workers over 30 hours: past both tier boundaries.
        let secs = 30 * 3_600;
        let (a, b) = (per_second(secs, 7), per_second(secs, 11));
        let merged = merge(compacted(&a).iter().chain(&compacted(&b)));
        // The same as compacting the per-second sums...
        let summed: Vec<Second> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| {
                let mut s = x.clone();
                s.add(y);
                s
            })
            .collect();
        assert_eq!(merged, compacted(&summed));
        // ... and the same as merging the per-second timelines (older summaries) directly.
        assert_eq!(merged, merge(a.iter().chain(&b)));
        assert_eq!(merged.len(), 3_600 + 276 + 6);
        for f in [
            |s: &Second| s.ops,
            |s: &Second| s.bytes,
            |s: &Second| s.errors,
            |s: &Second| s.latency_sum_us,
        ] {
            let raw: u64 = a.iter().chain(&b).map(f).sum();
            assert_eq!(merged.iter().map(f).sum::<u64>(), raw);
        }
        // An hour entry of the third tier holds exactly its 3,600 seconds.
        let last = merged.last().unwrap();
        assert_eq!((last.second, last.span), (29 * 3_600, 3_600));
        let want: u64 = summed[29 * 3_600..].iter().map(|s| s.ops).sum();
        assert_eq!(last.ops, want);
        assert_eq!(last.per_second(last.ops), want as f64 / 3_600.0);
    }

    #[test]
    fn warmup_entries_merge_apart_and_come_first() {
        let mut warm = vec![];
        Second::at_stage(&mut warm, 1, true).ops = 5;
        let mut measured = vec![];
        Second::at(&mut measured, 1).ops = 7;
        let m = merge(measured.iter().chain(&warm).chain(&warm));
        let shape: Vec<(bool, u64, u64)> = m.iter().map(|s| (s.warmup, s.second, s.ops)).collect();
        assert_eq!(
            shape,
            [(true, 0, 0), (true, 1, 10), (false, 0, 0), (false, 1, 7)]
        );
    }

    #[test]
    fn older_per_second_entries_still_parse() {
        let s: Second =
            serde_json::from_str(r#"{"second":4,"ops":3,"bytes":2,"errors":1}"#).unwrap();
        assert_eq!((s.span, s.warmup, s.latency_sum_us), (1, false, 0));
        // And a second entry of a current summary is written as before.
        let json = serde_json::to_string(&Second {
            second: 4,
            ops: 3,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(json, r#"{"second":4,"ops":3,"bytes":0,"errors":0}"#);
    }

    #[test]
    fn shifted_timelines_land_on_the_wall_clock_seconds() {
        // Worker a started at 0 s, worker b 3 s later: b's second 0 is a's second 3.
        let mut a = vec![];
        let mut b = vec![];
        for sec in 0..5 {
            Second::at(&mut a, sec).ops = 10;
            Second::at(&mut b, sec).ops = 1;
        }
        let m = merge_shifted(a.iter().map(|s| (0, s)).chain(b.iter().map(|s| (3, s))));
        let ops: Vec<(u64, u64)> = m.iter().map(|s| (s.second, s.ops)).collect();
        assert_eq!(
            ops,
            [
                (0, 10),
                (1, 10),
                (2, 10),
                (3, 11),
                (4, 11),
                (5, 1),
                (6, 1),
                (7, 1)
            ]
        );
        assert_eq!(
            m.iter().map(|s| s.ops).sum::<u64>(),
            55,
            "counts add exactly"
        );
    }
}
