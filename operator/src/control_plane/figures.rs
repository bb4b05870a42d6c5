//! The latencies of a control-plane run's lifecycles kept in exact HDR histograms (the
//! project's [`Latency`], microseconds, 3 significant digits), assembled into
//! `status.controlPlane`, and its thresholds evaluated. Pure but for one side effect: each
//! latency and error is also passed to the operator's metrics when a sink is given
//! ([`Figures::feeding`]), so dashboards see a run while it runs.

use std::collections::BTreeMap;
use std::time::Duration;

use benchrun_api::hold_io::HoldIo;
use benchrun_api::latency::Latency;

use crate::crd::control_plane::{
    BusyIo, ControlPlaneSpec, ControlPlaneStatus, LatencyReport, OperationReport,
};
use crate::crd::thresholds::ThresholdCheck;
use crate::metrics::ControlPlaneSink;

pub use crate::crd::control_plane::OPERATIONS;

/// One operation's histograms: the whole operation, each phase, errors by kind.
#[derive(Clone, Debug, Default)]
struct Op {
    total: Latency,
    phases: BTreeMap<String, Latency>,
    errors: BTreeMap<String, u64>,
}

/// The `busy` holds' reports, merged.
#[derive(Clone, Debug, Default)]
struct Busy {
    lifecycles: u32,
    unreported: u32,
    reads: u64,
    writes: u64,
    errors: u64,
    first_error: Option<String>,
    /// The holds' spans, summed.
    elapsed_ms: f64,
    max_us: u64,
    latency: Latency,
    latency_left_out: u32,
}

/// What the lifecycles measured so far.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    ops: BTreeMap<&'static str, Op>,
    completed: u32,
    failed: u32,
    first_error: Option<String>,
    /// Claim create request to first I/O done, per lifecycle that got there.
    to_first_io: Latency,
    /// With `busy`: the hold containers' I/O.
    busy: Busy,
    /// The operator's histograms, fed as operations end.
    sink: Option<ControlPlaneSink>,
}

impl Figures {
    /// Figures that also feed `sink` (the operator's metrics).
    pub fn feeding(sink: ControlPlaneSink) -> Self {
        Self {
            sink: Some(sink),
            ..Self::default()
        }
    }

    /// Operation `op` succeeded in `total`, reaching each named phase after its duration.
    pub fn ok(&mut self, op: &'static str, total: Duration, phases: &[(&str, Duration)]) {
        if let Some(s) = &self.sink {
            s.ok(op, total);
        }
        let o = self.ops.entry(op).or_default();
        o.total.record(total);
        for (name, d) in phases {
            o.phases.entry((*name).to_string()).or_default().record(*d);
        }
    }

    /// A lifecycle's first I/O was done `d` after its claim's create request.
    pub fn to_first_io(&mut self, d: Duration) {
        self.to_first_io.record(d);
    }

    /// A `busy` lifecycle's pod went with `message` as its hold's termination message
    /// (its I/O report, the last line; `None`: no message was seen).
    pub fn busy(&mut self, message: Option<&str>) {
        let report = message
            .and_then(|m| m.lines().rev().find(|l| !l.trim().is_empty()))
            .and_then(|l| serde_json::from_str::<HoldIo>(l.trim()).ok());
        let b = &mut self.busy;
        let Some(io) = report else {
            b.unreported += 1;
            return;
        };
        b.lifecycles += 1;
        b.reads += io.reads;
        b.writes += io.writes;
        b.errors += io.errors;
        if b.first_error.is_none() {
            b.first_error = io.first_error.clone();
        }
        b.elapsed_ms += io.elapsed_ms;
        b.max_us = b.max_us.max(io.max_us);
        match &io.latency {
            Some(h) => b.latency.add(h),
            // A hold that did no I/O (its file could not be set up: one error) left nothing out.
            None if io.ops() > 0 => b.latency_left_out += 1,
            None => {}
        }
    }

    /// Operation `op` failed with an error of `kind`; `message` says why (the first is kept).
    pub fn error(&mut self, op: &'static str, kind: &str, message: String) {
        if let Some(s) = &self.sink {
            s.error(op, kind);
        }
        *self
            .ops
            .entry(op)
            .or_default()
            .errors
            .entry(kind.to_string())
            .or_default() += 1;
        self.first_error
            .get_or_insert_with(|| format!("{op} {kind}: {message}"));
    }

    /// A lifecycle ended, without an error or with one.
    pub fn lifecycle_done(&mut self, ok: bool) {
        if ok {
            self.completed += 1;
        } else {
            self.failed += 1;
        }
    }

    /// Whether any operation failed.
    pub fn has_errors(&self) -> bool {
        self.first_error.is_some()
    }

    /// `status.controlPlane`: the measured operations (those `spec` lists), over `elapsed`.
    pub fn status(&self, spec: &ControlPlaneSpec, elapsed: Duration) -> ControlPlaneStatus {
        let operations = self
            .ops
            .iter()
            .filter(|(name, o)| spec.measures(name) || !o.errors.is_empty())
            .map(|(name, o)| {
                let errors = o.errors.values().sum();
                let report = OperationReport {
                    count: o.total.count(),
                    errors,
                    errors_by_kind: o.errors.clone(),
                    latency: report(&o.total),
                    phases: o
                        .phases
                        .iter()
                        .map(|(p, h)| (p.clone(), report(h)))
                        .collect(),
                };
                (name.to_string(), report)
            })
            .collect();
        ControlPlaneStatus {
            requested: u32::try_from(spec.count).unwrap_or(0),
            completed: self.completed,
            failed: self.failed,
            elapsed_ms: ms(elapsed.as_micros() as u64),
            operations,
            first_error: self.first_error.clone(),
            provision_to_first_io: (self.to_first_io.count() > 0)
                .then(|| report(&self.to_first_io)),
            arrivals: None,
            start_time: None,
            after_load_ms: None,
            busy: spec.busy.then(|| self.busy_status()),
        }
    }

    fn busy_status(&self) -> BusyIo {
        let b = &self.busy;
        let ops = b.reads + b.writes;
        let mut latency = report(&b.latency);
        // Over every hold, also those whose histogram was left out.
        latency.max_ms = latency.max_ms.max(ms(b.max_us));
        BusyIo {
            lifecycles: b.lifecycles,
            unreported: b.unreported,
            reads: b.reads,
            writes: b.writes,
            errors: b.errors,
            first_error: b.first_error.clone(),
            iops_per_volume: if b.elapsed_ms > 0.0 {
                ops as f64 / (b.elapsed_ms / 1e3)
            } else {
                0.0
            },
            latency,
            latency_left_out: b.latency_left_out,
        }
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Percentiles of `h` in milliseconds; zeros when it is empty. The maximum is the highest
/// recorded value's bucket (HDR: within 0.1 %).
fn report(h: &Latency) -> LatencyReport {
    if h.count() == 0 {
        return LatencyReport::default();
    }
    LatencyReport {
        p50_ms: ms(h.quantile_us(0.50)),
        p95_ms: ms(h.quantile_us(0.95)),
        p99_ms: ms(h.quantile_us(0.99)),
        max_ms: ms(h.0.max()),
    }
}

/// `spec.controlPlane.thresholds` held to the result: the checks (for `status.thresholds`).
/// An operation with no successful sample misses its limit ("no result").
pub fn evaluate(spec: &ControlPlaneSpec, st: &ControlPlaneStatus) -> Vec<ThresholdCheck> {
    // `maxLate`: the arrival rate kept; a run with no arrivals recorded (none started) misses.
    let late = spec.max_late.map(|max| {
        let got = st.arrivals.as_ref();
        ThresholdCheck {
            op: "arrivals".into(),
            limit: "maxLate".into(),
            want: format!("<= {max}"),
            got: got.map_or("no result".into(), |a| {
                format!("{} late of {} started", a.late, a.started)
            }),
            met: got.is_some_and(|a| a.late <= max),
        }
    });
    spec.thresholds
        .iter()
        .map(|t| {
            let want = t.max_p99.0;
            let got = st
                .operations
                .get(&t.operation)
                .filter(|r| r.count > 0)
                .map(|r| r.latency.p99_ms);
            ThresholdCheck {
                op: t.operation.clone(),
                limit: "maxP99".into(),
                want: format!("<= {}", t.max_p99),
                got: got.map_or("no result".into(), |g| format!("{g:.3}ms")),
                met: got.is_some_and(|g| g <= want.as_secs_f64() * 1000.0),
            }
        })
        .chain(late)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ControlPlaneSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    #[test]
    fn status_holds_exact_percentiles_phases_and_errors_of_the_listed_operations() {
        let s = spec("{operations: [provision, delete], count: 101}");
        let mut f = Figures::default();
        for i in 1..=100u64 {
            let t = Duration::from_millis(i * 10);
            f.ok("provision", t, &[("pvCreated", t / 2), ("bound", t)]);
            // Measured but not listed: not reported.
            f.ok("attach", t, &[]);
            f.lifecycle_done(true);
        }
        f.to_first_io(Duration::from_secs(2));
        f.error(
            "provision",
            "timeout",
            "ExternalProvisioning: waiting".into(),
        );
        f.lifecycle_done(false);
        let st = f.status(&s, Duration::from_secs(12));
        assert_eq!((st.requested, st.completed, st.failed), (101, 100, 1));
        assert_eq!(st.elapsed_ms, 12_000.0);
        assert_eq!(st.operations.keys().collect::<Vec<_>>(), ["provision"]);
        let p = &st.operations["provision"];
        assert_eq!((p.count, p.errors), (100, 1));
        assert_eq!(p.errors_by_kind["timeout"], 1);
        // HDR at 3 significant digits: 500 ms and 1 s are exact buckets' bounds within 0.1 %.
        assert!((p.latency.p50_ms - 500.0).abs() <= 0.5, "{p:?}");
        assert!((p.latency.max_ms - 1000.0).abs() <= 1.0, "{p:?}");
        assert!((p.phases["pvCreated"].max_ms - 500.0).abs() <= 0.5, "{p:?}");
        let e2e = st
            .provision_to_first_io
            .expect("one lifecycle reached its first I/O");
        assert!((e2e.p50_ms - 2000.0).abs() <= 2.0, "{e2e:?}");
        assert!(Figures::default()
            .status(&s, Duration::ZERO)
            .provision_to_first_io
            .is_none());
        assert_eq!(
            st.first_error.as_deref(),
            Some("provision timeout: ExternalProvisioning: waiting")
        );
    }

    #[test]
    fn busy_reports_merge_exactly_and_missing_ones_are_counted() {
        let s = spec("{operations: [provision, snapshot], count: 4, inUse: true, busy: true}");
        let hold = |us: &[u64], errors: u64, with_histogram: bool| {
            let mut h = Latency::default();
            for u in us {
                h.record(Duration::from_micros(*u));
            }
            HoldIo {
                reads: us.len() as u64 - 1,
                writes: 1,
                errors,
                first_error: (errors > 0).then(|| "write at 4096: EIO".into()),
                elapsed_ms: 500.0,
                max_us: us.iter().copied().max().unwrap_or(0),
                latency: with_histogram.then_some(h),
            }
            .message()
        };
        let mut f = Figures::default();
        f.busy(Some(&hold(&[100, 200, 300], 0, true)));
        f.busy(Some(&format!("noise\n{}", hold(&[400, 500], 2, true))));
        // Left out of the message: counted, in the max, not in the percentiles.
        f.busy(Some(&hold(&[90_000, 100], 0, false)));
        f.busy(None);
        f.busy(Some("not json"));
        // A hold whose file could not be set up: one error, no I/O, nothing left out.
        let failed = HoldIo {
            errors: 1,
            first_error: Some("open /data/.benchrun-busy: EROFS".into()),
            ..HoldIo::default()
        };
        f.busy(Some(&failed.message()));
        let b = f.status(&s, Duration::from_secs(3)).busy.expect("busy");
        assert_eq!((b.lifecycles, b.unreported, b.latency_left_out), (4, 2, 1));
        assert_eq!((b.reads, b.writes, b.errors), (4, 3, 3));
        assert_eq!(b.first_error.as_deref(), Some("write at 4096: EIO"));
        // 7 I/Os over three holds of 0.5 s each.
        assert!((b.iops_per_volume - 7.0 / 1.5).abs() < 1e-9, "{b:?}");
        // The merged histogram holds the five I/Os of the first two holds, exactly.
        assert_eq!((b.latency.p50_ms, b.latency.p99_ms), (0.3, 0.5));
        assert_eq!(b.latency.max_ms, 90.0);
        let st = f.status(&spec("{operations: [provision], count: 1}"), Duration::ZERO);
        assert!(st.busy.is_none(), "not busy: no figures");
    }

    #[test]
    fn thresholds_fail_on_a_high_p99_or_no_result() {
        let s = spec(
            "{operations: [provision, attach], count: 2, thresholds: [{operation: provision, maxP99: 1s}, {operation: attach, maxP99: 1s}]}",
        );
        let mut f = Figures::default();
        f.ok("provision", Duration::from_millis(1500), &[]);
        let checks = evaluate(&s, &f.status(&s, Duration::from_secs(2)));
        assert_eq!(checks.len(), 2);
        assert!(
            !checks[0].met && checks[0].got.starts_with("1500"),
            "{checks:?}"
        );
        assert!(!checks[1].met && checks[1].got == "no result", "{checks:?}");
        let mut f = Figures::default();
        f.ok("provision", Duration::from_millis(900), &[]);
        f.ok("attach", Duration::from_millis(10), &[]);
        assert!(evaluate(&s, &f.status(&s, Duration::from_secs(2)))
            .iter()
            .all(|c| c.met));
    }

    #[test]
    fn max_late_holds_the_arrivals_to_their_rate() {
        let s = spec("{operations: [provision], count: 10, ratePerSecond: 5, maxLate: 1}");
        let mut st = Figures::default().status(&s, Duration::from_secs(2));
        let checks = evaluate(&s, &st);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].met && checks[0].got == "no result", "{checks:?}");
        let arrivals = |late| crate::crd::control_plane::Arrivals {
            rate_per_second: 5.0,
            started: 10,
            late,
            max_lag_ms: 40.0,
        };
        st.arrivals = Some(arrivals(1));
        let c = &evaluate(&s, &st)[0];
        assert!(c.met, "{c:?}");
        assert_eq!(
            c.describe(),
            "arrivals maxLate: got 1 late of 10 started, want <= 1"
        );
        st.arrivals = Some(arrivals(2));
        assert!(!evaluate(&s, &st)[0].met);
        // Unset: late starts are counted, never a check.
        let s = spec("{operations: [provision], count: 10, ratePerSecond: 5}");
        assert!(evaluate(&s, &st).is_empty());
    }

    #[test]
    fn control_plane_operations_are_observed_per_operation_and_class() {
        let m = crate::metrics::Metrics::new();
        let mut f = Figures::feeding(m.control_plane(Some("fast")));
        f.ok("provision", std::time::Duration::from_millis(300), &[]);
        f.ok("provision", std::time::Duration::from_millis(700), &[]);
        f.error("attach", "timeout", "pod not running".into());
        m.control_plane(None)
            .ok("delete", std::time::Duration::from_millis(20));
        let text = m.render();
        for want in [
            "benchrun_operator_control_plane_operation_seconds_count{operation=\"provision\",storage_class=\"fast\"} 2",
            "benchrun_operator_control_plane_operation_seconds_bucket{operation=\"provision\",storage_class=\"fast\",le=\"0.5\"} 1",
            "benchrun_operator_control_plane_operation_seconds_count{operation=\"delete\",storage_class=\"default\"} 1",
            "benchrun_operator_control_plane_errors_total{kind=\"timeout\",operation=\"attach\",storage_class=\"fast\"} 1",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
    }
}
