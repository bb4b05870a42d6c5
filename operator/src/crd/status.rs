//! The status of a `BenchmarkRun`: phase, conditions, workers, merged results.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use benchrun_api::stats::OpReport;

use super::baseline::BaselineStatus;
use super::matrix::MatrixStatus;
use super::thresholds::ThresholdCheck;

/// Key of the merged summary (JSON) in the run's result ConfigMap.
pub const MERGED_KEY: &str = "merged.json";

/// Where a run is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Accepted; workers not created yet.
    #[default]
    Pending,
    /// Worker pods are starting and preparing their datasets.
    Preparing,
    /// Every worker has its start time; the measured stage is running.
    Running,
    /// Every worker has finished; results are being collected.
    Collecting,
    /// Finished; results are in the status and the result ConfigMap.
    Succeeded,
    /// Finished without a result; the conditions say why.
    Failed,
}

impl Phase {
    /// Succeeded or Failed: nothing more will happen but cleanup.
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
    /// The phase's name, as in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Preparing => "Preparing",
            Phase::Running => "Running",
            Phase::Collecting => "Collecting",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// What the operator observed and decided. Everything needed to resume after an operator
/// restart lives here or in owned objects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunStatus {
    /// Where the run is.
    #[serde(default)]
    pub phase: Phase,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Valid`, `WorkersScheduled`, `WorkersReady`, `Started`, `StartRequestsOnTime`,
    /// `Complete`, `WorkersLost`, `ThresholdsMet` (with `spec.thresholds`), `Regressed` (with
    /// `spec.baselineRef`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// One entry per worker, fixed when the workers are placed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerStatus>,
    /// `ready/total` while preparing, `collected/total` after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_summary: Option<String>,
    /// How many workers are in each phase (`Running: 998, Lost: 2`): the fleet at a glance,
    /// where `workers` lists a thousand entries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub worker_phases: BTreeMap<String, u32>,
    /// The common start time sent to every worker (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub start_time: Option<String>,
    /// Largest difference between the workers' actual starts, corrected by each worker's
    /// measured clock offset, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    /// When the run finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub finish_time: Option<String>,
    /// Live progress while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Why the measured stage ended, from the merged result: `duration`, `totalOps`,
    /// `stable: ...` (`stopWhenStable`), `errorBudget: ...`, `interrupted` (several, `; `
    /// separated, when workers differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// With `stopWhenStable` in a run of several workers: the run's merged throughput found
    /// steady, and the instant every worker was told to end its measured stage. Recorded
    /// before any worker is told, so a restarted operator resends the same instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable: Option<RunStable>,
    /// Per-operation results computed from the merged histograms of every collected worker.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, OpReport>,
    /// With two or more `storage.endpoints`: the same figures per endpoint URL (all ops
    /// together, from the endpoint's histograms merged over every worker), so a slow or
    /// failing gateway shows here. Absent with one endpoint (it would repeat `results.all`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, OpReport>,
    /// Object targets: TCP connections the workers opened during the measured stage, all
    /// together (each worker opens one per task before the start, so this is 0 unless a
    /// connection was set up inside the measured window; see docs/RESULTS.md,
    /// `connectionsOpened`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
    /// Block workloads: the I/O engines the workers ran (and why `sync`, where io_uring was
    /// refused), the queue depth and how much of the dataset the page cache held, merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<benchrun_api::volume::VolumeStats>,
    /// Training workloads: accelerator utilization (mean, lowest, per worker), samples and
    /// MiB per second, the data wait, and whether `training.minAU` was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<super::training::TrainingStatus>,
    /// Checkpoint workloads: save and restore time (the slowest rank's) and throughput.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<super::training::CheckpointStatus>,
    /// Printer column: all operations per second (and MiB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<String>,
    /// Printer column: p99 latency over all operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    /// Every limit of `spec.thresholds`, evaluated on the merged result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdCheck>,
    /// A control-plane run's figures (`spec.controlPlane`), per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<super::control_plane::ControlPlaneStatus>,
    /// The merged result against `spec.baselineRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineStatus>,
    /// With `spec.matrix`: progress and the table of combinations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixStatus>,
    /// With `workload.training.search`: the probes (each a child run of every worker) and
    /// the most accelerators per worker the storage keeps at or above the AU mark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<super::training::SearchStatus>,
    /// ConfigMap holding the merged summary (`merged.json`). Each worker's own summary is in
    /// ConfigMap `<run>-result-<worker>` (gzip-compressed JSON, `binaryData` key
    /// `summary.json.gz`), written as it is collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_config_map: Option<String>,
}

/// The run found steady (`status.stable`): when, on what figures, and when it stops.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStable {
    /// The instant every worker's measured stage ends (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub stop_at: String,
    /// The end of the steady window (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub steady_at: String,
    /// The workers whose seconds were merged.
    pub workers: u32,
    /// The window's length in seconds.
    pub window_seconds: u64,
    /// The band every second stayed in, in percent of the mean.
    pub band_percent: f64,
    /// The window's mean ops/s, all workers together.
    pub mean_ops_per_second: f64,
    /// The window's slowest second, ops/s.
    pub min_ops_per_second: f64,
    /// The window's fastest second, ops/s.
    pub max_ops_per_second: f64,
}

/// Where one worker is, in `status.workers[].phase`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum WorkerPhase {
    /// Its pod is not running yet.
    #[default]
    Pending,
    /// Its agent prepares the dataset.
    Preparing,
    /// Prepared; waiting for the start time.
    Ready,
    /// In the measured stage.
    Running,
    /// Finished; its summary not collected yet.
    Done,
    /// Its summary is persisted and counted.
    Collected,
    /// Failed; it has no result.
    Failed,
    /// Its pod went away before its result was collected.
    Lost,
}

impl WorkerPhase {
    /// The phase's name, as in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerPhase::Pending => "Pending",
            WorkerPhase::Preparing => "Preparing",
            WorkerPhase::Ready => "Ready",
            WorkerPhase::Running => "Running",
            WorkerPhase::Done => "Done",
            WorkerPhase::Collected => "Collected",
            WorkerPhase::Failed => "Failed",
            WorkerPhase::Lost => "Lost",
        }
    }

    /// Whether a worker in this phase still counts for the run (neither failed nor lost).
    pub fn is_live(self) -> bool {
        !matches!(self, WorkerPhase::Failed | WorkerPhase::Lost)
    }
}

/// One worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerStatus {
    /// Worker id (also in its summary and in the keys its PUTs write).
    pub name: String,
    /// Its pod.
    pub pod: String,
    /// The node it is pinned to (perNode) or scheduled on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Where it is.
    pub phase: WorkerPhase,
    /// Why it failed or was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Since when its agent has not answered (RFC 3339); absent while it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub unanswered_since: Option<String>,
    /// Reads of its summary that failed in a row on the network (a reset, a timeout mid-body)
    /// after its agent said it was done: each is retried on the next pass, up to a bound;
    /// absent once it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_read_failures: Option<u32>,
    /// The worker's clock minus the operator's, in milliseconds, measured at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<f64>,
    /// Its actual start of the measured stage on its own clock (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// All operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_sec: Option<f64>,
    /// p99 over all operations, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Failed operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// With `spec.oplog`: where its op-log is stored, its records and those dropped, or why
    /// the upload failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oplog: Option<super::oplog::WorkerOplog>,
}

/// Live progress of the measured stage, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Seconds since the workers' common start.
    pub elapsed_seconds: f64,
    /// Operations completed so far, all workers.
    pub ops: u64,
    /// Operations failed so far, all workers.
    pub errors: u64,
    /// Operations per second so far.
    pub ops_per_sec: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs whose status an earlier operator wrote (per-op results without `meanMs`,
    /// `requestsPerOp`, p95, TTFB) are still read after an upgrade.
    #[test]
    fn a_status_from_before_the_op_report_fields_still_reads() {
        let old = serde_json::json!({
            "phase": "Succeeded",
            "results": {"all": {"count": 10, "errors": 0, "opsPerSec": 5.0, "mibPerSec": 1.0,
                "p50Ms": 1.0, "p90Ms": 2.0, "p99Ms": 3.0, "p999Ms": 4.0, "maxMs": 5.0}},
            "workers": [{"name": "w0", "pod": "r-w0", "phase": "Collected"}]
        });
        let s: BenchmarkRunStatus = serde_json::from_value(old).expect("old status");
        assert_eq!(s.results["all"].p99_ms, 3.0);
        assert_eq!(s.results["all"].mean_ms, 0.0);
        assert_eq!(s.workers[0].phase, WorkerPhase::Collected);
        // Written before per-endpoint figures: none, and none written back.
        assert!(s.endpoints.is_empty());
        let back = serde_json::to_value(&s).expect("status encodes");
        assert!(back.get("endpoints").is_none(), "{back}");
    }
}
