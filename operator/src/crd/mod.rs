//! The `BenchmarkRun` custom resource (`benchrun.dev/v1alpha1`): spec, status, schema.
//!
//! `spec.workload` is the worker's own [`Workload`] type, so a `BenchmarkRun` and a standalone
//! workload file have one schema. Kubernetes needs *structural* schemas, which an untagged
//! size (`1MiB` or `{uniform: ...}`) is not, so [`workload_schema`] rewrites those few spots;
//! everything the schema cannot say is checked by [`crate::validate`] in the reconciler and
//! reported in the `Valid` condition with the field's path.
//!
//! These are types only: they depend on nothing else in the crate, and the modules with the
//! logic (validation, placement, thresholds, baselines, sweeps) depend on them.

// Every printcolumn repeats `type_ = "string"`; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use std::time::Duration;

use benchrun_api::matrix::Matrix;
use benchrun_api::units::HumanDuration;
use benchrun_api::Workload;
use k8s_openapi::api::core::v1::{
    Affinity, EmptyDirVolumeSource, HostPathVolumeSource, LocalObjectReference,
    PersistentVolumeClaimSpec, ResourceRequirements, SeccompProfile, Toleration,
};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub mod baseline;
pub mod ca;
pub mod control_plane;
pub mod kind;
pub mod matrix;
pub mod oplog;
pub mod schedule;
pub mod status;
pub mod thresholds;
pub mod training;

use baseline::BaselineRef;
pub use status::{
    BenchmarkRunStatus, OpReport, Phase, Progress, RunStable, WorkerPhase, WorkerStatus, MERGED_KEY,
};
use thresholds::Threshold;

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
        name = "AU",
        type_ = "number",
        json_path = ".status.training.au.mean",
        description = "Training workloads: mean accelerator utilization, percent"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("has(self.workload) || has(self.controlPlane)").message("give spec.workload (a data-plane benchmark), spec.controlPlane (a control-plane benchmark), or both (control operations while the workers run the workload)").reason(::kube::core::cel::Reason::FieldValueInvalid))]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: delete the BenchmarkRun and create a new one").reason(::kube::core::cel::Reason::FieldValueForbidden))]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkRunSpec {
    /// What each worker runs: the same document as a standalone `benchrun-worker run` file.
    /// Required unless the run is a control-plane benchmark (`controlPlane`).
    #[schemars(schema_with = "workload_schema")]
    #[serde(
        default = "control_plane_only",
        skip_serializing_if = "is_control_plane_only"
    )]
    pub workload: Workload,
    /// A control-plane benchmark: claims provisioned, attached, written once and deleted, each
    /// step timed (docs/CONTROL_PLANE.md). With a `workload` too, the operations start at the
    /// workers' start instant and run while the workers run it (data-plane load); the run
    /// completes when both have ended. Not with `matrix` or a training search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<control_plane::ControlPlaneSpec>,
    /// Credentials for object storage, by reference to a Secret in this namespace. The kubelet
    /// gives it to the worker pods as environment variables and as files in
    /// `/var/run/benchrun/credentials` (set as `storage.credentialsDir` unless the workload names
    /// one); the operator never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// The CA bundle (PEM) that verifies the storage's `https://` endpoints, by reference to a
    /// key of a Secret or ConfigMap in this namespace (`{secret: {name, key}}` or
    /// `{configMap: {name, key}}`). Mounted read-only into the worker pods and set as the
    /// workload's `storage.tls.caFile`; the operator never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_ref: Option<ca::CaRef>,
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
    /// What a lost worker does to the run: one whose pod was deleted, failed or evicted, or
    /// whose node was lost (the agent silent and the node gone or NotReady for 40 s, or the
    /// agent silent 2 minutes past the run's expected end), before its result was collected.
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
    /// Record every operation of every worker, and keep each worker's op-log with the run's
    /// results as `<uri><run>/<worker>.oplog.gz` (uri: a directory of the target's scheme,
    /// written with the run's storage settings); `status.workers[].oplog` says where each
    /// is. Object workloads only, not with `matrix` (docs/OPLOG.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oplog: Option<oplog::OplogSpec>,
}

/// The `workload` of a run that gives none (a control-plane run): never run, never
/// serialized (see [`is_control_plane_only`]); a run's code paths that read the workload are
/// not reached by a control-plane run, whose pass branches off before admission.
pub fn control_plane_only() -> Workload {
    // A constant document of our own: it always parses (a unit test says so).
    serde_yaml::from_str(PLACEHOLDER_YAML).expect("the placeholder workload parses")
}

/// The placeholder's target: no scheme any worker serves, so it can never be mistaken for
/// a real workload.
const CONTROL_PLANE_TARGET: &str = "controlplane://none";
const PLACEHOLDER_YAML: &str = "{target: 'controlplane://none', totalOps: 1, ops: [{op: stat}]}";

/// Whether `w` is [`control_plane_only`]'s placeholder.
pub fn is_control_plane_only(w: &Workload) -> bool {
    w.target == CONTROL_PLANE_TARGET
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
    /// The run's deadline, measured from its creation: `timeout`, or the workload's duration
    /// (and warm-up) plus 10 minutes (1 hour for an op-count run), once per child run of a
    /// matrix.
    pub fn deadline(&self) -> Duration {
        let one = match (self.timeout, self.workload.duration) {
            (Some(t), _) => return t.0,
            (None, Some(d)) => {
                d.0.saturating_add(self.workload.warmup.map_or(Duration::ZERO, |w| w.0))
                    .saturating_add(Duration::from_secs(600))
            }
            (None, None) => Duration::from_secs(3600),
        };
        // A matrix runs its child runs one after another (per combination: the warm-up, if any,
        // and each repeat), each with its own default deadline.
        let n = self.matrix.as_ref().map_or(1, |m| {
            let per = m.repeats.max(1) as usize + usize::from(m.warmup.is_some());
            m.combinations().saturating_mul(per)
        });
        one.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
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
    /// Secrets of the worker pods for pulling the image from a private registry
    /// (`[{name: regcred}]`, as a pod's `imagePullSecrets`); default the operator's
    /// (the chart's `operator.workerImage.pullSecrets`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    /// The workers' seccomp profile; default `RuntimeDefault`, which usually refuses io_uring
    /// (block workloads then run their `sync` engine and say so). A `Localhost` profile
    /// installed on the nodes that allows `io_uring_setup`, `io_uring_enter` and
    /// `io_uring_register` gives them io_uring; `Unconfined` only where the operator's
    /// administrator allows it (`allowUnconfinedSeccomp`). See docs/VOLUMES.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_profile: Option<SeccompProfile>,
    /// How long a worker pod may stay unschedulable before the run fails it (under
    /// `failurePolicy: Abort`, the run). Default 5m: a cluster autoscaler or Karpenter takes
    /// 1 to 5 minutes for a node, and a previous run's pods may still be terminating. While
    /// an autoscaler reports a scale-up for the pod (cluster-autoscaler's `TriggeredScaleUp`,
    /// Karpenter's `Nominated` pod events) the wait goes on up to 3 times this; a
    /// `NotTriggerScaleUp` ends it. The `WorkersScheduled` condition says what the scheduler
    /// and the autoscaler said meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout: Option<HumanDuration>,
}

/// `spec.workers.scheduleTimeout` when the run gives none.
pub const DEFAULT_SCHEDULE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl WorkersSpec {
    /// Whether one worker runs on every eligible node.
    pub fn per_node(&self) -> bool {
        self.per_node.unwrap_or(false)
    }

    /// How long a worker pod may stay unschedulable.
    pub fn schedule_timeout(&self) -> std::time::Duration {
        self.schedule_timeout
            .map(|d| d.0)
            .unwrap_or(DEFAULT_SCHEDULE_TIMEOUT)
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
    /// An existing PersistentVolumeClaim: one shared by every worker (ReadWriteMany for
    /// several), or one per worker with `{worker}` in the name (`data-{worker}`: worker w0
    /// mounts `data-w0`, w1 `data-w1`, ...), for claims made beforehand and kept between runs.
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
                // Training (epochs) and checkpoint (repeats) workloads set their own length,
                // as `Workload::validate` (check_run_length) says.
                "rule": "has(self.training) || has(self.checkpoint) || has(self.duration) != has(self.totalOps)",
                "message": "give workload.duration or workload.totalOps (exactly one), or a training or checkpoint workload",
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
    fn checked_in_schedule_crd_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crds/benchmarkschedule.yaml"
        );
        let want = crate::schedule_crd_yaml();
        let have = std::fs::read_to_string(path).unwrap_or_default();
        if std::env::var_os("BENCHRUN_UPDATE_CRD").is_some() {
            assert!(
                std::env::var_os("CI").is_none(),
                "BENCHRUN_UPDATE_CRD is set in CI: the snapshot would be rewritten, not checked"
            );
            std::fs::write(path, &want).expect("write crds/benchmarkschedule.yaml");
            return;
        }
        assert!(
            have == want,
            "crds/benchmarkschedule.yaml is stale: run `cargo run -p benchrun-operator -- crd --schedule > crds/benchmarkschedule.yaml` \
             (or BENCHRUN_UPDATE_CRD=1 cargo test -p benchrun-operator --lib crd)"
        );
    }

    #[test]
    fn a_control_plane_run_needs_no_workload_and_writes_none_back() {
        let spec: BenchmarkRunSpec =
            serde_yaml::from_str("controlPlane: {operations: [provision], count: 1}\n")
                .expect("parses");
        assert!(is_control_plane_only(&spec.workload));
        let v = serde_json::to_value(&spec).expect("ser");
        assert!(v.get("workload").is_none(), "{v}");
        let again: BenchmarkRunSpec = serde_json::from_value(v).expect("de");
        assert_eq!(spec, again);
        // The schema: workload no longer required, one of the two (or both) is.
        let crd = serde_json::to_string(&crate::crd()).expect("crd");
        assert!(crd.contains("has(self.workload) || has(self.controlPlane)"));
        assert!(crd.contains(
            "give a subset of provision, attach, firstIO, snapshot, clone, expand, delete"
        ));
        assert!(crd.contains("list snapshot in operations too"));
    }

    #[test]
    fn deadline_of_a_huge_duration_saturates() {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(
            "workload: {target: file:///data, duration: 1000000000000h, ops: [{op: get}]}\n",
        )
        .expect("parses");
        assert!(spec.deadline() >= std::time::Duration::from_secs(1 << 50));
    }

    /// Walk the schema and check the structural rules the apiserver enforces, so a bad schema
    /// fails here and not at `kubectl apply`.
    #[test]
    fn schema_is_structural() {
        let schema = structural(&crate::crd());
        let text = schema.to_string();
        assert!(text.contains("self == oldSelf"), "spec must be immutable");
        assert!(text.contains("has(self.duration) != has(self.totalOps)"));
        // The schedule's: its run template is the run's spec, less the immutability.
        let schedule = structural(&crate::schedule_crd());
        let template = &schedule["properties"]["spec"]["properties"]["runTemplate"];
        let rules = template["x-kubernetes-validations"].to_string();
        assert!(!rules.contains("oldSelf"), "{rules}");
        assert!(rules.contains("!has(self.baselineRef)"), "{rules}");
        assert!(template
            .to_string()
            .contains("has(self.duration) != has(self.totalOps)"));
    }

    /// The CRD's schema, checked against the structural rules.
    fn structural(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> Value {
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
        schema
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
        assert_eq!(cols, ["Phase", "Workers", "Throughput", "P99", "AU", "Age"]);
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
