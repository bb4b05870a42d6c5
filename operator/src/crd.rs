//! The `BenchmarkRun` custom resource (`benchrun.dev/v1alpha1`): spec, status, schema.
//!
//! `spec.workload` is the worker's own [`Workload`] type, so a `BenchmarkRun` and a standalone
//! workload file have one schema. Kubernetes needs *structural* schemas, which an untagged
//! size (`1MiB` or `{uniform: ...}`) is not, so [`workload_schema`] rewrites those few spots;
//! everything the schema cannot say is checked by [`Workload::validate`] in the reconciler and
//! reported in the `Valid` condition with the field's path.

// Every printcolumn repeats `type_ = "string"`; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use benchrun_api::matrix::Matrix;
use benchrun_api::units::HumanDuration;
use benchrun_api::Workload;
use k8s_openapi::api::core::v1::{
    Affinity, EmptyDirVolumeSource, HostPathVolumeSource, PersistentVolumeClaimSpec,
    ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::baseline::{BaselineRef, BaselineStatus};
use crate::sweep::MatrixStatus;
use crate::thresholds::{Threshold, ThresholdCheck};

/// A storage benchmark run on one or more worker pods, started at the same instant, with the
/// merged result written back into the status.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "benchrun.dev",
    version = "v1alpha1",
    kind = "BenchmarkRun",
    namespaced,
    status = "BenchmarkRunStatus",
    shortname = "br",
    category = "benchrun",
    doc = "A storage benchmark run: worker pods on the selected nodes run `spec.workload` from one common start time; the merged result lands in `status`.",
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Where the run is"
    ),
    printcolumn(
        name = "Workers",
        type_ = "string",
        json_path = ".status.workersSummary",
        description = "Workers ready, running or collected / total"
    ),
    printcolumn(
        name = "Throughput",
        type_ = "string",
        json_path = ".status.throughput",
        description = "All operations together: live while running, merged once done"
    ),
    printcolumn(
        name = "P99",
        type_ = "string",
        json_path = ".status.p99",
        description = "p99 latency over all operations, from the merged histograms"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: delete the BenchmarkRun and create a new one").reason(::kube::core::cel::Reason::FieldValueForbidden))]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunSpec {
    /// What each worker runs: the same document as a standalone `benchrun-worker run` file.
    #[schemars(schema_with = "workload_schema")]
    pub workload: Workload,
    /// Credentials for object storage, by reference to a Secret in this namespace. The kubelet
    /// gives it to the worker pods as environment variables and as files in
    /// `/var/run/benchrun/credentials` (set as `storage.credentialsDir` unless the workload names
    /// one); the operator never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// Where the workers run and with what.
    #[serde(default)]
    pub workers: WorkersSpec,
    /// A volume mounted into every worker, for `file://` and `direct://` targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<VolumeSpec>,
    /// How far ahead of "every worker is ready" the common start time is set, so that the start
    /// request reaches every worker before it. Default 5s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_delay: Option<HumanDuration>,
    /// Fail the run when it has not finished this long after it was created. Default: the
    /// workload's duration plus 10 minutes, or 1 hour for an op-count run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
    /// What a lost worker (pod deleted, failed or evicted before its result was collected) does
    /// to the run.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// When worker pods (and per-worker claims) are deleted after the run. The result ConfigMap
    /// is always kept while the run exists.
    #[serde(default)]
    pub cleanup: CleanupPolicy,
    /// Delete the finished run (and everything it owns) this many seconds after it finished.
    /// At most one year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31_536_000))]
    pub ttl_seconds_after_finished: Option<i64>,
    /// Limits the merged result must meet, per op; a miss fails the run (condition
    /// `ThresholdsMet`), so `kubectl wait --for=condition=ThresholdsMet` can gate a pipeline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub thresholds: Vec<Threshold>,
    /// Another result to compare with once finished: per-op deltas in `status.baseline` and
    /// the condition `Regressed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_ref: Option<BaselineRef>,
    /// Run the workload once per combination of parameter values, one combination at a time,
    /// each as a child run `<name>-<k>`; `status.matrix` has the table. E.g.
    /// `{parameters: {objectSize: [4MiB, 16MiB], rangeEngine.enabled: [false, true]}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "matrix_schema")]
    pub matrix: Option<Matrix>,
}

/// The schema of `spec.matrix`, structural: parameter values may be any YAML value, so the
/// lists' items keep unknown fields; [`crate::sweep::validate`] checks every combination.
fn matrix_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use benchrun_api::matrix::{MAX_PARAMETERS, MAX_REPEATS, MAX_VALUES};
    let v = json!({
        "description": "Run the workload once per combination of parameter values, one combination at a time, each as a child run `<name>-<k>`; `status.matrix` has the table.",
        "type": "object",
        "nullable": true,
        "required": ["parameters"],
        "properties": {
            "parameters": {
                "description": "Parameter path (dotted, into the workload: objectSize, read.chunkSize, rangeEngine.enabled, target, ops.0.weight) to its values; the first varies slowest.",
                "type": "object",
                "minProperties": 1,
                "maxProperties": MAX_PARAMETERS,
                "additionalProperties": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_VALUES,
                    "items": {"x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "repeats": {
                "description": "Measured runs per combination (child runs <name>-<k>-r<j>); the median by ops/s stands for the combination.",
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_REPEATS,
                "default": 1
            },
            "warmup": {
                "description": "An unmeasured run of this length before each combination (child run <name>-<k>-w).",
                "type": "string",
                "maxLength": benchrun_api::units::MAX_DURATION_LEN
            },
            "baseline": {
                "description": "The combination the others are compared with, by parameter values (e.g. {rangeEngine.enabled: false}). Default the first.",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true
            }
        }
    });
    schemars::Schema::try_from(v).unwrap_or_else(|_| schemars::Schema::from(true))
}

/// Largest `startDelay`: the start time must stay close enough to be measured as skew.
pub const MAX_START_DELAY: std::time::Duration = std::time::Duration::from_secs(3600);
/// Largest `timeout` (30 days).
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);
/// Largest `ttlSecondsAfterFinished` (one year); also in the schema.
pub const MAX_TTL_SECONDS: i64 = 31_536_000;

impl BenchmarkRunSpec {
    /// Check what the schema cannot (durations are strings to it): each problem as
    /// "spec.<field>: <why>". Bounds keep every timestamp sum the reconciler makes in range.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errs: Vec<String> = match self.workload.validate() {
            Ok(()) => vec![],
            Err(e) => e.iter().map(|e| format!("spec.workload.{e}")).collect(),
        };
        if let Some(d) = self.start_delay {
            if d.0 > MAX_START_DELAY {
                errs.push(format!(
                    "spec.startDelay: must be at most 1h (got {}s)",
                    d.0.as_secs()
                ));
            }
        }
        if let Some(t) = self.timeout {
            if t.0.is_zero() || t.0 > MAX_TIMEOUT {
                errs.push(format!(
                    "spec.timeout: must be more than 0 and at most 720h (got {}s)",
                    t.0.as_secs()
                ));
            }
        }
        if let Some(ttl) = self.ttl_seconds_after_finished {
            if !(0..=MAX_TTL_SECONDS).contains(&ttl) {
                errs.push(format!(
                    "spec.ttlSecondsAfterFinished: must be between 0 and {MAX_TTL_SECONDS} (one year) (got {ttl})"
                ));
            }
        }
        errs.extend(crate::thresholds::validate(
            &self.thresholds,
            &self.workload,
        ));
        errs.extend(crate::podfields::check(self));
        if self.thresholds.len() > MAX_THRESHOLDS {
            errs.push(format!(
                "spec.thresholds: at most {MAX_THRESHOLDS} (got {})",
                self.thresholds.len()
            ));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

/// Most thresholds per run (also in the schema).
pub const MAX_THRESHOLDS: usize = 64;

/// A Secret in the run's namespace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// Placement and shape of the worker pods.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("!(has(self.count) && has(self.perNode) && self.perNode)").message("give workers.count or workers.perNode, not both"))]
#[serde(rename_all = "camelCase")]
pub struct WorkersSpec {
    /// One worker on every Ready, schedulable node that matches `nodeSelector`, `affinity`
    /// (required node terms) and `tolerations`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_node: Option<bool>,
    /// Number of workers, placed by the scheduler. Default 1 unless `perNode` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub count: Option<i32>,
    /// Only nodes with these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Pod affinity of the worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Tolerations of the worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// CPU and memory of each worker container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Worker image; default the one the operator was started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

impl WorkersSpec {
    pub fn per_node(&self) -> bool {
        self.per_node.unwrap_or(false)
    }
}

/// A volume for `file://` and `direct://` targets: exactly one source.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("[has(self.claimName), has(self.claimTemplate), has(self.emptyDir), has(self.hostPath)].filter(x, x).size() == 1").message("give exactly one of claimName, claimTemplate, emptyDir, hostPath"))]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    /// Where the volume is mounted in the worker; default the target's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    /// An existing PersistentVolumeClaim shared by every worker (ReadWriteMany for several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// A claim created for each worker (`<run>-<worker>`), owned by the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_template: Option<PersistentVolumeClaimSpec>,
    /// A scratch directory on each node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirVolumeSource>,
    /// A directory of the node (tests, bare-metal disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<HostPathVolumeSource>,
}

/// What a lost worker does to the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// The run fails as soon as one worker is lost.
    #[default]
    Abort,
    /// The run completes with the remaining workers; the status says which were lost.
    Continue,
}

/// When worker pods are deleted after the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CleanupPolicy {
    /// Always, succeeded or failed.
    #[default]
    Always,
    /// Only after a successful run; failed runs keep them for debugging.
    OnSuccess,
    /// Never.
    Never,
}

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
    pub fn is_finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
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
    pub start_time: Option<String>,
    /// Largest difference between the workers' actual starts, corrected by each worker's
    /// measured clock offset, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_skew_ms: Option<f64>,
    /// When the run finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_time: Option<String>,
    /// Live progress while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Per-operation results computed from the merged histograms of every collected worker.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, OpResult>,
    /// Printer column: all operations per second (and MiB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<String>,
    /// Printer column: p99 latency over all operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99: Option<String>,
    /// Every limit of `spec.thresholds`, evaluated on the merged result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdCheck>,
    /// The merged result against `spec.baselineRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineStatus>,
    /// With `spec.matrix`: progress and the table of combinations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<MatrixStatus>,
    /// ConfigMap holding the merged summary (`merged.json`). Each worker's own summary is in
    /// ConfigMap `<run>-result-<worker>` (gzip-compressed JSON, `binaryData` key
    /// `summary.json.gz`), written as it is collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_config_map: Option<String>,
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
    /// `Pending`, `Preparing`, `Ready`, `Running`, `Done`, `Collected`, `Failed`, `Lost`.
    pub phase: String,
    /// Why it failed or was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
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
}

/// Live progress of the measured stage, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub elapsed_seconds: f64,
    pub ops: u64,
    pub errors: u64,
    pub ops_per_sec: f64,
}

/// Results of one operation (or `all`) from merged histograms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpResult {
    pub count: u64,
    pub errors: u64,
    pub ops_per_sec: f64,
    pub mib_per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl OpResult {
    /// Failed operations over all operations; 0 when none ran.
    pub fn error_rate(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.errors as f64 / self.count as f64
        }
    }
}

/// The schema of `spec.workload`: the worker's own schema, made structural.
///
/// Sizes that may be a distribution object (`objectSize`, `dataset.size`) stay untyped
/// (`x-kubernetes-preserve-unknown-fields`) but carry the worker's value validations: the
/// exact byte-size pattern, bounds, and the `uniform`/`lognormal` object form (see
/// `benchrun_api::spec::SizeSpec`'s schema); what no schema can say is checked by
/// [`Workload::validate`]. Documented enums become plain `enum`s, and the rule "duration or
/// totalOps" is added as CEL.
pub fn workload_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let schema = generator.subschema_for::<Workload>();
    let mut value = schema.to_value();
    structuralize(&mut value);
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "x-kubernetes-validations".into(),
            json!([{
                "rule": "has(self.duration) != has(self.totalOps)",
                "message": "give workload.duration or workload.totalOps (exactly one)",
                "reason": "FieldValueInvalid"
            }]),
        );
    }
    schemars::Schema::try_from(value).unwrap_or_else(|_| schemars::Schema::from(true))
}

/// Rewrite what Kubernetes rejects in a schemars schema (see [`workload_schema`]).
fn structuralize(v: &mut Value) {
    let Some(obj) = v.as_object_mut() else {
        return;
    };
    // Option<T>: anyOf [T, {type: null}] becomes T with nullable, then T is looked at.
    if let Some(Value::Array(items)) = obj.get("anyOf") {
        let is_null = |i: &Value| i.get("type").and_then(Value::as_str) == Some("null");
        if items.len() == 2 && items.iter().any(is_null) {
            let inner = items.iter().find(|i| !is_null(i)).cloned();
            obj.remove("anyOf");
            if let Some(Value::Object(inner)) = inner {
                for (k, val) in inner {
                    obj.entry(k).or_insert(val);
                }
            }
            obj.insert("nullable".into(), true.into());
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(items)) = obj.get(key) else {
            continue;
        };
        let consts: Option<Vec<Value>> = items
            .iter()
            .map(|i| {
                i.get("const")
                    .cloned()
                    .or_else(|| i.get("enum").and_then(|e| e.get(0)).cloned())
            })
            .collect();
        let int_or_string = items.iter().all(|i| {
            matches!(
                i.get("type").and_then(Value::as_str),
                Some("integer" | "string")
            )
        });
        if let (Some(consts), true) = (&consts, items.iter().all(|i| i.get("properties").is_none()))
        {
            // A documented unit enum: schemars writes oneOf [{const}, ...].
            let consts = consts.clone();
            obj.remove(key);
            obj.insert("type".into(), "string".into());
            obj.insert("enum".into(), Value::Array(consts));
        } else if int_or_string && obj.contains_key("x-kubernetes-int-or-string") {
            // ByteSize: already int-or-string with an anyOf Kubernetes accepts.
        } else {
            // An untagged size (int-or-string or a distribution object), or anything else
            // that mixes types: keep it, unchecked by the apiserver, checked by validate().
            let description = obj.get("description").cloned();
            obj.clear();
            if let Some(d) = description {
                obj.insert("description".into(), d);
            }
            obj.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
            return;
        }
    }
    for (_, child) in obj.iter_mut() {
        match child {
            Value::Object(_) => structuralize(child),
            Value::Array(items) => items.iter_mut().for_each(structuralize),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn checked_in_crd_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds/benchmarkrun.yaml");
        let want = crate::crd_yaml();
        let have = std::fs::read_to_string(path).unwrap_or_default();
        if std::env::var_os("BENCHRUN_UPDATE_CRD").is_some() {
            // A rewrite makes this test pass whatever the file held: never in CI.
            assert!(
                std::env::var_os("CI").is_none(),
                "BENCHRUN_UPDATE_CRD is set in CI: the snapshot would be rewritten, not checked"
            );
            std::fs::write(path, &want).expect("write crds/benchmarkrun.yaml");
            return;
        }
        assert!(
            have == want,
            "crds/benchmarkrun.yaml is stale: run `cargo run -p benchrun-operator -- crd > crds/benchmarkrun.yaml` \
             (or BENCHRUN_UPDATE_CRD=1 cargo test -p benchrun-operator --lib crd)"
        );
    }

    #[test]
    fn durations_and_ttl_are_bounded_and_named() {
        let base = "workload: {target: file:///data, duration: 10s, ops: [{op: get}]}\n";
        let spec = |extra: &str| -> BenchmarkRunSpec {
            serde_yaml::from_str(&format!("{base}{extra}")).expect("parses")
        };
        assert_eq!(spec("").validate(), Ok(()));
        assert_eq!(
            spec("startDelay: 1h\ntimeout: 720h\nttlSecondsAfterFinished: 31536000\n").validate(),
            Ok(())
        );
        for (extra, field) in [
            ("startDelay: 2h\n", "spec.startDelay"),
            ("startDelay: 100000000000h\n", "spec.startDelay"),
            ("timeout: 721h\n", "spec.timeout"),
            ("timeout: 0s\n", "spec.timeout"),
            (
                "ttlSecondsAfterFinished: 9223372036854775807\n",
                "spec.ttlSecondsAfterFinished",
            ),
            (
                "ttlSecondsAfterFinished: -1\n",
                "spec.ttlSecondsAfterFinished",
            ),
        ] {
            let errs = spec(extra).validate().expect_err(extra);
            assert!(
                errs.len() == 1 && errs[0].starts_with(&format!("{field}: must be")),
                "{extra}: {errs:?}"
            );
        }
        let schema = serde_json::to_value(schemars::schema_for!(BenchmarkRunSpec)).unwrap();
        assert_eq!(
            schema["properties"]["ttlSecondsAfterFinished"]["maximum"].as_f64(),
            Some(MAX_TTL_SECONDS as f64)
        );
    }

    #[test]
    fn deadline_of_a_huge_duration_saturates() {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///data, duration: 1000000000000h, ops: [{op: get}]}\n",
        )
        .expect("parses");
        assert!(crate::state::timeout(&spec) >= std::time::Duration::from_secs(1 << 50));
    }

    /// Walk the schema and check the structural rules the apiserver enforces, so a bad schema
    /// fails here and not at `kubectl apply`.
    #[test]
    fn schema_is_structural() {
        let crd = crate::crd();
        let schema = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
        )
        .expect("json");
        fn walk(v: &Value, path: &str, bad: &mut Vec<String>) {
            let Some(o) = v.as_object() else { return };
            let typed = o.contains_key("type")
                || o.contains_key("x-kubernetes-preserve-unknown-fields")
                || o.contains_key("x-kubernetes-int-or-string");
            if !typed {
                bad.push(format!("{path}: no type"));
            }
            for k in ["anyOf", "oneOf", "allOf"] {
                if let Some(items) = o.get(k).and_then(Value::as_array) {
                    if !o.contains_key("x-kubernetes-int-or-string") {
                        for i in items {
                            if i.get("type").is_some() || i.get("description").is_some() {
                                bad.push(format!("{path}.{k}: type or description in a branch"));
                            }
                        }
                    }
                }
            }
            if let Some(Value::Object(props)) = o.get("properties") {
                for (k, p) in props {
                    walk(p, &format!("{path}.{k}"), bad);
                }
            }
            if let Some(items) = o.get("items") {
                walk(items, &format!("{path}[]"), bad);
            }
            if let Some(ap) = o.get("additionalProperties") {
                if ap.is_object() {
                    walk(ap, &format!("{path}{{}}"), bad);
                }
            }
        }
        let mut bad = vec![];
        walk(&schema, "", &mut bad);
        assert!(bad.is_empty(), "non-structural schema: {bad:#?}");
        let text = schema.to_string();
        assert!(text.contains("self == oldSelf"), "spec must be immutable");
        assert!(text.contains("has(self.duration) != has(self.totalOps)"));
    }

    #[test]
    fn crd_names_and_columns() {
        let crd = BenchmarkRun::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("benchmarkruns.benchrun.dev")
        );
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["br".to_string()][..])
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        let v = &crd.spec.versions[0];
        let cols: Vec<_> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["Phase", "Workers", "Throughput", "P99", "Age"]);
        assert!(v
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
    }

    #[test]
    fn spec_round_trips_with_sizes() {
        let yaml = r#"
workload:
  target: file:///data/bench
  duration: 10s
  ops: [{op: get, weight: 60}, {op: put, weight: 30}, {op: stat, weight: 10}]
  objectSize: {uniform: {min: 4KiB, max: 64KiB}}
workers: {perNode: true}
volume: {emptyDir: {}}
failurePolicy: Continue
"#;
        let spec: BenchmarkRunSpec = serde_yaml::from_str(yaml).expect("parses");
        assert!(spec.workers.per_node());
        assert_eq!(spec.failure_policy, FailurePolicy::Continue);
        let again: BenchmarkRunSpec =
            serde_json::from_value(serde_json::to_value(&spec).expect("ser")).expect("de");
        assert_eq!(spec, again);
    }
}
