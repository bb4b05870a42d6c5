//! Per-task recording: no locks or shared cache lines on the hot path; tasks' recorders are
//! merged once at the end. Live counters for `/metrics` and the progress line go to
//! [`Metrics`](crate::metrics::Metrics) at the same time.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::size_buckets::{self, SizeBuckets};
use crate::spec::{OpKind, Workload};
use crate::stats::{InFlight, OpStats, OpenLoop, Second};
use crate::targets::TargetError;

/// What one finished operation contributes.
#[derive(Debug)]
pub struct OpResult {
    /// The operation.
    pub op: OpKind,
    /// Latency (from the intended start in open loop).
    pub latency: Duration,
    /// When it finished, relative to the start of the stage's tasks (of the warm-up, if the
    /// workload has one).
    pub finished_at: Duration,
    /// Its figures, or why it failed.
    pub outcome: Result<Done, TargetError>,
    /// With several endpoints: the index of the one that served it.
    pub endpoint: Option<usize>,
}

/// A successful operation's figures.
#[derive(Debug, Default)]
pub struct Done {
    /// Payload bytes moved.
    pub bytes: u64,
    /// Requests (or syscalls) it took.
    pub requests: u32,
    /// Time to first byte, for a GET.
    pub ttfb: Option<Duration>,
    /// HEADs sent before a GET (`read.headBeforeGet`), counted in `requests` too.
    pub heads: u32,
    /// Read buffers a GET newly allocated (see [`GetOutcome::buffers`](crate::targets::GetOutcome::buffers)).
    pub buffers: u32,
}

/// One task's statistics.
///
/// # Memory
///
/// A latency histogram (1 us to 1 h, 3 significant digits) takes
/// [`Latency::bytes`](crate::stats::Latency::bytes) (about 190 KiB). A task allocates one
/// for each operation of its mix with a weight above 0, plus one for GET time-to-first-byte,
/// and nothing for the others: [`Recorder::histogram_bytes_per_task`]. A worker's histograms
/// take at most `concurrency` x that, which
/// [`Workload::validate`](crate::spec::Workload::validate) holds under
/// [`MAX_HISTOGRAM_BYTES`](crate::spec::limits::MAX_HISTOGRAM_BYTES) (4 GiB). Beside them a
/// worker holds per task one read buffer of at most
/// [`MAX_CHUNK_SIZE`](crate::spec::limits::MAX_CHUNK_SIZE) (or a whole object of at most
/// [`MAX_WHOLE_OBJECT_BUFFER`](crate::spec::limits::MAX_WHOLE_OBJECT_BUFFER)), one PUT payload
/// (generated for each PUT: the object's size, see [`crate::datagen`]), and the timeline (56 bytes
/// an entry: at most 5,700 for a 30-day run, see [`crate::stats::Second`]). With a warm-up, a
/// task also keeps the warm-up's histograms (as many again, counted by validation). When the
/// workload's sizes vary, a task also keeps one histogram per size bucket its ops fall in,
/// only if every bucket possible fits beside the rest under the same bound
/// ([`size_buckets::kept`]).
#[derive(Debug)]
pub struct Recorder {
    /// Per op (by [`OpKind::index`]); `None` for an op the mix never picks.
    pub ops: [Option<OpStats>; OpKind::ALL.len()],
    /// All ops together, per second of the measured stage.
    pub timeline: Vec<Second>,
    /// Open loop: when ops started against when they were due (`due` is set by the run).
    pub open_loop: OpenLoop,
    /// The warm-up's ops (those finished before `warmup`), apart; allocated when the first
    /// one is recorded, so a run without a warm-up costs nothing more.
    pub warm_ops: [Option<OpStats>; OpKind::ALL.len()],
    /// The warm-up's seconds, marked `warmup`.
    pub warm_timeline: Vec<Second>,
    /// With several endpoints: the measured stage's ops of all kinds per endpoint (by index
    /// into [`Target::endpoints`](crate::targets::Target::endpoints)), grown as endpoints are
    /// first seen; one histogram each, counted by validation.
    pub endpoints: Vec<OpStats>,
    /// Per op whose sizes vary (`None` for the others, and for every op when the workload
    /// keeps no per-size figures): its measured successful ops by size bucket. A bucket's
    /// histogram is allocated when the first op of its size is recorded.
    pub sizes: [Option<SizeBuckets>; OpKind::ALL.len()],
    /// When the last op of any stage finished, from the schedule's start: where the
    /// measured stage really ends (joining the tasks and merging this recorder is not part
    /// of it).
    pub last_finished: Option<Duration>,
    /// The measured stage's failed ops' latency, per op and error kind.
    pub failed: super::failed::FailedLatency,
    /// A `duration` stage: its ops still running at the deadline.
    pub in_flight: InFlight,
    /// Length of the warm-up (zero: none): ops finished before it are the warm-up's.
    warmup: Duration,
    metrics: Arc<Metrics>,
}

impl Recorder {
    /// A recorder with histograms for `ops` only (the ops of the mix).
    pub fn new(metrics: Arc<Metrics>, ops: impl IntoIterator<Item = OpKind>) -> Self {
        let mut stats: [Option<OpStats>; OpKind::ALL.len()] = Default::default();
        for op in ops {
            stats[op.index()].get_or_insert_with(OpStats::default);
        }
        Self {
            ops: stats,
            timeline: Vec::new(),
            open_loop: OpenLoop::default(),
            warm_ops: Default::default(),
            warm_timeline: Vec::new(),
            endpoints: Vec::new(),
            sizes: Default::default(),
            last_finished: None,
            failed: Default::default(),
            in_flight: InFlight::default(),
            warmup: Duration::ZERO,
            metrics,
        }
    }

    /// A task's recorder for `w`: histograms for its mix, and per-size buckets for the ops
    /// whose sizes vary when [`size_buckets::kept`] says the run keeps them.
    pub fn for_workload(metrics: Arc<Metrics>, w: &Workload) -> Self {
        let mut r = Self::new(metrics, Self::mix_ops(w));
        if size_buckets::kept(w) {
            for (op, _) in size_buckets::varying_ops(w) {
                r.sizes[op.index()] = Some(SizeBuckets::new());
            }
        }
        r
    }

    /// The per-size buckets of the ops that have them, for the summary.
    pub fn sizes_by_op(&mut self) -> std::collections::BTreeMap<OpKind, SizeBuckets> {
        OpKind::ALL
            .iter()
            .zip(std::mem::take(&mut self.sizes))
            .filter_map(|(op, b)| b.map(|b| (*op, b)))
            .filter(|(_, b)| !b.is_empty())
            .collect()
    }

    /// The same recorder, putting ops that finish in the first `warmup` apart.
    pub fn with_warmup(mut self, warmup: Duration) -> Self {
        self.warmup = warmup;
        self
    }

    /// The ops of `w`'s mix (weight above 0).
    pub fn mix_ops(w: &Workload) -> Vec<OpKind> {
        crate::stats::mix_ops(w)
    }

    /// Histogram memory of one task running `w`: one per op of the mix, plus GET's TTFB.
    /// Computed in the api crate, where [`Workload::validate`] bounds it.
    pub fn histogram_bytes_per_task(w: &Workload) -> u64 {
        crate::stats::histogram_bytes_per_task(w)
    }

    /// Open loop: an op due at `due` started at `now` (its lag counted apart from latency).
    pub fn started_late(&mut self, due: tokio::time::Instant, now: tokio::time::Instant) {
        let lag = now.saturating_duration_since(due);
        self.open_loop
            .started(lag.as_micros().try_into().unwrap_or(u64::MAX));
    }

    /// Record one operation; returns the error kind if it failed. An op that finished in the
    /// warm-up counts in the warm-up's figures, any other in the measured stage's (an op
    /// in flight when the warm-up ends is measured, as fio's `ramp_time` counts it).
    pub fn record(&mut self, r: OpResult) -> Option<String> {
        self.last_finished = self.last_finished.max(Some(r.finished_at));
        let measured = r.finished_at.checked_sub(self.warmup);
        if let (Some(i), Some(_)) = (r.endpoint, measured) {
            if self.endpoints.len() <= i {
                self.endpoints.resize_with(i + 1, OpStats::default);
            }
            let e = &mut self.endpoints[i];
            e.count += 1;
            match &r.outcome {
                Ok(done) => {
                    e.bytes += done.bytes;
                    e.requests += done.requests as u64;
                    e.heads += done.heads as u64;
                    e.buffers_allocated += done.buffers as u64;
                    e.latency.record(r.latency);
                }
                Err(err) => {
                    e.errors += 1;
                    *e.errors_by_kind.entry(err.kind()).or_default() += 1;
                }
            }
        }
        let (s, t, sizes) = match measured {
            Some(measured) => (
                self.ops[r.op.index()].get_or_insert_with(OpStats::default),
                Second::at(&mut self.timeline, measured.as_secs()),
                self.sizes[r.op.index()].as_mut(),
            ),
            None => (
                self.warm_ops[r.op.index()].get_or_insert_with(OpStats::default),
                Second::at_stage(&mut self.warm_timeline, r.finished_at.as_secs(), true),
                None,
            ),
        };
        s.count += 1;
        t.ops += 1;
        match r.outcome {
            Ok(done) => {
                s.bytes += done.bytes;
                s.requests += done.requests as u64;
                s.heads += done.heads as u64;
                s.buffers_allocated += done.buffers as u64;
                s.latency.record(r.latency);
                if let Some(ttfb) = done.ttfb {
                    s.ttfb.get_or_insert_with(Default::default).record(ttfb);
                    if r.op == OpKind::Get {
                        self.metrics.get_ttfb(ttfb);
                    }
                }
                if let Some(b) = sizes {
                    size_buckets::record(b, done.bytes, done.requests as u64, r.latency);
                }
                t.bytes += done.bytes;
                t.latency_sum_us = t
                    .latency_sum_us
                    .saturating_add(r.latency.as_micros().try_into().unwrap_or(u64::MAX));
                self.metrics.op_done(r.op, r.latency, done.bytes);
                None
            }
            Err(e) => {
                let kind = e.kind();
                if measured.is_some() {
                    self.failed.record(r.op, &kind, r.latency);
                }
                if let Some(d) = e.data_error() {
                    crate::data_errors::add(&mut s.data_errors, d);
                }
                s.errors += 1;
                *s.errors_by_kind.entry(kind.clone()).or_default() += 1;
                t.errors += 1;
                self.metrics.op_failed(r.op, &kind);
                Some(kind)
            }
        }
    }

    /// Fold another task's recorder into this one.
    pub fn absorb(&mut self, o: Recorder) {
        self.last_finished = self.last_finished.max(o.last_finished);
        self.in_flight.merge(&o.in_flight);
        self.failed.merge(o.failed);
        for (a, b) in self.ops.iter_mut().zip(o.ops.iter()) {
            if let Some(b) = b {
                a.get_or_insert_with(OpStats::default).merge(b);
            }
        }
        for s in o.timeline {
            Second::at(&mut self.timeline, s.second).add(&s);
        }
        for (a, b) in self.warm_ops.iter_mut().zip(o.warm_ops.iter()) {
            if let Some(b) = b {
                a.get_or_insert_with(OpStats::default).merge(b);
            }
        }
        for s in o.warm_timeline {
            Second::at_stage(&mut self.warm_timeline, s.second, true).add(&s);
        }
        self.open_loop.merge(&o.open_loop);
        if self.endpoints.len() < o.endpoints.len() {
            self.endpoints
                .resize_with(o.endpoints.len(), OpStats::default);
        }
        for (a, b) in self.endpoints.iter_mut().zip(&o.endpoints) {
            a.merge(b);
        }
        for (a, b) in self.sizes.iter_mut().zip(o.sizes.iter()) {
            if let Some(b) = b {
                size_buckets::merge(a.get_or_insert_with(SizeBuckets::new), b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Latency;

    #[test]
    fn ops_finished_in_the_warmup_are_recorded_apart() {
        let mut r = Recorder::new(Arc::new(Metrics::new()), [OpKind::Get])
            .with_warmup(Duration::from_secs(2));
        for (ms, ok) in [
            (500, true),
            (1_500, false),
            (1_999, true),
            (2_000, true),
            (3_200, true),
        ] {
            r.record(OpResult {
                op: OpKind::Get,
                latency: Duration::from_millis(3),
                finished_at: Duration::from_millis(ms),
                outcome: if ok {
                    Ok(Done {
                        bytes: 10,
                        requests: 1,
                        ..Default::default()
                    })
                } else {
                    Err(TargetError::Other("x".into()))
                },
                endpoint: Some(ms as usize % 2),
            });
        }
        let (warm, measured) = (
            r.warm_ops[OpKind::Get.index()].as_ref().unwrap(),
            r.ops[OpKind::Get.index()].as_ref().unwrap(),
        );
        assert_eq!((warm.count, warm.errors, warm.bytes), (3, 1, 20));
        assert_eq!(
            (measured.count, measured.errors, measured.bytes),
            (2, 0, 20)
        );
        // Warm-up seconds from the warm-up's start, marked; measured ones from the measured
        // stage's start (2.0 s is its second 0, 3.2 s its second 1).
        let shape = |t: &[Second]| -> Vec<(u64, bool, u64)> {
            t.iter().map(|s| (s.second, s.warmup, s.ops)).collect()
        };
        assert_eq!(shape(&r.warm_timeline), [(0, true, 1), (1, true, 2)]);
        assert_eq!(shape(&r.timeline), [(0, false, 1), (1, false, 1)]);
        // Per endpoint: the measured stage's ops only (2,000 ms on endpoint 0, 3,200 on 0).
        let per: Vec<(u64, u64)> = r.endpoints.iter().map(|e| (e.count, e.bytes)).collect();
        assert_eq!(per, [(2, 20)]);
        // Folded into another recorder, both stay apart.
        let mut all = Recorder::new(Arc::new(Metrics::new()), [OpKind::Get]);
        all.absorb(r);
        assert_eq!(all.warm_ops[OpKind::Get.index()].as_ref().unwrap().count, 3);
        assert_eq!(all.ops[OpKind::Get.index()].as_ref().unwrap().count, 2);
        assert_eq!(shape(&all.warm_timeline), [(0, true, 1), (1, true, 2)]);
    }

    #[test]
    fn histograms_only_for_the_ops_of_the_mix() {
        let w = Workload::from_yaml(
            "target: file:///tmp/x\nduration: 1s\nops: [{op: put}, {op: stat, weight: 0}]\n",
        )
        .unwrap();
        assert_eq!(Recorder::mix_ops(&w), vec![OpKind::Put]);
        let r = Recorder::new(Arc::new(Metrics::new()), Recorder::mix_ops(&w));
        assert_eq!(r.ops.iter().filter(|o| o.is_some()).count(), 1);
        assert!(r.ops[OpKind::Put.index()].is_some());
        assert_eq!(Recorder::histogram_bytes_per_task(&w), Latency::bytes());
        // A histogram is a fixed, known size: ~190 KiB, five of them about 1 MiB.
        let b = Latency::bytes();
        assert!((100 << 10..300 << 10).contains(&b), "{b}");
    }
}
