//! `spec.thresholds` and their evaluation in `status.thresholds`: the types only (checked and
//! evaluated by [`crate::thresholds`]).

use benchrun_api::spec::OpKind;
use benchrun_api::units::HumanDuration;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Limits on one operation's merged result. Give at least one limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.minOpsPerSec) || has(self.minMiBPerSec) || has(self.maxP50) || has(self.maxP99) || has(self.maxP999) || has(self.maxErrorRate) || has(self.minAU)").message("a threshold needs at least one limit (minOpsPerSec, minMiBPerSec, maxP50, maxP99, maxP999, maxErrorRate, minAU)"))]
#[serde(rename_all = "camelCase")]
pub struct Threshold {
    /// The operation: `get`, `put`, `stat`, `list`, `delete`, or `all` for every op together.
    pub op: ThresholdOp,
    /// Lowest acceptable merged throughput, operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub min_ops_per_sec: Option<f64>,
    /// Lowest acceptable merged throughput, MiB per second.
    #[serde(
        default,
        rename = "minMiBPerSec",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0.0))]
    pub min_mib_per_sec: Option<f64>,
    /// Highest acceptable median latency (e.g. `2ms`, `500us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p50: Option<HumanDuration>,
    /// Highest acceptable p95 latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p95: Option<HumanDuration>,
    /// Highest acceptable p99 latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p99: Option<HumanDuration>,
    /// Highest acceptable p99.9 latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_p999: Option<HumanDuration>,
    /// Highest acceptable share of failed operations, from 0 (none may fail) to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_error_rate: Option<f64>,
    /// Training workloads: the lowest acceptable accelerator utilization, in percent (MLPerf
    /// Storage's pass mark is 90 for unet3d and resnet50, 70 for cosmoflow). Held to the
    /// lowest AU of any accelerator of any worker in any epoch (`status.training.au.min`);
    /// give it with `op: all`.
    #[serde(default, rename = "minAU", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 100.0))]
    pub min_au: Option<f64>,
    /// Which operations the latency limits (`maxP50` ... `maxP999`) hold for: `succeeded`
    /// (the default: `p99Ms` of `status.results`) or `all`, failed ones included
    /// (`allP99Ms`): a run whose requests time out under overload then misses its limit
    /// instead of meeting it with the requests that got through.
    #[serde(default, skip_serializing_if = "LatencyOf::is_default")]
    pub latency_of: LatencyOf,
}

/// The operations a threshold's latency limits are measured on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum LatencyOf {
    #[default]
    Succeeded,
    All,
}

impl LatencyOf {
    fn is_default(&self) -> bool {
        *self == LatencyOf::Succeeded
    }
}

/// An operation, or all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
// Variants documented here would turn the CRD's `enum` of names into a `oneOf` of described
// constants: the names say what they are.
#[allow(missing_docs)]
pub enum ThresholdOp {
    /// Every operation together.
    #[default]
    All,
    Get,
    Put,
    Stat,
    List,
    Delete,
    Read,
    Write,
}

impl ThresholdOp {
    /// The key of this op in `status.results`.
    pub fn key(self) -> &'static str {
        match self.kind() {
            Some(k) => k.as_str(),
            None => "all",
        }
    }
    /// The op this names, `None` for `all`.
    pub fn kind(self) -> Option<OpKind> {
        match self {
            ThresholdOp::All => None,
            ThresholdOp::Get => Some(OpKind::Get),
            ThresholdOp::Put => Some(OpKind::Put),
            ThresholdOp::Stat => Some(OpKind::Stat),
            ThresholdOp::List => Some(OpKind::List),
            ThresholdOp::Delete => Some(OpKind::Delete),
            ThresholdOp::Read => Some(OpKind::Read),
            ThresholdOp::Write => Some(OpKind::Write),
        }
    }
}

/// One limit of one threshold, as evaluated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThresholdCheck {
    /// The op (or `all`).
    pub op: String,
    /// The limit's field, e.g. `maxP99`.
    pub limit: String,
    /// The limit, e.g. `<= 10ms`.
    pub want: String,
    /// What the merged result measured.
    pub got: String,
    /// Whether the limit is met.
    pub met: bool,
}

impl ThresholdCheck {
    /// "get maxP99: got 12.500ms, want <= 10ms".
    pub fn describe(&self) -> String {
        format!(
            "{} {}: got {}, want {}",
            self.op, self.limit, self.got, self.want
        )
    }
}
