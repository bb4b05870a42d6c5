//! `status.matrix`: the table of a matrix run's combinations (planned and filled by
//! [`crate::sweep`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::Phase;

/// The matrix part of the status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MatrixStatus {
    /// `combination k of n`, or `n combinations done`.
    pub progress: String,
    /// Number of combinations.
    pub total: u32,
    /// 1-based number of the baseline combination.
    pub baseline: u32,
    /// One row per combination, in order.
    pub combinations: Vec<CombinationRow>,
}

/// One combination: its child run and, once finished, its merged figures (all ops together).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CombinationRow {
    /// `path=value, ...`.
    pub name: String,
    /// The child run whose figures the row shows (the median repeat).
    pub run: String,
    /// Every measured child run of the combination (one per repeat), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// Phase of the combination's child run.
    pub phase: Phase,
    /// Operations per second, all operations together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_sec: Option<f64>,
    /// MiB per second, all operations together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mib_per_sec: Option<f64>,
    /// Median latency in milliseconds, from the merged histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// 99th percentile latency in milliseconds, from the merged histograms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Failed operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Storage requests per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_op: Option<f64>,
    /// Client CPU seconds (all workers) per GiB moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds_per_gib: Option<f64>,
    /// Client CPU in percent of one core over the measured stage (all workers together).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// Minor page faults of the worker processes during the measured stage (buffered reads
    /// against O_DIRECT show here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    /// Major page faults (that needed I/O) of the worker processes during the measured stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
    /// Why the measured stage ended (`duration`, `stable: ...` with `stopWhenStable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Change of ops/s against the baseline combination, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_sec_change_percent: Option<f64>,
    /// Change of p99 against the baseline combination, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_change_percent: Option<f64>,
}
