//! Live Prometheus metrics of a worker.
//!
//! Names are part of the product: the Grafana dashboard and the operator read them.
//! - `benchrun_ops_total{op}`: completed operations (successful or not)
//! - `benchrun_bytes_total{op}`: payload bytes moved by successful operations
//! - `benchrun_errors_total{op,kind}`: failed operations by kind (`timeout`, `http_503`, ...)
//! - `benchrun_op_duration_seconds{op}`: latency histogram of successful operations
//! - `benchrun_ttfb_seconds{op}`: time to first byte of successful GETs (from the same start
//!   as their latency), as a histogram with the latency's buckets
//! - `benchrun_inflight_ops`: operations in flight
//! - `benchrun_training_compute_seconds_total`, `benchrun_training_step_seconds_total`:
//!   training workloads' accelerators, time computing and time per step (waiting for the
//!   batch, then computing), summed over the worker's accelerators: their rates' ratio is the
//!   worker's live accelerator utilization (AU)
//! - `benchrun_training_data_wait_seconds`: histogram of each training step's wait for its
//!   batch
//! - `benchrun_stage`: 0 idle, 1 preparing, 2 ready, 3 running, 4 cleaning up, 5 done

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

use benchrun_api::metric_family::{MetricFamily, MetricKind};

use crate::spec::OpKind;

/// Where a worker is in its life; exported as `benchrun_stage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Not started.
    Idle = 0,
    /// Opening the target and preparing the dataset.
    Preparing = 1,
    /// Prepared, waiting for the start.
    Ready = 2,
    /// In the measured stage.
    Running = 3,
    /// Deleting what the run created.
    CleaningUp = 4,
    /// Finished.
    Done = 5,
}

/// The live metrics of one worker: Prometheus families and cheap totals.
#[derive(Debug)]
pub struct Metrics {
    /// The registry served on `/metrics`.
    pub registry: Registry,
    ops: [IntCounter; OpKind::ALL.len()],
    bytes: [IntCounter; OpKind::ALL.len()],
    errors: IntCounterVec,
    /// All errors, for the progress line (the labelled family has no cheap sum).
    error_total: AtomicU64,
    latency: [Histogram; OpKind::ALL.len()],
    /// GET's time to first byte (the only op that has one).
    ttfb_get: Histogram,
    inflight: IntGauge,
    stage: IntGauge,
    /// Training: accelerators' compute time, and their step time (wait + compute).
    training_compute: prometheus::Counter,
    training_step: prometheus::Counter,
    /// Training: each step's wait for its batch.
    training_wait: Histogram,
    /// The registered families, as `/metrics` exports them.
    families: Vec<MetricFamily>,
    ready: AtomicBool,
}

impl Metrics {
    /// Every family registered, at zero.
    pub fn new() -> Self {
        let registry = Registry::new();
        let ops_vec = IntCounterVec::new(
            Opts::new(
                "benchrun_ops_total",
                "Completed operations, successful or not",
            ),
            &["op"],
        )
        .expect("valid metric");
        let bytes_vec = IntCounterVec::new(
            Opts::new(
                "benchrun_bytes_total",
                "Payload bytes moved by successful operations",
            ),
            &["op"],
        )
        .expect("valid metric");
        let errors = IntCounterVec::new(
            Opts::new("benchrun_errors_total", "Failed operations by kind"),
            &["op", "kind"],
        )
        .expect("valid metric");
        // 50us .. ~105s: storage latencies from page-cache hits to stalled object stores.
        let buckets = prometheus::exponential_buckets(50e-6, 2.0, 22).expect("valid buckets");
        let latency_vec = prometheus::HistogramVec::new(
            HistogramOpts::new(
                "benchrun_op_duration_seconds",
                "Latency of successful operations",
            )
            .buckets(buckets.clone()),
            &["op"],
        )
        .expect("valid metric");
        // Labelled by op like the latency, so a panel can put the two side by side.
        let ttfb_vec = prometheus::HistogramVec::new(
            HistogramOpts::new(
                "benchrun_ttfb_seconds",
                "Time to first byte of successful GETs, from the same start as their latency",
            )
            .buckets(buckets),
            &["op"],
        )
        .expect("valid metric");
        let inflight =
            IntGauge::new("benchrun_inflight_ops", "Operations in flight").expect("valid metric");
        let stage = IntGauge::new(
            "benchrun_stage",
            "Worker stage: 0 idle, 1 preparing, 2 ready, 3 running, 4 cleaning up, 5 done",
        )
        .expect("valid metric");
        let training_compute = prometheus::Counter::new(
            "benchrun_training_compute_seconds_total",
            "Training workloads: time the emulated accelerators computed, summed over accelerators",
        )
        .expect("valid metric");
        let training_step = prometheus::Counter::new(
            "benchrun_training_step_seconds_total",
            "Training workloads: the accelerators' step time (waiting for the batch, then computing), summed over accelerators; compute / step is the live AU",
        )
        .expect("valid metric");
        // 10us .. ~84s: from a batch already prefetched to a stalled store.
        let training_wait = Histogram::with_opts(
            HistogramOpts::new(
                "benchrun_training_data_wait_seconds",
                "Training workloads: each step's wait for its batch of samples",
            )
            .buckets(prometheus::exponential_buckets(10e-6, 2.0, 24).expect("valid buckets")),
        )
        .expect("valid metric");
        let mut families = Vec::new();
        for (c, kind) in [
            (
                Box::new(ops_vec.clone()) as Box<dyn prometheus::core::Collector>,
                MetricKind::Counter,
            ),
            (Box::new(bytes_vec.clone()), MetricKind::Counter),
            (Box::new(errors.clone()), MetricKind::Counter),
            (Box::new(latency_vec.clone()), MetricKind::Histogram),
            (Box::new(ttfb_vec.clone()), MetricKind::Histogram),
            (Box::new(inflight.clone()), MetricKind::Gauge),
            (Box::new(stage.clone()), MetricKind::Gauge),
            (Box::new(training_compute.clone()), MetricKind::Counter),
            (Box::new(training_step.clone()), MetricKind::Counter),
            (Box::new(training_wait.clone()), MetricKind::Histogram),
        ] {
            families.extend(MetricFamily::of(c.as_ref(), kind));
            registry.register(c).expect("metric names are unique");
        }
        // Resolve label values once so the hot path is a plain atomic add.
        let by_op = |f: &dyn Fn(&str) -> IntCounter| OpKind::ALL.map(|op| f(op.as_str()));
        Self {
            ops: by_op(&|op| ops_vec.with_label_values(&[op])),
            bytes: by_op(&|op| bytes_vec.with_label_values(&[op])),
            error_total: AtomicU64::new(0),
            errors,
            latency: OpKind::ALL.map(|op| latency_vec.with_label_values(&[op.as_str()])),
            ttfb_get: ttfb_vec.with_label_values(&[OpKind::Get.as_str()]),
            inflight,
            stage,
            training_compute,
            training_step,
            training_wait,
            registry,
            families,
            ready: AtomicBool::new(false),
        }
    }

    /// The families registered, as `/metrics` exports them (label values aside).
    pub fn families(&self) -> &[MetricFamily] {
        &self.families
    }

    /// One more operation in flight.
    pub fn op_started(&self) {
        self.inflight.inc();
    }

    /// An operation succeeded.
    pub fn op_done(&self, op: OpKind, latency: Duration, bytes: u64) {
        let i = op.index();
        self.inflight.dec();
        self.ops[i].inc();
        self.bytes[i].inc_by(bytes);
        self.latency[i].observe(latency.as_secs_f64());
    }

    /// A successful GET's time to first byte.
    pub fn get_ttfb(&self, ttfb: Duration) {
        self.ttfb_get.observe(ttfb.as_secs_f64());
    }

    /// An operation failed, with its error kind.
    pub fn op_failed(&self, op: OpKind, kind: &str) {
        let i = op.index();
        self.inflight.dec();
        self.ops[i].inc();
        self.error_total.fetch_add(1, Ordering::Relaxed);
        self.errors.with_label_values(&[op.as_str(), kind]).inc();
    }

    /// One training step of one accelerator: `wait` for its batch, then `compute`.
    pub fn training_step(&self, wait: Duration, compute: Duration) {
        self.training_wait.observe(wait.as_secs_f64());
        self.training_compute.inc_by(compute.as_secs_f64());
        self.training_step.inc_by((wait + compute).as_secs_f64());
    }

    /// Enter `stage` (ready from `Ready` on).
    pub fn set_stage(&self, stage: Stage) {
        self.stage.set(stage as i64);
        self.ready.store(
            matches!(stage, Stage::Ready | Stage::Running | Stage::Done),
            Ordering::Relaxed,
        );
    }

    /// Whether `/readyz` answers 200.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Totals over all ops: (operations, bytes, errors), for the progress line.
    pub fn totals(&self) -> (u64, u64, u64) {
        let sum = |cs: &[IntCounter; OpKind::ALL.len()]| cs.iter().map(|c| c.get()).sum::<u64>();
        (
            sum(&self.ops),
            sum(&self.bytes),
            self.error_total.load(Ordering::Relaxed),
        )
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for well-formed metrics.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_the_documented_names() {
        let m = Metrics::new();
        m.op_started();
        m.op_done(OpKind::Get, Duration::from_millis(3), 4096);
        m.get_ttfb(Duration::from_millis(1));
        m.op_started();
        m.op_failed(OpKind::Put, "http_503");
        let text = m.render();
        assert!(text.contains("benchrun_ops_total{op=\"get\"} 1"), "{text}");
        assert!(
            text.contains("benchrun_bytes_total{op=\"get\"} 4096"),
            "{text}"
        );
        assert!(
            text.contains("benchrun_errors_total{kind=\"http_503\",op=\"put\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("benchrun_op_duration_seconds_bucket{op=\"get\",le="),
            "{text}"
        );
        assert!(
            text.contains("benchrun_ttfb_seconds_count{op=\"get\"} 1"),
            "{text}"
        );
        assert!(text.contains("benchrun_inflight_ops 0"), "{text}");
        assert_eq!(m.totals(), (2, 4096, 1));
    }
}
