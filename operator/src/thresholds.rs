//! Thresholds: limits the merged result must meet (`spec.thresholds`), so that
//! `kubectl wait --for=condition=ThresholdsMet br/NAME` can gate a CI pipeline.
//!
//! Each threshold names an op (or `all`) and one or more limits; every limit becomes one
//! [`ThresholdCheck`] in the status, met or not, with the measured value beside it. A run whose
//! checks are not all met ends `Failed` (reason `ThresholdsNotMet`) with its result kept.

use benchrun_api::{Summary, Workload};

use crate::crd::thresholds::{LatencyOf, Threshold, ThresholdCheck};
use crate::crd::OpReport;
use crate::run_rules::cond;
use crate::status::Draft;

/// Check `thresholds` against the workload: each problem as "spec.thresholds[i]...: why".
pub fn validate(thresholds: &[Threshold], workload: &Workload) -> Vec<String> {
    let mut errs = vec![];
    for (i, t) in thresholds.iter().enumerate() {
        if let Some(kind) = t.op.kind() {
            if !workload.ops.iter().any(|o| o.op == kind) {
                errs.push(format!(
                    "spec.thresholds[{i}].op: `{}` is not in workload.ops, so it would never be measured",
                    t.op.key()
                ));
            }
        }
        let limits = [
            t.min_ops_per_sec,
            t.min_mib_per_sec,
            t.max_p50.map(|_| 0.0),
            t.max_p99.map(|_| 0.0),
            t.max_p999.map(|_| 0.0),
            t.max_error_rate,
            t.min_au,
        ];
        if limits.iter().all(Option::is_none) {
            errs.push(format!("spec.thresholds[{i}]: give at least one limit"));
        }
        if let Some(au) = t.min_au {
            if workload.training.is_none() {
                errs.push(format!(
                    "spec.thresholds[{i}].minAU: accelerator utilization is measured by training workloads only (spec.workload.training)"
                ));
            }
            if !(0.0..=100.0).contains(&au) {
                errs.push(format!(
                    "spec.thresholds[{i}].minAU: must be a percentage from 0 to 100 (got {au})"
                ));
            }
        }
        for (name, v) in [
            ("minOpsPerSec", t.min_ops_per_sec),
            ("minMiBPerSec", t.min_mib_per_sec),
            ("maxErrorRate", t.max_error_rate),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 || (name == "maxErrorRate" && v > 1.0) {
                    errs.push(format!(
                        "spec.thresholds[{i}].{name}: must be a number {} (got {v})",
                        if name == "maxErrorRate" {
                            "from 0 to 1"
                        } else {
                            "of at least 0"
                        }
                    ));
                }
            }
        }
    }
    errs
}

/// Evaluate every limit of every threshold against the merged per-op results (the same
/// figures as `status.results`). An op that did not run counts as zero throughput and no
/// latency, so a minimum on it is missed rather than silently skipped.
pub fn evaluate(thresholds: &[Threshold], merged: &Summary) -> Vec<ThresholdCheck> {
    let results = crate::run_rules::op_results(merged);
    let mut out = vec![];
    for t in thresholds {
        let key = t.op.key();
        let r = results.get(key).cloned().unwrap_or_default();
        let mut push = |limit: &str, want: String, got: String, met: bool| {
            out.push(ThresholdCheck {
                op: key.into(),
                limit: limit.into(),
                want,
                got,
                met,
            })
        };
        if let Some(min) = t.min_ops_per_sec {
            push(
                "minOpsPerSec",
                format!(">= {min}"),
                format!("{:.2}", r.ops_per_sec),
                r.count > 0 && r.ops_per_sec >= min,
            );
        }
        if let Some(min) = t.min_mib_per_sec {
            push(
                "minMiBPerSec",
                format!(">= {min}"),
                format!("{:.2}", r.mib_per_sec),
                r.count > 0 && r.mib_per_sec >= min,
            );
        }
        // `latencyOf: all`: failed ops' latency included (the same figures when none
        // failed, and then only successful ops have any).
        let all = t.latency_of == LatencyOf::All;
        let of = |ok: f64, with_failed: Option<f64>| match (all, with_failed) {
            (true, Some(v)) => v,
            _ => ok,
        };
        let has_latency = succeeded(&r) > 0 || (all && r.all_p50_ms.is_some());
        for (limit, max, got) in [
            ("maxP50", t.max_p50, of(r.p50_ms, r.all_p50_ms)),
            ("maxP95", t.max_p95, of(r.p95_ms, r.all_p95_ms)),
            ("maxP99", t.max_p99, of(r.p99_ms, r.all_p99_ms)),
            ("maxP999", t.max_p999, of(r.p999_ms, r.all_p999_ms)),
        ] {
            if let Some(max) = max {
                let max_ms = max.0.as_secs_f64() * 1000.0;
                push(
                    if all {
                        match limit {
                            "maxP50" => "maxP50 (all ops)",
                            "maxP95" => "maxP95 (all ops)",
                            "maxP99" => "maxP99 (all ops)",
                            _ => "maxP999 (all ops)",
                        }
                    } else {
                        limit
                    },
                    format!("<= {max}"),
                    format!("{got:.3}ms"),
                    has_latency && got <= max_ms,
                );
            }
        }
        if let Some(max) = t.max_error_rate {
            let rate = r.error_rate();
            push(
                "maxErrorRate",
                format!("<= {max}"),
                format!("{rate:.6}"),
                r.count > 0 && rate <= max,
            );
        }
        if let Some(min) = t.min_au {
            let (got, met) = lowest_au(merged, min);
            push("minAU", format!(">= {min}%"), got, met);
        }
    }
    // The workload's own mark (`training.minAU`, which a standalone run exits 4 on) is a
    // limit of the run as well.
    if let Some(min) = merged.training.as_ref().and_then(|t| t.min_au_percent) {
        let (got, met) = lowest_au(merged, min);
        out.push(ThresholdCheck {
            op: "training".into(),
            limit: "minAU".into(),
            want: format!(">= {min}%"),
            got,
            met,
        });
    }
    out
}

/// The lowest AU of any accelerator in any epoch, and whether it reaches `min` percent; a
/// run that measured no epoch misses it.
fn lowest_au(merged: &Summary, min: f64) -> (String, bool) {
    match merged.training.as_ref().filter(|t| !t.epochs.is_empty()) {
        Some(t) => {
            let au = t.min_au();
            (format!("{au:.2}%"), au >= min)
        }
        None => ("no epoch measured".into(), false),
    }
}

/// Operations that succeeded (only they have a latency).
fn succeeded(r: &OpReport) -> u64 {
    r.count.saturating_sub(r.errors)
}

/// Evaluate `thresholds` on the merged summary into the draft (`status.thresholds` and
/// `ThresholdsMet`); the misses, if any.
pub(crate) fn verdict(
    d: &mut Draft,
    thresholds: &[Threshold],
    merged: &Summary,
    more: Vec<ThresholdCheck>,
) -> Option<String> {
    let mut checks = evaluate(thresholds, merged);
    checks.extend(more);
    if checks.is_empty() {
        return None;
    }
    let missed: Vec<String> = checks
        .iter()
        .filter(|c| !c.met)
        .map(|c| c.describe())
        .collect();
    let n = checks.len();
    d.status.thresholds = checks;
    if missed.is_empty() {
        d.condition(
            cond::THRESHOLDS_MET,
            true,
            "ThresholdsMet",
            format!("all {n} limits met"),
        );
        None
    } else {
        let text = missed.join("; ");
        d.condition(
            cond::THRESHOLDS_MET,
            false,
            "ThresholdsNotMet",
            text.clone(),
        );
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::spec::OpKind;
    use benchrun_api::stats::{Latency, OpStats};
    use std::time::Duration;

    /// A summary of 10 s with `get` latencies 1..=100 ms (one op each) and `errors` failed puts
    /// out of `puts`.
    fn summary(puts: u64, errors: u64) -> Summary {
        let mut s = Summary {
            target: "file:///data".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: 10.0,
            stopped_by: "duration".into(),
            ..Default::default()
        };
        let mut get = OpStats::default();
        let mut lat = Latency::default();
        for ms in 1..=100u64 {
            lat.record(Duration::from_millis(ms));
        }
        get.latency = lat;
        get.count = 100;
        get.bytes = 100 << 20;
        s.ops.insert(OpKind::Get, get);
        let mut put = OpStats {
            count: puts,
            errors,
            ..Default::default()
        };
        for _ in 0..puts - errors {
            put.latency.record(Duration::from_millis(5));
        }
        s.ops.insert(OpKind::Put, put);
        s
    }

    fn threshold(yaml: &str) -> Threshold {
        serde_yaml::from_str(yaml).expect("threshold parses")
    }

    /// A training run's lowest AU against `thresholds[].minAU` and the workload's own
    /// `training.minAU`: each a check; a run with no epoch misses both.
    #[test]
    fn min_au_is_held_to_the_lowest_accelerator() {
        use benchrun_api::training::{AuFigures, EpochFigures, TrainingStats};
        let mut s = summary(1, 0);
        let mut t = TrainingStats {
            min_au_percent: Some(90.0),
            ..Default::default()
        };
        for (w, compute) in [("w0", 950u64), ("w1", 880)] {
            let mut one = TrainingStats {
                accelerators: 1,
                epochs: vec![EpochFigures {
                    au: AuFigures::one(compute, 1000),
                    samples: 1,
                    complete: true,
                    ..Default::default()
                }],
                workers: [(w.to_string(), AuFigures::one(compute, 1000))].into(),
                ..Default::default()
            };
            one.min_au_percent = Some(90.0);
            t.merge(&one);
        }
        s.training = Some(t);
        let checks = evaluate(&[threshold("{op: all, minAU: 85}")], &s);
        assert_eq!(
            checks,
            [
                ThresholdCheck {
                    op: "all".into(),
                    limit: "minAU".into(),
                    want: ">= 85%".into(),
                    got: "88.00%".into(),
                    met: true,
                },
                ThresholdCheck {
                    op: "training".into(),
                    limit: "minAU".into(),
                    want: ">= 90%".into(),
                    got: "88.00%".into(),
                    met: false,
                }
            ]
        );
        // Without a training result: missed, and said so.
        let none = evaluate(&[threshold("{op: all, minAU: 85}")], &summary(1, 0));
        assert_eq!(none[0].got, "no epoch measured");
        assert!(!none[0].met);
        // Only with a training workload, and a percentage.
        let w = Workload::from_yaml(
            "target: file:///d\nops: [{op: get}]\nobjectSize: 1KiB\nduration: 1s\n",
        )
        .unwrap();
        let errs = validate(&[threshold("{op: all, minAU: 120}")], &w);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].contains("training workloads only"), "{errs:?}");
        assert!(errs[1].contains("from 0 to 100"), "{errs:?}");
    }

    #[test]
    fn every_limit_is_checked_with_its_measured_value() {
        let s = summary(10, 1);
        let checks = evaluate(
            &[
                threshold("{op: get, minOpsPerSec: 10, minMiBPerSec: 10.5, maxP50: 60ms, maxP99: 99ms, maxP999: 1s}"),
                threshold("{op: put, maxErrorRate: 0.05}"),
                threshold("{op: all, maxErrorRate: 0.01}"),
            ],
            &s,
        );
        let got: Vec<(String, String, String, bool)> = checks
            .iter()
            .map(|c| (c.op.clone(), c.limit.clone(), c.got.clone(), c.met))
            .collect();
        let row = |op: &str, limit: &str, got: &str, met| {
            (op.to_string(), limit.to_string(), got.to_string(), met)
        };
        assert_eq!(
            got,
            vec![
                row("get", "minOpsPerSec", "10.00", true),
                row("get", "minMiBPerSec", "10.00", false),
                row("get", "maxP50", "50.015ms", true),
                row("get", "maxP99", "99.007ms", false),
                row("get", "maxP999", "100.031ms", true),
                row("put", "maxErrorRate", "0.100000", false),
                row("all", "maxErrorRate", "0.009091", true),
            ]
        );
        assert_eq!(
            checks[3].describe(),
            "get maxP99: got 99.007ms, want <= 99ms"
        );
    }

    #[test]
    fn latency_of_all_holds_the_limits_for_failed_ops_too() {
        // 10 puts: 9 took 5 ms, 1 failed after a 30 s timeout.
        let mut s = summary(10, 1);
        s.ops
            .get_mut(&OpKind::Put)
            .unwrap()
            .failed_latency
            .entry("timeout".into())
            .or_default()
            .record(Duration::from_secs(30));
        let checks = evaluate(
            &[
                threshold("{op: put, maxP99: 10ms}"),
                threshold("{op: put, maxP99: 10ms, latencyOf: all}"),
                threshold("{op: get, maxP99: 100ms, latencyOf: all}"),
            ],
            &s,
        );
        let got: Vec<(&str, bool)> = checks.iter().map(|c| (c.limit.as_str(), c.met)).collect();
        assert_eq!(
            got,
            [
                ("maxP99", true),
                ("maxP99 (all ops)", false),
                // Nothing failed: all ops are the successful ones.
                ("maxP99 (all ops)", true),
            ]
        );
        assert!(checks[1].got.starts_with("30"), "{}", checks[1].got);
    }

    #[test]
    fn an_op_that_never_ran_misses_its_limits() {
        let s = summary(1, 1);
        let checks = evaluate(&[threshold("{op: put, maxP99: 1h, maxErrorRate: 1}")], &s);
        // One put, failed: no latency to meet a maximum with; an error rate of 1 is allowed.
        assert_eq!(
            checks.iter().map(|c| c.met).collect::<Vec<_>>(),
            [false, true]
        );
        let checks = evaluate(&[threshold("{op: delete, minOpsPerSec: 0}")], &s);
        assert!(!checks[0].met, "no deletes ran: {checks:?}");
    }

    #[test]
    fn validation_names_the_threshold_and_field() {
        let w: Workload =
            serde_yaml::from_str("{target: file:///data, duration: 1s, ops: [{op: get}]}")
                .expect("workload");
        assert_eq!(
            validate(&[threshold("{op: get, maxP99: 1ms}")], &w),
            Vec::<String>::new()
        );
        assert_eq!(
            validate(
                &[
                    threshold("{op: get, maxP99: 1ms}"),
                    threshold("{op: put, minOpsPerSec: 1}"),
                    threshold("{op: all}"),
                    threshold("{op: all, maxErrorRate: 2}"),
                ],
                &w
            ),
            vec![
                "spec.thresholds[1].op: `put` is not in workload.ops, so it would never be measured",
                "spec.thresholds[2]: give at least one limit",
                "spec.thresholds[3].maxErrorRate: must be a number from 0 to 1 (got 2)",
            ]
        );
    }

    #[test]
    fn block_ops_have_thresholds_too() {
        let w: Workload = serde_yaml::from_str(
            "{target: direct:///dev/xvdb, duration: 1s, ops: [{op: read}], dataset: {prepare: false}, block: {blockSize: 4KiB}}",
        )
        .expect("workload");
        assert_eq!(
            validate(
                &[threshold("{op: read, maxP99: 2ms, minOpsPerSec: 1000}")],
                &w
            ),
            Vec::<String>::new()
        );
        assert_eq!(
            validate(&[threshold("{op: write, maxP99: 2ms}")], &w),
            vec!["spec.thresholds[0].op: `write` is not in workload.ops, so it would never be measured"]
        );
    }
}
