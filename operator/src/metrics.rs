//! The operator's own Prometheus metrics.
//! - `benchrun_operator_reconciles_total`: reconcile calls
//! - `benchrun_operator_reconcile_errors_total{error}`: failed reconciles by error label
//! - `benchrun_operator_reconcile_duration_seconds`: time per reconcile
//! - `benchrun_operator_runs{phase}`: runs this operator has seen, by current phase
//! - `benchrun_operator_run_ops_per_second{namespace,run,op}` and
//!   `benchrun_operator_run_p99_seconds{namespace,run,op}`: merged results of finished runs
//! - `benchrun_operator_run_phase{namespace,run,phase}`: 1 for each run's current phase, else 0
//! - `benchrun_operator_run_progress_ops{namespace,run}` and
//!   `benchrun_operator_run_elapsed_seconds{namespace,run}`: live progress of running runs
//! - `benchrun_operator_run_start_skew_seconds{namespace,run}`: measured start skew
//! - `benchrun_operator_leader`: 1 while this replica runs the controller (leads), else 0
//! - `benchrun_operator_control_plane_operation_seconds{operation,storage_class}`: latency of
//!   each control-plane operation (`provision`, `attach`, `firstIO`, `delete`) of control-plane
//!   runs, observed as it ends; `storage_class` is the run's (`default` when it names none)
//! - `benchrun_operator_control_plane_errors_total{operation,storage_class,kind}`: failed ones
//! - `benchrun_schedule_last_run_regressed{namespace,schedule}`: 1 when a schedule's newest
//!   finished run regressed against its baseline, 0 when it did not (or failed)
//! - `benchrun_schedule_failures_in_a_row{namespace,schedule}`: its newest finished runs that
//!   failed, in a row
//! - `benchrun_schedule_last_run_ops_per_second{namespace,schedule,op}` and
//!   `benchrun_schedule_last_run_p99_seconds{namespace,schedule,op}`: the figures of its newest
//!   succeeded run, one step per run over time

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use benchrun_api::metric_family::{MetricFamily, MetricKind};

use crate::crd::{BenchmarkRunStatus, Phase};

const ALL_PHASES: [Phase; 6] = [
    Phase::Pending,
    Phase::Preparing,
    Phase::Running,
    Phase::Collecting,
    Phase::Succeeded,
    Phase::Failed,
];

/// The operator's metric families, registered in one registry.
#[derive(Debug)]
pub struct Metrics {
    /// The registry `/metrics` renders.
    pub registry: Registry,
    reconciles: IntCounter,
    errors: IntCounterVec,
    duration: Histogram,
    runs: IntGaugeVec,
    run_ops: GaugeVec,
    run_p99: GaugeVec,
    run_phase: IntGaugeVec,
    run_progress_ops: GaugeVec,
    run_elapsed: GaugeVec,
    run_skew: GaugeVec,
    run_thresholds_met: IntGaugeVec,
    run_regressed: IntGaugeVec,
    leader: IntGauge,
    schedule_regressed: IntGaugeVec,
    schedule_failures: IntGaugeVec,
    schedule_ops: GaugeVec,
    schedule_p99: GaugeVec,
    /// The ops each schedule's figure series name, by `namespace/name`.
    schedule_ops_seen: Mutex<HashMap<String, BTreeSet<String>>>,
    /// The operator's Kubernetes API requests by verb (see `apicount`).
    pub api_requests: IntCounterVec,
    control_plane_seconds: HistogramVec,
    control_plane_errors: IntCounterVec,
    /// Every run with series, by `namespace/name`: its phase and the ops its result series
    /// name, so that its series can all be removed without its status (a run deleted without
    /// the finalizer's pass leaves none to read).
    seen: Mutex<HashMap<String, Seen>>,
    /// The registered families, as `/metrics` exports them.
    families: Vec<MetricFamily>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every family, registered in a new registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        // Metric definitions are constants; failing here is a programming error caught by tests.
        let reconciles = IntCounter::new("benchrun_operator_reconciles_total", "Reconcile calls")
            .expect("metric");
        let errors = IntCounterVec::new(
            Opts::new(
                "benchrun_operator_reconcile_errors_total",
                "Failed reconciles by error",
            ),
            &["error"],
        )
        .expect("metric");
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "benchrun_operator_reconcile_duration_seconds",
                "Time per reconcile",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )
        .expect("metric");
        let runs = IntGaugeVec::new(
            Opts::new("benchrun_operator_runs", "Runs by phase"),
            &["phase"],
        )
        .expect("metric");
        let run_ops = GaugeVec::new(
            Opts::new(
                "benchrun_operator_run_ops_per_second",
                "Merged throughput of finished runs",
            ),
            &["namespace", "run", "op"],
        )
        .expect("metric");
        let run_p99 = GaugeVec::new(
            Opts::new(
                "benchrun_operator_run_p99_seconds",
                "Merged p99 latency of finished runs",
            ),
            &["namespace", "run", "op"],
        )
        .expect("metric");
        let run_phase = IntGaugeVec::new(
            Opts::new(
                "benchrun_operator_run_phase",
                "1 for each run's current phase",
            ),
            &["namespace", "run", "phase"],
        )
        .expect("metric");
        let run_progress_ops = GaugeVec::new(
            Opts::new(
                "benchrun_operator_run_progress_ops",
                "Operations the workers of a running run have completed so far",
            ),
            &["namespace", "run"],
        )
        .expect("metric");
        let run_elapsed = GaugeVec::new(
            Opts::new(
                "benchrun_operator_run_elapsed_seconds",
                "Seconds since a running run's common start",
            ),
            &["namespace", "run"],
        )
        .expect("metric");
        let run_skew = GaugeVec::new(
            Opts::new(
                "benchrun_operator_run_start_skew_seconds",
                "Largest difference between the workers' measured starts",
            ),
            &["namespace", "run"],
        )
        .expect("metric");
        let run_thresholds_met = IntGaugeVec::new(
            Opts::new(
                "benchrun_operator_run_thresholds_met",
                "1 when a finished run met every limit of spec.thresholds, 0 when it missed one",
            ),
            &["namespace", "run"],
        )
        .expect("metric");
        let run_regressed = IntGaugeVec::new(
            Opts::new(
                "benchrun_operator_run_regressed",
                "1 when a finished run regressed against spec.baselineRef beyond its tolerance, else 0",
            ),
            &["namespace", "run"],
        )
        .expect("metric");
        let api_requests = IntCounterVec::new(
            Opts::new(
                "benchrun_operator_api_requests_total",
                "Kubernetes API requests the operator sent, by verb",
            ),
            &["verb"],
        )
        .expect("metric");
        let leader = IntGauge::new(
            "benchrun_operator_leader",
            "1 while this replica runs the controller (holds the leader lease)",
        )
        .expect("metric");
        let schedule_regressed = IntGaugeVec::new(
            Opts::new(
                "benchrun_schedule_last_run_regressed",
                "1 when the newest finished run of a BenchmarkSchedule regressed against its baseline, else 0",
            ),
            &["namespace", "schedule"],
        )
        .expect("metric");
        let schedule_failures = IntGaugeVec::new(
            Opts::new(
                "benchrun_schedule_failures_in_a_row",
                "Newest finished runs of a BenchmarkSchedule that failed, in a row",
            ),
            &["namespace", "schedule"],
        )
        .expect("metric");
        let schedule_ops = GaugeVec::new(
            Opts::new(
                "benchrun_schedule_last_run_ops_per_second",
                "Merged throughput of the newest succeeded run of a BenchmarkSchedule",
            ),
            &["namespace", "schedule", "op"],
        )
        .expect("metric");
        let schedule_p99 = GaugeVec::new(
            Opts::new(
                "benchrun_schedule_last_run_p99_seconds",
                "Merged p99 latency of the newest succeeded run of a BenchmarkSchedule",
            ),
            &["namespace", "schedule", "op"],
        )
        .expect("metric");
        // From a fast CSI driver's provision (tens of ms) to a cloud disk's attach (minutes).
        let control_plane_seconds = HistogramVec::new(
            HistogramOpts::new(
                "benchrun_operator_control_plane_operation_seconds",
                "Latency of control-plane operations (provision, attach, firstIO, delete) of control-plane runs",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                300.0,
            ]),
            &["operation", "storage_class"],
        )
        .expect("metric");
        let control_plane_errors = IntCounterVec::new(
            Opts::new(
                "benchrun_operator_control_plane_errors_total",
                "Failed control-plane operations of control-plane runs, by kind (timeout, provisioningFailed, podFailed, api, ...)",
            ),
            &["operation", "storage_class", "kind"],
        )
        .expect("metric");
        let mut families = Vec::new();
        for (c, kind) in [
            (
                Box::new(reconciles.clone()) as Box<dyn prometheus::core::Collector>,
                MetricKind::Counter,
            ),
            (Box::new(errors.clone()), MetricKind::Counter),
            (Box::new(duration.clone()), MetricKind::Histogram),
            (Box::new(runs.clone()), MetricKind::Gauge),
            (Box::new(run_ops.clone()), MetricKind::Gauge),
            (Box::new(run_p99.clone()), MetricKind::Gauge),
            (Box::new(run_phase.clone()), MetricKind::Gauge),
            (Box::new(run_progress_ops.clone()), MetricKind::Gauge),
            (Box::new(run_elapsed.clone()), MetricKind::Gauge),
            (Box::new(run_skew.clone()), MetricKind::Gauge),
            (Box::new(run_thresholds_met.clone()), MetricKind::Gauge),
            (Box::new(run_regressed.clone()), MetricKind::Gauge),
            (Box::new(leader.clone()), MetricKind::Gauge),
            (Box::new(api_requests.clone()), MetricKind::Counter),
            (Box::new(schedule_regressed.clone()), MetricKind::Gauge),
            (Box::new(schedule_failures.clone()), MetricKind::Gauge),
            (Box::new(schedule_ops.clone()), MetricKind::Gauge),
            (Box::new(schedule_p99.clone()), MetricKind::Gauge),
            (
                Box::new(control_plane_seconds.clone()),
                MetricKind::Histogram,
            ),
            (Box::new(control_plane_errors.clone()), MetricKind::Counter),
        ] {
            families.extend(MetricFamily::of(c.as_ref(), kind));
            registry.register(c).expect("unique metric");
        }
        Self {
            registry,
            families,
            reconciles,
            errors,
            duration,
            runs,
            run_ops,
            run_p99,
            run_phase,
            run_progress_ops,
            run_elapsed,
            run_skew,
            run_thresholds_met,
            run_regressed,
            leader,
            api_requests,
            control_plane_seconds,
            control_plane_errors,
            schedule_regressed,
            schedule_failures,
            schedule_ops,
            schedule_p99,
            schedule_ops_seen: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// The families registered, as `/metrics` exports them (label values aside).
    pub fn families(&self) -> &[MetricFamily] {
        &self.families
    }

    /// Count a reconcile and time it until the guard drops.
    pub fn reconcile(&self) -> ReconcileTimer<'_> {
        self.reconciles.inc();
        ReconcileTimer {
            metrics: self,
            start: Instant::now(),
        }
    }

    /// Count a failed reconcile by its error label.
    pub fn error(&self, label: &str) {
        self.errors.with_label_values(&[label]).inc();
    }

    /// Record a run's phase (and its results once finished).
    pub fn observe(&self, ns: &str, run: &str, status: &BenchmarkRunStatus) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let entry = seen.entry(key(ns, run)).or_insert_with(|| Seen {
            ns: ns.to_string(),
            run: run.to_string(),
            phase: status.phase,
            ops: BTreeSet::new(),
        });
        entry.phase = status.phase;
        entry.ops.extend(status.results.keys().cloned());
        for p in ALL_PHASES {
            let n = seen.values().filter(|v| v.phase == p).count();
            self.runs.with_label_values(&[p.as_str()]).set(n as i64);
            self.run_phase
                .with_label_values(&[ns, run, p.as_str()])
                .set(i64::from(status.phase == p));
        }
        match &status.progress {
            Some(pr) if !status.phase.is_finished() => {
                self.run_progress_ops
                    .with_label_values(&[ns, run])
                    .set(pr.ops as f64);
                self.run_elapsed
                    .with_label_values(&[ns, run])
                    .set(pr.elapsed_seconds);
            }
            // Live progress only: a finished run's would stay at its last value forever (its
            // figures are in the result gauges).
            _ => {
                for g in [&self.run_progress_ops, &self.run_elapsed] {
                    let _ = g.remove_label_values(&[ns, run]);
                }
            }
        }
        if let Some(ms) = status.start_skew_ms {
            self.run_skew.with_label_values(&[ns, run]).set(ms / 1000.0);
        }
        // The verdicts, for alerts; a condition not (yet) decided exports nothing.
        for (cond, gauge) in [
            (
                crate::run_rules::cond::THRESHOLDS_MET,
                &self.run_thresholds_met,
            ),
            (crate::run_rules::cond::REGRESSED, &self.run_regressed),
        ] {
            match crate::run_rules::condition(&status.conditions, cond).map(|c| c.status.as_str()) {
                Some("True") => gauge.with_label_values(&[ns, run]).set(1),
                Some("False") => gauge.with_label_values(&[ns, run]).set(0),
                _ => {}
            }
        }
        for (op, r) in &status.results {
            self.run_ops
                .with_label_values(&[ns, run, op])
                .set(r.ops_per_sec);
            self.run_p99
                .with_label_values(&[ns, run, op])
                .set(r.p99_ms / 1000.0);
        }
    }

    /// Where a control-plane run of StorageClass `class` (`None`: the default class) records
    /// its operations.
    pub fn control_plane(&self, class: Option<&str>) -> ControlPlaneSink {
        ControlPlaneSink {
            seconds: self.control_plane_seconds.clone(),
            errors: self.control_plane_errors.clone(),
            class: class.unwrap_or("default").to_string(),
        }
    }

    /// Whether this replica leads (runs the controller).
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Drop a deleted run's series, every one of them, so the alerts on them stop firing with
    /// the run gone. Needs nothing of the run but its key: called from the finalizer's pass,
    /// and for a run deleted without it (the watch's delete event, a pass that found it gone).
    pub fn forget(&self, ns: &str, run: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let ops = seen
            .remove(&key(ns, run))
            .map(|s| s.ops)
            .unwrap_or_default();
        for p in ALL_PHASES {
            let n = seen.values().filter(|v| v.phase == p).count();
            self.runs.with_label_values(&[p.as_str()]).set(n as i64);
            let _ = self.run_phase.remove_label_values(&[ns, run, p.as_str()]);
        }
        for op in &ops {
            let _ = self.run_ops.remove_label_values(&[ns, run, op]);
            let _ = self.run_p99.remove_label_values(&[ns, run, op]);
        }
        for g in [&self.run_progress_ops, &self.run_elapsed, &self.run_skew] {
            let _ = g.remove_label_values(&[ns, run]);
        }
        for g in [&self.run_thresholds_met, &self.run_regressed] {
            let _ = g.remove_label_values(&[ns, run]);
        }
    }

    /// Record a schedule's verdicts and the figures of its newest succeeded run (`last`).
    pub fn observe_schedule(
        &self,
        ns: &str,
        schedule: &str,
        status: &crate::crd::schedule::BenchmarkScheduleStatus,
        last: Option<&BenchmarkRunStatus>,
    ) {
        let labels = [ns, schedule];
        if let Some(v) = &status.last_verdict {
            self.schedule_regressed
                .with_label_values(&labels)
                .set(i64::from(v == "Regressed"));
        }
        self.schedule_failures
            .with_label_values(&labels)
            .set(i64::from(status.failures_in_a_row));
        let Some(last) = last else { return };
        let mut seen = self
            .schedule_ops_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let ops = seen.entry(key(ns, schedule)).or_default();
        for (op, r) in &last.results {
            ops.insert(op.clone());
            self.schedule_ops
                .with_label_values(&[ns, schedule, op])
                .set(r.ops_per_sec);
            self.schedule_p99
                .with_label_values(&[ns, schedule, op])
                .set(r.p99_ms / 1000.0);
        }
    }

    /// Drop a deleted schedule's series.
    pub fn forget_schedule(&self, ns: &str, schedule: &str) {
        for g in [&self.schedule_regressed, &self.schedule_failures] {
            let _ = g.remove_label_values(&[ns, schedule]);
        }
        let ops = self
            .schedule_ops_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(ns, schedule))
            .unwrap_or_default();
        for op in &ops {
            let _ = self.schedule_ops.remove_label_values(&[ns, schedule, op]);
            let _ = self.schedule_p99.remove_label_values(&[ns, schedule, op]);
        }
    }

    /// Drop the series of every run `exists` says is gone (`namespace`, `name`): after the
    /// watch lists the runs again, a run deleted while it was down sent no delete event.
    pub fn forget_gone(&self, exists: impl Fn(&str, &str) -> bool) {
        let gone: Vec<(String, String)> = self
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|s| !exists(&s.ns, &s.run))
            .map(|s| (s.ns.clone(), s.run.clone()))
            .collect();
        for (ns, run) in gone {
            self.forget(&ns, &run);
        }
    }

    /// The registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The control-plane families, for one run's lifecycles (cheap to clone: the families are
/// shared). The series are per class, not per run: they add up across runs, as a histogram's
/// buckets should, and a class's distribution is what a dashboard compares.
#[derive(Clone, Debug)]
pub struct ControlPlaneSink {
    seconds: HistogramVec,
    errors: IntCounterVec,
    class: String,
}

impl ControlPlaneSink {
    /// Operation `op` took `d`.
    pub fn ok(&self, op: &str, d: std::time::Duration) {
        self.seconds
            .with_label_values(&[op, &self.class])
            .observe(d.as_secs_f64());
    }

    /// Operation `op` failed with an error of `kind`.
    pub fn error(&self, op: &str, kind: &str) {
        self.errors
            .with_label_values(&[op, &self.class, kind])
            .inc();
    }
}

/// What the metrics hold of one run: enough to remove its series.
#[derive(Debug)]
struct Seen {
    ns: String,
    run: String,
    phase: Phase,
    /// The ops of its result series (`run_ops_per_second`, `run_p99_seconds`).
    ops: BTreeSet<String>,
}

fn key(ns: &str, run: &str) -> String {
    format!("{ns}/{run}")
}

/// Observes the reconcile duration on drop.
pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics
            .duration
            .observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families() {
        let m = Metrics::new();
        {
            let _t = m.reconcile();
        }
        m.error("kube");
        m.observe("ns", "r", &BenchmarkRunStatus::default());
        m.set_leader(true);
        let text = m.render();
        for name in [
            "benchrun_operator_reconciles_total 1",
            "benchrun_operator_reconcile_errors_total{error=\"kube\"} 1",
            "benchrun_operator_runs{phase=\"Pending\"} 1",
            "benchrun_operator_reconcile_duration_seconds_count 1",
            "benchrun_operator_leader 1",
            "benchrun_operator_run_phase{namespace=\"ns\",phase=\"Pending\",run=\"r\"} 1",
            "benchrun_operator_run_phase{namespace=\"ns\",phase=\"Running\",run=\"r\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing in\n{text}");
        }
        assert!(!text.contains("benchrun_operator_run_thresholds_met{"));
    }

    #[test]
    fn progress_gauges_live_only_while_the_run_runs() {
        let m = Metrics::new();
        let mut st = BenchmarkRunStatus {
            phase: crate::crd::Phase::Running,
            progress: Some(crate::crd::Progress {
                elapsed_seconds: 3.0,
                ops: 42,
                errors: 0,
                ops_per_sec: 14.0,
            }),
            ..Default::default()
        };
        m.observe("ns", "r", &st);
        let text = m.render();
        assert!(
            text.contains("benchrun_operator_run_progress_ops{namespace=\"ns\",run=\"r\"} 42"),
            "{text}"
        );
        assert!(
            text.contains("benchrun_operator_run_elapsed_seconds{namespace=\"ns\",run=\"r\"} 3"),
            "{text}"
        );
        // Finished (with its last progress still in the status): the live series go.
        st.phase = crate::crd::Phase::Succeeded;
        m.observe("ns", "r", &st);
        let text = m.render();
        assert!(
            !text.contains("benchrun_operator_run_progress_ops{"),
            "{text}"
        );
        assert!(
            !text.contains("benchrun_operator_run_elapsed_seconds{"),
            "{text}"
        );
    }

    #[test]
    fn verdicts_become_gauges() {
        let m = Metrics::new();
        let mut st = BenchmarkRunStatus::default();
        let now = chrono::Utc::now();
        crate::run_rules::set_condition(
            &mut st.conditions,
            "ThresholdsMet",
            false,
            "ThresholdsNotMet",
            "",
            None,
            now,
        );
        crate::run_rules::set_condition(
            &mut st.conditions,
            "Regressed",
            true,
            "Regressed",
            "",
            None,
            now,
        );
        m.observe("ns", "r", &st);
        let text = m.render();
        assert!(
            text.contains("benchrun_operator_run_thresholds_met{namespace=\"ns\",run=\"r\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("benchrun_operator_run_regressed{namespace=\"ns\",run=\"r\"} 1"),
            "{text}"
        );
    }

    /// Every series of the registry labelled with this run.
    fn series_of(m: &Metrics, ns: &str, run: &str) -> Vec<String> {
        m.registry
            .gather()
            .iter()
            .flat_map(|f| {
                f.get_metric()
                    .iter()
                    .filter(|s| {
                        let l = s.get_label();
                        l.iter().any(|p| p.name() == "namespace" && p.value() == ns)
                            && l.iter().any(|p| p.name() == "run" && p.value() == run)
                    })
                    .map(|_| f.name().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A run with every per-run series set: running with progress and skew, then finished
    /// with results for two ops and both verdicts.
    fn observed(m: &Metrics, ns: &str, run: &str) {
        let now = chrono::Utc::now();
        let mut st = BenchmarkRunStatus {
            phase: Phase::Running,
            progress: Some(crate::crd::Progress {
                elapsed_seconds: 3.0,
                ops: 42,
                errors: 0,
                ops_per_sec: 14.0,
            }),
            start_skew_ms: Some(1.5),
            ..Default::default()
        };
        m.observe(ns, run, &st);
        st.phase = Phase::Succeeded;
        for op in ["get", "all"] {
            st.results.insert(op.into(), Default::default());
        }
        for c in ["ThresholdsMet", "Regressed"] {
            crate::run_rules::set_condition(&mut st.conditions, c, true, c, "", None, now);
        }
        // Its last status still had live progress: observed once more while running.
        let mut live = st.clone();
        live.phase = Phase::Running;
        m.observe(ns, run, &live);
        m.observe(ns, run, &st);
    }

    #[test]
    fn a_run_gone_without_its_status_leaves_no_series() {
        let m = Metrics::new();
        observed(&m, "ns", "gone");
        observed(&m, "ns", "kept");
        let before = series_of(&m, "ns", "gone");
        for family in [
            "benchrun_operator_run_phase",
            "benchrun_operator_run_ops_per_second",
            "benchrun_operator_run_p99_seconds",
            "benchrun_operator_run_start_skew_seconds",
            "benchrun_operator_run_thresholds_met",
            "benchrun_operator_run_regressed",
        ] {
            assert!(before.iter().any(|f| f == family), "{family}: {before:?}");
        }
        // Its key is all the delete event gives: every series goes, the other run's stay.
        m.forget("ns", "gone");
        assert_eq!(series_of(&m, "ns", "gone"), Vec::<String>::new());
        assert_eq!(series_of(&m, "ns", "kept").len(), before.len());
        let text = m.render();
        assert!(
            text.contains("benchrun_operator_runs{phase=\"Succeeded\"} 1"),
            "{text}"
        );
        // A run deleted while it runs: its live progress goes too.
        let running = BenchmarkRunStatus {
            phase: Phase::Running,
            progress: Some(crate::crd::Progress {
                elapsed_seconds: 3.0,
                ops: 42,
                errors: 0,
                ops_per_sec: 14.0,
            }),
            ..Default::default()
        };
        m.observe("ns", "live", &running);
        let live = series_of(&m, "ns", "live");
        assert!(
            live.iter()
                .any(|f| f == "benchrun_operator_run_progress_ops"),
            "{live:?}"
        );
        m.forget("ns", "live");
        assert_eq!(series_of(&m, "ns", "live"), Vec::<String>::new());
        // After a relist: the runs no longer listed go.
        m.forget_gone(|ns, run| ns == "ns" && run == "other");
        assert_eq!(series_of(&m, "ns", "kept"), Vec::<String>::new());
        assert!(
            m.render()
                .contains("benchrun_operator_runs{phase=\"Succeeded\"} 0"),
            "{}",
            m.render()
        );
    }
}
