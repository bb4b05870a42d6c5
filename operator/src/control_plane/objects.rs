//! Pure builders of what a control-plane run creates: one claim and one probe pod per
//! lifecycle, owned by the run (controller owner reference) and labelled with the run's name
//! and [`COMPONENT`], so that the sweep finds them and `owned_by` tells them apart from an
//! earlier run's of the same name.

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    Pod, PodSecurityContext, PodSpec, SeccompProfile, TypedLocalObjectReference, Volume,
    VolumeDevice, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::DynamicObject;
use kube::ResourceExt;
use std::collections::BTreeMap;

use super::watch::volume_snapshots;
use crate::crd::control_plane::{CloneSource, ControlPlaneSpec, VolumeMode, DEFAULT_SIZE};
use crate::crd::BenchmarkRun;
use crate::resources::{owned_meta, RUN_LABEL, WORKER_UID};
use crate::Result;

/// Label on every object of a control-plane run, beside the run's name.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// [`COMPONENT_LABEL`]'s value.
pub const COMPONENT: &str = "control-plane";
/// Where the probe pod mounts a `Filesystem` claim.
pub const MOUNT: &str = "/data";
/// Where a `Block` claim's device appears in the probe pod (`volumeDevices`).
pub const DEVICE: &str = "/dev/benchrun-probe";
/// The probe pod's container.
pub const CONTAINER: &str = "probe";
/// The container that keeps an `inUse` lifecycle's volume mounted after the probe ended.
pub const HOLD_CONTAINER: &str = "hold";

/// Lifecycle `i`'s claim (and its pod, of the same name).
pub fn name(run: &str, i: usize) -> String {
    format!("{run}-cp-{i}")
}

/// Lifecycle `i`'s clone (`clone`): a claim of its own, with the claim (or the snapshot) as
/// its `dataSource`.
pub fn clone_name(run: &str, i: usize) -> String {
    format!("{}-clone", name(run, i))
}

/// The label selector of everything a control-plane run `run` created.
pub fn selector(run: &str) -> String {
    format!("{RUN_LABEL}={run},{COMPONENT_LABEL}={COMPONENT}")
}

fn meta(
    run: &BenchmarkRun,
    i: usize,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
    named_meta(run, name(&run.name_any(), i))
}

fn named_meta(
    run: &BenchmarkRun,
    name: String,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> {
    let mut m = owned_meta(run, name)?;
    m.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(COMPONENT_LABEL.into(), COMPONENT.into());
    Ok(m)
}

/// Lifecycle `i`'s claim.
pub fn claim(run: &BenchmarkRun, cp: &ControlPlaneSpec, i: usize) -> Result<PersistentVolumeClaim> {
    let size = cp
        .size
        .clone()
        .unwrap_or_else(|| Quantity(DEFAULT_SIZE.into()));
    Ok(PersistentVolumeClaim {
        metadata: meta(run, i)?,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![cp.access_mode.unwrap_or_default().as_str().into()]),
            storage_class_name: cp.storage_class_name.clone(),
            volume_mode: Some(cp.volume_mode().as_str().into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), size)])),
                limits: None,
            }),
            ..Default::default()
        }),
        status: None,
    })
}

/// Lifecycle `i`'s clone claim: as its claim, with `dataSource` the claim or, with
/// `cloneSource: Snapshot`, its VolumeSnapshot.
pub fn clone_claim(
    run: &BenchmarkRun,
    cp: &ControlPlaneSpec,
    i: usize,
) -> Result<PersistentVolumeClaim> {
    let mut c = claim(run, cp, i)?;
    let source = name(&run.name_any(), i);
    c.metadata = named_meta(run, clone_name(&run.name_any(), i))?;
    if let Some(spec) = c.spec.as_mut() {
        spec.data_source = Some(match cp.clone_source() {
            CloneSource::Claim => TypedLocalObjectReference {
                api_group: None,
                kind: "PersistentVolumeClaim".into(),
                name: source,
            },
            CloneSource::Snapshot => TypedLocalObjectReference {
                api_group: Some("snapshot.storage.k8s.io".into()),
                kind: "VolumeSnapshot".into(),
                name: source,
            },
        });
    }
    Ok(c)
}

/// Lifecycle `i`'s VolumeSnapshot of its claim (same name), in `volumeSnapshotClassName` or
/// the default class.
pub fn snapshot(run: &BenchmarkRun, cp: &ControlPlaneSpec, i: usize) -> Result<DynamicObject> {
    let meta = meta(run, i)?;
    let mut spec = serde_json::json!({
        "source": {"persistentVolumeClaimName": name(&run.name_any(), i)}
    });
    if let Some(class) = &cp.volume_snapshot_class_name {
        spec["volumeSnapshotClassName"] = class.clone().into();
    }
    let mut o = DynamicObject::new(&name(&run.name_any(), i), &volume_snapshots());
    o.metadata = meta;
    o.data = serde_json::json!({ "spec": spec });
    Ok(o)
}

/// The claim's request after `expand`, in bytes: `expandedSize`, or twice `size`. `None` when
/// either is not a quantity (the run's check refuses that first).
pub fn expanded_bytes(cp: &ControlPlaneSpec) -> Option<u64> {
    let parse = |q: &str| crate::podfields::parse_quantity(q).filter(|b| *b > 0.0);
    let b = match &cp.expanded_size {
        Some(q) => parse(&q.0)?,
        None => 2.0 * parse(cp.size.as_ref().map_or(DEFAULT_SIZE, |q| q.0.as_str()))?,
    };
    // Whole bytes, rounded up: the request must not come out below what was asked.
    Some(b.ceil() as u64)
}

/// `busyIOPS` when the run gives none.
pub const DEFAULT_BUSY_IOPS: u32 = 1000;

/// The grace a `busy` pod gets when deleted, seconds: its hold stops its I/O on SIGTERM and
/// writes its report as the termination message, which only a graceful deletion keeps.
pub const BUSY_GRACE_SECONDS: i64 = 30;

/// The bytes a `busy` hold spreads its I/O over: half the claim's size (room for the file
/// system's own blocks), 4 KiB at least and 16 MiB at most (a region the volume's cache does
/// not hold whole is not the point: a steady load on the volume is).
pub fn busy_bytes(cp: &ControlPlaneSpec) -> u64 {
    const MAX: u64 = 16 << 20;
    let size = cp.size.as_ref().map_or(DEFAULT_SIZE, |q| q.0.as_str());
    let half = crate::podfields::parse_quantity(size).map_or(MAX as f64, |b| b / 2.0);
    ((half as u64).min(MAX) / 4096 * 4096).max(4096)
}

/// Lifecycle `i`'s pod: the worker image's `probe-io`, which writes then reads 4 KiB with
/// O_DIRECT in the mounted claim ([`MOUNT`]), or on its raw device ([`DEVICE`]) for a `Block`
/// claim, and reports both times in its termination message. Locked down as a worker pod
/// (non-root, read-only root, no capabilities, no API token); `fsGroup` makes a mounted
/// volume writable where the driver honours it (the test cluster's provisioner makes its
/// directories world-writable); a device node is the pod user's where the runtime gives it
/// the pod's `runAsUser` (containerd's `device_ownership_from_security_context`).
pub fn pod(run: &BenchmarkRun, image: &str, i: usize) -> Result<Pod> {
    let claim = name(&run.name_any(), i);
    let workers = &run.spec.workers;
    let block = run
        .spec
        .control_plane
        .as_ref()
        .is_some_and(|cp| cp.volume_mode() == VolumeMode::Block);
    let (path, mounts, devices) = if block {
        let d = VolumeDevice {
            name: "data".into(),
            device_path: DEVICE.into(),
        };
        (DEVICE, None, Some(vec![d]))
    } else {
        let m = VolumeMount {
            name: "data".into(),
            mount_path: MOUNT.into(),
            ..Default::default()
        };
        (MOUNT, Some(vec![m]), None)
    };
    let probe = Container {
        name: CONTAINER.into(),
        image: Some(workers.image.clone().unwrap_or_else(|| image.to_string())),
        args: Some(vec!["probe-io".into(), path.into()]),
        security_context: Some(crate::resources::worker_security_context()),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: mounts,
        volume_devices: devices,
        resources: workers.resources.clone(),
        ..Default::default()
    };
    let cp = run.spec.control_plane.as_ref();
    let in_use = cp.is_some_and(|cp| cp.in_use);
    let busy = cp.filter(|cp| cp.busy);
    // With `inUse`, a second container keeps the pod running, so the volume stays mounted
    // (the kubelet unmounts a finished pod's volumes) while the snapshot, clone and expand run;
    // with `busy` it runs I/O on it meanwhile.
    let mut hold_args = vec!["probe-hold".to_string()];
    if let Some(cp) = busy {
        hold_args.extend([
            "--busy".into(),
            path.into(),
            "--busy-bytes".into(),
            busy_bytes(cp).to_string(),
            "--busy-iops".into(),
            cp.busy_iops.unwrap_or(DEFAULT_BUSY_IOPS).to_string(),
        ]);
    }
    let hold = in_use.then(|| Container {
        name: HOLD_CONTAINER.into(),
        args: Some(hold_args),
        termination_message_policy: None,
        ..probe.clone()
    });
    Ok(Pod {
        metadata: meta(run, i)?,
        spec: Some(PodSpec {
            containers: std::iter::once(probe).chain(hold).collect(),
            volumes: Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim,
                    read_only: Some(false),
                }),
                ..Default::default()
            }]),
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            node_selector: workers.node_selector.clone(),
            tolerations: workers.tolerations.clone(),
            affinity: workers.affinity.clone(),
            image_pull_secrets: workers.image_pull_secrets.clone(),
            // The probe has nothing to flush: a deleted pod goes at once. A busy hold writes
            // its report when told to stop: the kubelet must let it (it stops in milliseconds).
            termination_grace_period_seconds: Some(if busy.is_some() {
                BUSY_GRACE_SECONDS
            } else {
                0
            }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(WORKER_UID),
                run_as_group: Some(WORKER_UID),
                fs_group: Some(WORKER_UID),
                seccomp_profile: Some(workers.seccomp_profile.clone().unwrap_or(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                })),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    })
}

/// What `probe-io` reports in its termination message (one JSON line).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// The 4 KiB O_DIRECT write (with its fdatasync), microseconds.
    pub write_us: u64,
    /// The 4 KiB O_DIRECT read of it, microseconds.
    pub read_us: u64,
}

/// The probe's report from its termination message; `None` when it is not one.
pub fn probe_report(message: &str) -> Option<ProbeReport> {
    message
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> BenchmarkRun {
        let mut r: BenchmarkRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "cp", "namespace": "ns", "uid": "u-1"},
            "spec": {"controlPlane": {"operations": ["provision", "attach"], "count": 3,
                     "storageClassName": "fast", "size": "16Mi"}}
        }))
        .expect("run");
        r.metadata.uid = Some("u-1".into());
        r
    }

    #[test]
    fn claim_and_pod_are_owned_labelled_and_locked_down() {
        let r = run();
        let cp = r.spec.control_plane.clone().expect("cp");
        let c = claim(&r, &cp, 2).expect("claim");
        assert_eq!(c.metadata.name.as_deref(), Some("cp-cp-2"));
        assert_eq!(
            c.metadata.owner_references.as_ref().expect("owner")[0].uid,
            "u-1"
        );
        let labels = c.metadata.labels.clone().expect("labels");
        assert_eq!(labels[COMPONENT_LABEL], COMPONENT);
        assert_eq!(labels[RUN_LABEL], "cp");
        let s = c.spec.expect("spec");
        assert_eq!(s.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            s.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "16Mi"
        );
        let p = pod(&r, "img", 2).expect("pod");
        let ps = p.spec.expect("spec");
        assert_eq!(ps.automount_service_account_token, Some(false));
        let c0 = &ps.containers[0];
        assert_eq!(c0.image.as_deref(), Some("img"));
        let sc = c0.security_context.as_ref().expect("sc");
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        assert_eq!(
            ps.volumes.expect("volumes")[0]
                .persistent_volume_claim
                .as_ref()
                .expect("pvc")
                .claim_name,
            "cp-cp-2"
        );
        assert_eq!(
            selector("cp"),
            "benchrun.dev/run=cp,app.kubernetes.io/component=control-plane"
        );
    }

    #[test]
    fn the_clone_copies_the_claim_or_its_snapshot_and_the_snapshot_its_claim() {
        let mut r = run();
        let cp = r.spec.control_plane.clone().expect("cp");
        let c = clone_claim(&r, &cp, 1).expect("clone");
        assert_eq!(c.metadata.name.as_deref(), Some("cp-cp-1-clone"));
        assert_eq!(
            c.metadata.labels.as_ref().expect("labels")[COMPONENT_LABEL],
            COMPONENT
        );
        assert_eq!(
            c.metadata.owner_references.as_ref().expect("owner")[0].uid,
            "u-1"
        );
        let s = c.spec.expect("spec");
        let ds = s.data_source.expect("dataSource");
        assert_eq!(
            (ds.api_group, ds.kind.as_str(), ds.name.as_str()),
            (None, "PersistentVolumeClaim", "cp-cp-1")
        );
        // The source's class and size: a clone may not be smaller than its source.
        assert_eq!(s.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(
            s.resources.and_then(|r| r.requests).expect("requests")["storage"].0,
            "16Mi"
        );

        if let Some(cp) = r.spec.control_plane.as_mut() {
            cp.clone_source = Some(CloneSource::Snapshot);
            cp.volume_snapshot_class_name = Some("snaps".into());
        }
        let cp = r.spec.control_plane.clone().expect("cp");
        let ds = clone_claim(&r, &cp, 1)
            .expect("clone")
            .spec
            .expect("spec")
            .data_source
            .expect("dataSource");
        assert_eq!(
            (ds.api_group.as_deref(), ds.kind.as_str(), ds.name.as_str()),
            (Some("snapshot.storage.k8s.io"), "VolumeSnapshot", "cp-cp-1")
        );
        let v = snapshot(&r, &cp, 1).expect("snapshot");
        assert_eq!(v.metadata.name.as_deref(), Some("cp-cp-1"));
        assert_eq!(
            v.metadata.owner_references.as_ref().expect("owner")[0].uid,
            "u-1"
        );
        assert_eq!(v.metadata.labels.as_ref().expect("labels")[RUN_LABEL], "cp");
        let t = v.types.expect("types");
        assert_eq!(
            (t.api_version.as_str(), t.kind.as_str()),
            ("snapshot.storage.k8s.io/v1", "VolumeSnapshot")
        );
        assert_eq!(
            v.data["spec"],
            serde_json::json!({"source": {"persistentVolumeClaimName": "cp-cp-1"}, "volumeSnapshotClassName": "snaps"})
        );
    }

    #[test]
    fn a_block_claim_is_given_to_the_probe_as_its_device() {
        let r = run();
        let c = claim(&r, r.spec.control_plane.as_ref().expect("cp"), 0).expect("claim");
        assert_eq!(
            c.spec.and_then(|s| s.volume_mode).as_deref(),
            Some("Filesystem"),
            "the default"
        );
        let p = pod(&r, "img", 0).expect("pod");
        let c0 = &p.spec.expect("spec").containers[0];
        assert_eq!(
            c0.args.as_deref(),
            Some(&["probe-io".to_string(), MOUNT.to_string()][..])
        );
        assert!(c0.volume_devices.is_none());

        let mut r = run();
        if let Some(cp) = r.spec.control_plane.as_mut() {
            cp.volume_mode = Some(VolumeMode::Block);
        }
        let c = claim(&r, r.spec.control_plane.as_ref().expect("cp"), 0).expect("claim");
        assert_eq!(c.spec.and_then(|s| s.volume_mode).as_deref(), Some("Block"));
        let p = pod(&r, "img", 0).expect("pod");
        let c0 = &p.spec.expect("spec").containers[0];
        assert_eq!(
            c0.args.as_deref(),
            Some(&["probe-io".to_string(), DEVICE.to_string()][..])
        );
        assert!(c0.volume_mounts.is_none(), "a raw device is not mounted");
        let d = c0.volume_devices.as_ref().expect("volumeDevices");
        assert_eq!(
            (d[0].name.as_str(), d[0].device_path.as_str()),
            ("data", DEVICE)
        );
    }

    #[test]
    fn an_in_use_pod_holds_its_volume_with_a_second_locked_down_container() {
        let mut r = run();
        let one = pod(&r, "img", 0).expect("pod").spec.expect("spec");
        assert_eq!(one.containers.len(), 1, "not in use: the probe alone");
        r.spec.control_plane.as_mut().expect("cp").in_use = true;
        let spec = pod(&r, "img", 0).expect("pod").spec.expect("spec");
        let [probe, hold] = &spec.containers[..] else {
            panic!("two containers: {:?}", spec.containers)
        };
        assert_eq!(
            (probe.name.as_str(), hold.name.as_str()),
            (CONTAINER, HOLD_CONTAINER)
        );
        assert_eq!(hold.args.as_deref(), Some(&["probe-hold".to_string()][..]));
        assert_eq!(
            hold.volume_mounts, probe.volume_mounts,
            "the same volume, mounted"
        );
        assert_eq!(hold.security_context, probe.security_context);
        assert_eq!(hold.image, probe.image);
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.termination_grace_period_seconds, Some(0));

        // busy: the hold runs I/O over half the claim (16Mi here), and gets a graceful stop.
        let cp = r.spec.control_plane.as_mut().expect("cp");
        cp.busy = true;
        cp.size = Some(Quantity("16Mi".into()));
        let spec = pod(&r, "img", 0).expect("pod").spec.expect("spec");
        let args = spec.containers[1].args.clone().unwrap_or_default();
        assert_eq!(
            args,
            [
                "probe-hold",
                "--busy",
                MOUNT,
                "--busy-bytes",
                "8388608",
                "--busy-iops",
                "1000"
            ]
        );
        assert_eq!(
            spec.termination_grace_period_seconds,
            Some(BUSY_GRACE_SECONDS)
        );
    }

    #[test]
    fn a_busy_region_is_half_the_claim_within_bounds() {
        let mut cp = run().spec.control_plane.expect("cp");
        cp.size = None;
        assert_eq!(busy_bytes(&cp), 16 << 20, "the default 1Gi: the cap");
        for (size, want) in [("16Mi", 8 << 20), ("10001", 4096), ("1Ki", 4096)] {
            cp.size = Some(Quantity(size.into()));
            assert_eq!(busy_bytes(&cp), want, "{size}");
        }
    }

    #[test]
    fn the_probe_report_is_the_last_json_line() {
        assert_eq!(
            probe_report("noise\n{\"writeUs\": 120, \"readUs\": 45}\n"),
            Some(ProbeReport {
                write_us: 120,
                read_us: 45
            })
        );
        assert_eq!(probe_report("open /data: permission denied"), None);
    }
}
