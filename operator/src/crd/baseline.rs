//! `spec.baselineRef` and `status.baseline`: the types only (loaded and compared by
//! [`crate::baseline`]).

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::MERGED_KEY;

/// Default tolerance, in percent.
pub const DEFAULT_TOLERANCE_PERCENT: f64 = 10.0;

/// Most runs in `baselineRef.runs`.
pub const MAX_BASELINE_RUNS: usize = 20;

/// Where the baseline result is: a finished run, the median of several, or a summary stored
/// in a ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.run), has(self.runs), has(self.configMap)].filter(x, x).size() == 1").message("give baselineRef.run, baselineRef.runs or baselineRef.configMap (exactly one)"))]
#[serde(rename_all = "camelCase")]
pub struct BaselineRef {
    /// A Succeeded BenchmarkRun in this namespace; its merged result is the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub run: Option<String>,
    /// Succeeded BenchmarkRuns in this namespace: the baseline is their median, op by op and
    /// figure by figure (the median of their ops/s, of their p99, ...). A `BenchmarkSchedule`
    /// with `baseline.policy: MedianOfLast` sets it. Runs that cannot be read are left out
    /// (the status names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 20), inner(length(min = 1, max = 253)))]
    pub runs: Vec<String>,
    /// A summary stored in a ConfigMap of this namespace (for example a run's `merged.json`
    /// kept after the run was deleted, or a `benchrun-worker run --summary` file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapKey>,
    /// Largest tolerated change, in percent: throughput lower or p99 higher than the
    /// baseline's by more than this marks the run `Regressed`. Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1000.0))]
    pub tolerance_percent: Option<f64>,
}

/// A key of a ConfigMap.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapKey {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the summary JSON. Default `merged.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

impl BaselineRef {
    /// `tolerancePercent`, or its default.
    pub fn tolerance(&self) -> f64 {
        self.tolerance_percent.unwrap_or(DEFAULT_TOLERANCE_PERCENT)
    }

    /// "run other-run", "median of runs a, b" or "configmap saved/merged.json", for messages.
    pub fn source(&self) -> String {
        match (&self.run, &self.config_map) {
            (Some(r), _) => format!("run {r}"),
            (None, _) if !self.runs.is_empty() => {
                format!("median of runs {}", self.runs.join(", "))
            }
            (None, Some(c)) => format!(
                "configmap {}/{}",
                c.name,
                c.key.as_deref().unwrap_or(MERGED_KEY)
            ),
            (None, None) => "nothing".into(),
        }
    }
}

/// The run against its baseline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BaselineStatus {
    /// Where the baseline came from (`run NAME`, `median of N runs: A, B`, or
    /// `configmap NAME/KEY`).
    pub source: String,
    /// The tolerance applied, in percent.
    pub tolerance_percent: f64,
    /// Per op (and `all`): relative changes against the baseline, in percent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deltas: BTreeMap<String, OpDelta>,
    /// The ops (and limits) that crossed the tolerance in the worse direction and that the
    /// significance tests confirm (p < 0.01 against the baseline, against every run of a
    /// median), each with its p-value; or that no test could be made for (`not tested: why`),
    /// where the tolerance alone decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// Changes that crossed the tolerance in the worse direction but that the tests cannot
    /// tell from noise (p >= 0.01 against at least one baseline run): not regressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_significant: Vec<String>,
}

/// Relative changes of one op, in percent of the baseline (positive: higher than baseline).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpDelta {
    /// Change of operations per second, in percent.
    pub ops_per_sec_percent: f64,
    /// Change of MiB per second, in percent.
    pub mib_per_sec_percent: f64,
    /// Change of the median latency, in percent.
    pub p50_percent: f64,
    /// Change of the 99th percentile latency, in percent.
    pub p99_percent: f64,
    /// Error rate (errors per operation) minus the baseline's, as a fraction (0.01: one point).
    pub error_rate_change: f64,
    /// The rank-sum test of this op's per-second rates (each second's ops times the op's share
    /// of the run's ops: the timeline is not kept per op), this run slower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_sec_test: Option<SignificanceTest>,
    /// The test of this op's p99: how many of this run's operations exceed the baseline's p99
    /// against how many of the baseline's do (Fisher's exact test, this run slower).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_test: Option<SignificanceTest>,
}

/// A significance test of one figure against the baseline (the rule of `compare
/// --fail-if-slower` too): one test per baseline run, so against a median, one per run of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignificanceTest {
    /// `rank-sum` (the op's per-second rates) or `exceedance` (the op's operations above the
    /// baseline's p99).
    pub test: String,
    /// The largest p-value of the tests (one per baseline run); absent when not tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Tests made: one per baseline run (0 when not tested).
    pub runs: u32,
    /// Every test had p < 0.01 with this run on the slower side (lower throughput, more
    /// operations above the baseline's p99).
    pub significant: bool,
    /// Why no test was made (a run without full seconds, too few samples to ever reach
    /// p < 0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_tested: Option<String>,
    /// The effect size in percent of the baseline, with its 95% confidence interval: for ops/s
    /// the median difference of the per-second rates, for p99 the change of the p99. Absent
    /// when the samples cannot give an interval (too few seconds). Against a median, the
    /// interval spans every run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<benchrun_api::verdict::Effect>,
    /// The baseline runs it was measured against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub against: Vec<String>,
}
