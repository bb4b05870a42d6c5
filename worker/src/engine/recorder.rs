//! Per-task recording: no locks or shared cache lines on the hot path; tasks' recorders are
//! merged once at the end. Live counters for `/metrics` and the progress line go to
//! [`Metrics`](crate::metrics::Metrics) at the same time.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Metrics;
use crate::spec::OpKind;
use crate::stats::{OpStats, Second};
use crate::targets::TargetError;

/// What one finished operation contributes.
#[derive(Debug)]
pub struct OpResult {
    pub op: OpKind,
    /// Latency (from the intended start in open loop).
    pub latency: Duration,
    /// When it finished, relative to the start of the measured stage.
    pub finished_at: Duration,
    pub outcome: Result<Done, TargetError>,
}

/// A successful operation's figures.
#[derive(Debug, Default)]
pub struct Done {
    pub bytes: u64,
    pub requests: u32,
    pub ttfb: Option<Duration>,
}

#[derive(Debug)]
pub struct Recorder {
    pub ops: [OpStats; 5],
    pub timeline: Vec<Second>,
    metrics: Arc<Metrics>,
}

impl Recorder {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            ops: Default::default(),
            timeline: Vec::new(),
            metrics,
        }
    }

    /// Record one operation; returns the error kind if it failed.
    pub fn record(&mut self, r: OpResult) -> Option<String> {
        let s = &mut self.ops[r.op.index()];
        s.count += 1;
        let t = Second::at(&mut self.timeline, r.finished_at.as_secs());
        t.ops += 1;
        match r.outcome {
            Ok(done) => {
                s.bytes += done.bytes;
                s.requests += done.requests as u64;
                s.latency.record(r.latency);
                if let Some(ttfb) = done.ttfb {
                    s.ttfb.get_or_insert_with(Default::default).record(ttfb);
                }
                t.bytes += done.bytes;
                self.metrics.op_done(r.op, r.latency, done.bytes);
                None
            }
            Err(e) => {
                let kind = e.kind();
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
        for (a, b) in self.ops.iter_mut().zip(o.ops.iter()) {
            a.merge(b);
        }
        for s in o.timeline {
            Second::at(&mut self.timeline, s.second).add(&s);
        }
    }
}
