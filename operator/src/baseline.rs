//! Baselines: compare a finished run's merged result with another finished run's (or a stored
//! summary), op by op, and say whether it regressed (`spec.baselineRef`).
//!
//! The comparison is of the same figures as `status.results`, both from exact merged
//! histograms. A run regressed when, for any op both results have, throughput fell or p99 rose
//! by more than the tolerance. The verdict is the `Regressed` condition; the run's phase is not
//! changed by it (thresholds are the gate that fails a run).

use benchrun_api::Summary;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::crd::baseline::{BaselineRef, BaselineStatus, OpDelta};
use crate::crd::{BenchmarkRun, Phase, MERGED_KEY};
use crate::resources::result_cm_name;

/// Check what the schema's CEL rules also say (for runs created before them): each problem
/// as "spec.baselineRef...: why".
pub fn validate(r: &BaselineRef, own_name: &str) -> Vec<String> {
    let mut errs = vec![];
    if r.run.is_some() == r.config_map.is_some() {
        errs.push("spec.baselineRef: give run or configMap (exactly one)".into());
    }
    if r.run.as_deref() == Some(own_name) {
        errs.push("spec.baselineRef.run: a run cannot be its own baseline".into());
    }
    let t = r.tolerance();
    if !t.is_finite() || !(0.0..=1000.0).contains(&t) {
        errs.push(format!(
            "spec.baselineRef.tolerancePercent: must be from 0 to 1000 (got {t})"
        ));
    }
    errs
}

/// Why a baseline could not be compared with.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The run or ConfigMap named does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The baseline run has not succeeded (its phase).
    #[error("{0} has not succeeded (phase {1})")]
    NotSucceeded(String, String),
    /// The ConfigMap has no readable summary under the key.
    #[error("{0} holds no summary: {1}")]
    NoSummary(String, String),
    /// The API server could not be read.
    #[error("reading {0}: {1}")]
    Kube(String, kube::Error),
}

/// Fetch the baseline's summary.
pub async fn load(
    r: &BaselineRef,
    runs: &Api<BenchmarkRun>,
    cms: &Api<ConfigMap>,
) -> Result<Summary, BaselineError> {
    let source = r.source();
    let (cm_name, key) = match (&r.run, &r.config_map) {
        (Some(run), _) => {
            let other = runs
                .get_opt(run)
                .await
                .map_err(|e| BaselineError::Kube(source.clone(), e))?
                .ok_or_else(|| BaselineError::NotFound(source.clone()))?;
            let phase = other.status.map(|s| s.phase).unwrap_or_default();
            if phase != Phase::Succeeded {
                return Err(BaselineError::NotSucceeded(source, phase.as_str().into()));
            }
            (result_cm_name(run), MERGED_KEY.to_string())
        }
        (None, Some(c)) => (
            c.name.clone(),
            c.key.clone().unwrap_or_else(|| MERGED_KEY.into()),
        ),
        (None, None) => return Err(BaselineError::NotFound(source)),
    };
    let cm = cms
        .get_opt(&cm_name)
        .await
        .map_err(|e| BaselineError::Kube(source.clone(), e))?
        .ok_or_else(|| BaselineError::NotFound(format!("configmap {cm_name} of {source}")))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(&key))
        .ok_or_else(|| BaselineError::NoSummary(source.clone(), format!("no key {key}")))?;
    // Any format version this operator reads (a baseline may be older than the operator).
    benchrun_api::summary_read::read(text)
        .map_err(|e| BaselineError::NoSummary(source, e.to_string()))
}

/// Compare `current` with `baseline`, op by op (only ops both have).
pub fn compare(current: &Summary, baseline: &Summary, tolerance_percent: f64) -> BaselineStatus {
    let now = crate::run_rules::op_results(current);
    let then = crate::run_rules::op_results(baseline);
    let mut out = BaselineStatus {
        tolerance_percent,
        ..Default::default()
    };
    for (op, c) in &now {
        let Some(b) = then.get(op) else { continue };
        let d = OpDelta {
            ops_per_sec_percent: percent(c.ops_per_sec, b.ops_per_sec),
            mib_per_sec_percent: percent(c.mib_per_sec, b.mib_per_sec),
            p50_percent: percent(c.p50_ms, b.p50_ms),
            p99_percent: percent(c.p99_ms, b.p99_ms),
            error_rate_change: round3(c.error_rate() - b.error_rate()),
        };
        if d.ops_per_sec_percent < -tolerance_percent {
            out.regressions.push(format!(
                "{op} ops/s {:.2} vs {:.2} ({:+.1}%)",
                c.ops_per_sec, b.ops_per_sec, d.ops_per_sec_percent
            ));
        }
        if d.p99_percent > tolerance_percent {
            out.regressions.push(format!(
                "{op} p99 {:.3}ms vs {:.3}ms ({:+.1}%)",
                c.p99_ms, b.p99_ms, d.p99_percent
            ));
        }
        out.deltas.insert(op.clone(), d);
    }
    out
}

/// `(now - then) / then` in percent, rounded to 0.1; 0 when both are 0, +100% per unit when
/// only the baseline is 0 (something that was free now costs).
fn percent(now: f64, then: f64) -> f64 {
    match benchrun_api::change::percent(then, now) {
        Some(p) => p,
        None if now == 0.0 => 0.0,
        None => 100.0,
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_api::spec::OpKind;
    use benchrun_api::stats::OpStats;
    use std::time::Duration;

    /// `count` gets in 10 s, each taking `ms`.
    fn summary(count: u64, ms: u64) -> Summary {
        let mut get = OpStats {
            count,
            bytes: count << 20,
            ..Default::default()
        };
        for _ in 0..count {
            get.latency.record(Duration::from_millis(ms));
        }
        Summary {
            target: "s3://bench".into(),
            workers: 1,
            worker_ids: vec!["w0".into()],
            started_at: chrono::DateTime::UNIX_EPOCH,
            elapsed_seconds: 10.0,
            stopped_by: "duration".into(),
            ops: [(OpKind::Get, get)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn equal_results_do_not_regress() {
        let s = summary(1000, 4);
        let b = compare(&s, &s, 10.0);
        assert!(b.regressions.is_empty(), "{b:?}");
        assert_eq!(b.deltas["get"], OpDelta::default());
        assert_eq!(b.deltas.keys().collect::<Vec<_>>(), ["all", "get"]);
    }

    #[test]
    fn slower_and_fewer_ops_regress_beyond_the_tolerance_only() {
        // 20% fewer ops, p99 from 4 ms to 5 ms (+25%).
        let base = summary(1000, 4);
        let now = summary(800, 5);
        let b = compare(&now, &base, 10.0);
        assert_eq!(b.deltas["get"].ops_per_sec_percent, -20.0);
        assert_eq!(b.deltas["get"].p99_percent, 25.0);
        assert_eq!(
            b.regressions,
            [
                "all ops/s 80.00 vs 100.00 (-20.0%)",
                "all p99 5.003ms vs 4.001ms (+25.0%)",
                "get ops/s 80.00 vs 100.00 (-20.0%)",
                "get p99 5.003ms vs 4.001ms (+25.0%)",
            ]
        );
        // Within a 30% tolerance nothing regressed; faster is never a regression.
        assert!(compare(&now, &base, 30.0).regressions.is_empty());
        assert!(compare(&base, &now, 0.0).regressions.is_empty());
    }

    #[test]
    fn validation_says_what_is_wrong() {
        let r: BaselineRef = serde_yaml::from_str("{run: me, tolerancePercent: -1}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            [
                "spec.baselineRef.run: a run cannot be its own baseline",
                "spec.baselineRef.tolerancePercent: must be from 0 to 1000 (got -1)",
            ]
        );
        let r: BaselineRef = serde_yaml::from_str("{}").expect("ref");
        assert_eq!(
            validate(&r, "me"),
            ["spec.baselineRef: give run or configMap (exactly one)"]
        );
        let r: BaselineRef = serde_yaml::from_str("{configMap: {name: saved}}").expect("ref");
        assert!(validate(&r, "me").is_empty());
        assert_eq!(r.source(), "configmap saved/merged.json");
    }
}
