//! `spec.controlPlane` and `status.controlPlane`: the types of a control-plane benchmark (how
//! long the storage control plane takes to provision, attach, serve a first I/O and delete a
//! claim), checked by [`crate::control_plane::check`] and run by [`crate::control_plane`].

use std::collections::BTreeMap;

use benchrun_api::units::HumanDuration;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most claims one run may create (`count`); also in the schema.
pub const MAX_COUNT: i32 = 10_000;
/// Most lifecycles in flight at once (`concurrency`); also in the schema.
pub const MAX_CONCURRENCY: i32 = 500;
/// Lowest and highest `ratePerSecond`; also in the schema.
pub const MIN_RATE: f64 = 0.01;
/// See [`MIN_RATE`].
pub const MAX_RATE: f64 = 1000.0;
/// `timeout` when the run gives none: per operation of one claim.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// `size` when the run gives none.
pub const DEFAULT_SIZE: &str = "1Gi";

/// Every operation, in lifecycle order.
pub const OPERATIONS: [&str; 7] = [
    "provision",
    "attach",
    "firstIO",
    "snapshot",
    "clone",
    "expand",
    "delete",
];

/// A control-plane benchmark: `count` claims, each taken through one lifecycle (claim created
/// -> Bound, a pod mounting it -> its container running, a 4 KiB O_DIRECT write and read in
/// it, a VolumeSnapshot of it -> ready, a clone of it -> Bound, a larger request -> the new
/// capacity, pod and claims deleted -> the PersistentVolumes gone), `concurrency` lifecycles
/// at once. Every step's latency runs from the API request to the state seen in a watch event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("self.operations.all(o, o in ['provision', 'attach', 'firstIO', 'snapshot', 'clone', 'expand', 'delete'])").message("controlPlane.operations: give a subset of provision, attach, firstIO, snapshot, clone, expand, delete").reason(::kube::core::cel::Reason::FieldValueInvalid))]
#[x_kube(validation = Rule::new("!has(self.cloneSource) || self.cloneSource != 'Snapshot' || 'snapshot' in self.operations").message("controlPlane.cloneSource Snapshot clones from the lifecycle's VolumeSnapshot: list snapshot in operations too"))]
#[x_kube(validation = Rule::new("!has(self.concurrency) || !has(self.count) || self.concurrency <= self.count").message("controlPlane.concurrency may not exceed controlPlane.count"))]
#[x_kube(validation = Rule::new("!has(self.busy) || !self.busy || (has(self.inUse) && self.inUse)").message("controlPlane.busy keeps I/O running on a volume in use: set inUse too"))]
#[x_kube(validation = Rule::new("!has(self.busyIOPS) || (has(self.busy) && self.busy)").message("controlPlane.busyIOPS caps the I/O of busy: set busy too"))]
#[x_kube(validation = Rule::new("!has(self.busy) || !self.busy || !('firstIO' in self.operations)").message("controlPlane.busy: the first I/O would be timed beside the pod's own I/O; measure firstIO in a run without busy"))]
#[x_kube(validation = Rule::new("!has(self.inUse) || !self.inUse || self.operations.exists(o, o in ['snapshot', 'clone', 'expand'])").message("controlPlane.inUse keeps the volume in use while it is snapshotted, cloned or expanded: list snapshot, clone or expand in operations, or leave inUse out"))]
#[x_kube(validation = Rule::new("!has(self.expandedSize) || 'expand' in self.operations").message("controlPlane.expandedSize is the request after expand: list expand in operations, or leave expandedSize out"))]
#[x_kube(validation = Rule::new("!has(self.maxLate) || has(self.ratePerSecond)").message("controlPlane.maxLate limits late starts of an arrival rate: give ratePerSecond too"))]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneSpec {
    /// What is measured, a subset of `provision` (claim created -> Bound), `attach` (a pod
    /// using the claim created -> its container running), `firstIO` (a 4 KiB O_DIRECT write
    /// then read of the volume, timed inside the pod), `snapshot` (a VolumeSnapshot of the
    /// claim created -> `readyToUse`), `clone` (a claim whose `dataSource` is the claim, or
    /// the snapshot, created -> Bound), `expand` (the claim's request raised to
    /// `expandedSize` -> its `status.capacity` that large) and `delete` (claim deleted -> its
    /// PersistentVolume gone). Every lifecycle provisions and deletes its claim whatever is
    /// listed; a pod is created when `attach` or `firstIO` is listed, or when the class binds
    /// on first consumer (or `inUse` is set). `snapshot`, `clone` and `expand` need a CSI
    /// driver that supports them (and, for `snapshot`, the VolumeSnapshot CRDs and the
    /// snapshot controller); the pod is gone before they start (an offline expansion) unless
    /// `inUse` is set.
    #[schemars(length(min = 1, max = 7))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub operations: Vec<String>,
    /// Claims created, one lifecycle each.
    #[schemars(range(min = 1, max = 10000))]
    pub count: i32,
    /// Lifecycles in flight at once. Default 1. With `ratePerSecond`, the most in flight at
    /// once (default `count`, at most 500): a lifecycle due while that many are in flight
    /// starts when one ends, and is counted late (`status.controlPlane.arrivals`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 500))]
    pub concurrency: Option<i32>,
    /// Open loop: lifecycles start at this rate (lifecycle i is due i / ratePerSecond seconds
    /// after the first), whether or not the earlier ones have finished, as pods arrive in a
    /// scale-up; `concurrency` caps those in flight. Unset: closed loop, a new lifecycle when
    /// one ends. Timer resolution 1 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.01, max = 1000.0))]
    pub rate_per_second: Option<f64>,
    /// The claims' StorageClass; default the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: Option<String>,
    /// Each claim's request. Default 1Gi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// Each claim's access mode. Default ReadWriteOnce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_mode: Option<AccessMode>,
    /// Each claim's volume mode. Default `Filesystem`: the pod mounts the volume and the first
    /// I/O writes a file in it. `Block`: the pod gets the raw device (`volumeDevices`) and the
    /// first I/O overwrites its first 4 KiB (refused on a device that holds a file system or
    /// is in use); the device node must be owned by the pod's user (containerd's
    /// `device_ownership_from_security_context`), and the class's provisioner must provision
    /// Block volumes (one that does not fails the run with its `ProvisioningFailed` Event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mode: Option<VolumeMode>,
    /// Longest wait for each operation of one claim (e.g. Bound after the create); past it the
    /// lifecycle fails with `timeout` and the last Event of the claim or pod. Default 2m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<HumanDuration>,
    /// The VolumeSnapshotClass of `snapshot`; default the cluster's default class for the
    /// claim's driver (the snapshot controller picks it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub volume_snapshot_class_name: Option<String>,
    /// What `clone` copies: `Claim` (default; CSI volume cloning, the claim as its
    /// `dataSource`) or `Snapshot` (a restore: the lifecycle's VolumeSnapshot as its
    /// `dataSource`; needs `snapshot` in `operations`). The clone has the claim's class,
    /// size, access mode and volume mode; the class must bind at once (`Immediate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_source: Option<CloneSource>,
    /// The claim's request after `expand`. Default twice `size`. The class must allow
    /// expansion (`allowVolumeExpansion: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expanded_size: Option<Quantity>,
    /// Take `snapshot`, `clone` and `expand` while the lifecycle's pod still has the volume
    /// mounted (a snapshot and a clone of a volume in use, an online expansion), instead of
    /// after the pod is gone. The pod holds the volume with a second container
    /// (`probe-hold`) until they are done, then is deleted. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_use: bool,
    /// With `inUse`: the volume is also busy while it is snapshotted, cloned and expanded. The
    /// hold container runs 4 KiB O_DIRECT random I/O on it (70% reads, one at a time, at most
    /// `busyIOPS` a second, over half the claim's size up to 16 MiB: a file of its own, or a
    /// `Block` device from 1 MiB on) until the pod is deleted, and reports it in
    /// `status.controlPlane.busy`. Not with `firstIO` (the first I/O would be timed beside
    /// it). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// With `busy`: the most I/Os a second on each volume. Default 1000. A cap, not a target:
    /// one I/O at a time on slow storage does fewer; without it, a volume served from a cache
    /// would take a core of its node for the loop, and the control plane measured beside it
    /// would wait for CPU.
    #[serde(default, rename = "busyIOPS", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub busy_iops: Option<u32>,
    /// With a workload: the first lifecycle starts this long after the workers' start instant
    /// (e.g. past the workload's `warmup`, so that the operations meet a steady load); less
    /// than the workload's `warmup` plus `duration`. Default 0. Not on a run with
    /// `controlPlane` alone, whose lifecycles start at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_after: Option<HumanDuration>,
    /// With `ratePerSecond`: the most lifecycles that may start late (more than 10 ms after
    /// due: the `concurrency` cap was reached, or the operator was busy); more fails the run
    /// (`ThresholdsMet=False`, op `arrivals`), since a run that could not keep its rate did
    /// not measure the load it was asked for. Unset: late starts are counted
    /// (`status.controlPlane.arrivals`), never failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_late: Option<u32>,
    /// Limits on the result, per operation; a miss fails the run (`ThresholdsMet=False`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub thresholds: Vec<ControlPlaneThreshold>,
}

/// A claim's access mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(missing_docs)]
pub enum AccessMode {
    #[default]
    ReadWriteOnce,
    ReadWriteOncePod,
    ReadWriteMany,
}

impl AccessMode {
    /// As in a claim's `accessModes`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
            AccessMode::ReadWriteMany => "ReadWriteMany",
        }
    }
}

/// A claim's volume mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(missing_docs)]
pub enum VolumeMode {
    #[default]
    Filesystem,
    Block,
}

impl VolumeMode {
    /// As in a claim's `volumeMode`.
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeMode::Filesystem => "Filesystem",
            VolumeMode::Block => "Block",
        }
    }
}

/// What a `clone` copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[allow(missing_docs)]
pub enum CloneSource {
    #[default]
    Claim,
    Snapshot,
}

/// A limit on one operation of a control-plane run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneThreshold {
    /// `provision`, `attach`, `firstIO`, `snapshot`, `clone`, `expand` or `delete`.
    #[schemars(regex(pattern = r"^(provision|attach|firstIO|snapshot|clone|expand|delete)$"))]
    pub operation: String,
    /// Highest acceptable p99 latency of the operation (e.g. `30s`).
    pub max_p99: HumanDuration,
}

impl ControlPlaneSpec {
    /// Lifecycles in flight at once (with `ratePerSecond`: at most).
    pub fn concurrency(&self) -> usize {
        let default = if self.rate_per_second.is_some() {
            self.count
        } else {
            1
        };
        self.concurrency
            .unwrap_or(default)
            .clamp(1, MAX_CONCURRENCY) as usize
    }

    /// Longest wait for one operation of one claim.
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout.map(|t| t.0).unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The claims' volume mode.
    pub fn volume_mode(&self) -> VolumeMode {
        self.volume_mode.unwrap_or_default()
    }

    /// What `clone` copies.
    pub fn clone_source(&self) -> CloneSource {
        self.clone_source.unwrap_or_default()
    }

    /// Whether `op` is measured.
    pub fn measures(&self, op: &str) -> bool {
        self.operations.iter().any(|o| o == op)
    }
}

/// What a control-plane run measured: per operation, and the span it was measured in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneStatus {
    /// Lifecycles asked for (`count`).
    pub requested: u32,
    /// Lifecycles that ran to the end without an error.
    pub completed: u32,
    /// Lifecycles that failed (each counted once, under the operation it failed in).
    pub failed: u32,
    /// Wall time from the first claim's create request to the last lifecycle's end, ms: every
    /// latency lies inside it.
    pub elapsed_ms: f64,
    /// Per operation (`provision`, `attach`, `firstIO`, `delete`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operations: BTreeMap<String, OperationReport>,
    /// The first error, with the Event Kubernetes recorded on the claim or pod (e.g. the
    /// provisioner's `ProvisioningFailed` or `ExternalProvisioning` message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// From each claim's create request to its first I/O done (the pod running, as watched,
    /// plus the probe's write and read), over the lifecycles that got there (`firstIO`'s
    /// count): what a new pod of a StatefulSet waits before its volume serves.
    #[serde(
        rename = "provisionToFirstIO",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provision_to_first_io: Option<LatencyReport>,
    /// With `ratePerSecond`: how the lifecycles kept to their due times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<Arrivals>,
    /// When the first lifecycle started (RFC 3339): with a workload beside it, the workers'
    /// start instant, so the operations ran under data-plane load for as much of `elapsedMs`
    /// as fits in the workload's duration from `status.startTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// With a workload beside it: how much of `elapsedMs` came after the workers' load ended
    /// (`status.startTime` plus `workload.warmup` plus `workload.duration`), ms; 0 when every
    /// operation ran under the data-plane load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_load_ms: Option<f64>,
    /// With `busy`: the I/O the pods kept running on their volumes through the snapshot,
    /// clone and expand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<BusyIo>,
}

/// The I/O of a `busy` run's hold containers (4 KiB O_DIRECT random, 70% reads, one at a
/// time per volume), from each pod's start until its deletion, merged over the lifecycles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BusyIo {
    /// Lifecycles whose pod reported its I/O (in its hold container's termination message).
    pub lifecycles: u32,
    /// Lifecycles whose pod went without a readable report (not counted below).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unreported: u32,
    /// Reads done.
    pub reads: u64,
    /// Writes done.
    pub writes: u64,
    /// I/Os that failed: a storage error while the volume was snapshotted, cloned or
    /// expanded (counted, and the run goes on).
    pub errors: u64,
    /// The first failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// I/Os per second of one volume: every I/O over the sum of the holds' spans.
    pub iops_per_volume: f64,
    /// Latency of the I/Os, from the holds' exact histograms merged; `maxMs` over every hold.
    #[serde(flatten)]
    pub latency: LatencyReport,
    /// Holds whose histogram did not fit in their 4 KiB termination message: their I/Os are
    /// counted, and in `maxMs`, but not in the percentiles.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency_left_out: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How an open-loop control-plane run (`ratePerSecond`) kept to its schedule. Latencies are
/// measured from each API request, so a late start does not show in them: it shows here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Arrivals {
    /// The rate asked for.
    pub rate_per_second: f64,
    /// Lifecycles started.
    pub started: u32,
    /// Of those, started more than 10 ms after they were due: `concurrency` lifecycles were
    /// in flight (the cap), or the operator's runtime was busy.
    pub late: u32,
    /// The largest start lag (start minus due), ms.
    pub max_lag_ms: f64,
}

/// One operation's figures, from exact HDR histograms (microsecond resolution; the times
/// themselves are as exact as the watch events that end them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationReport {
    /// Operations that succeeded (they have a latency).
    pub count: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Failed operations by kind (`timeout`, `provisioningFailed`, `podFailed`, `api`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Latency of the succeeded ones.
    #[serde(flatten)]
    pub latency: LatencyReport,
    /// Where Kubernetes shows the steps: the latency to each (provision: `pvCreated`,
    /// `bound`; attach: `scheduled`, `running`; firstIO: `write`, `read`; delete:
    /// `claimGone`, `pvGone`), from the operation's start.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases: BTreeMap<String, LatencyReport>,
}

/// Percentiles of one latency histogram, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct LatencyReport {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}
