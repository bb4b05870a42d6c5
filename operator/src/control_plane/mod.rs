//! Control-plane runs (`spec.controlPlane`, docs/CONTROL_PLANE.md): `count` claims, each
//! taken through one lifecycle ([`lifecycle`]), `concurrency` at once or at `ratePerSecond`
//! ([`pace`]); the latencies seen through watch events ([`watch`]) in HDR histograms
//! ([`figures`], also fed to the operator's histograms); what the run creates built by
//! [`objects`].
//!
//! A run's lifecycles are one task of the operator process, kept in [`Runs`] by run UID: the
//! reconcile pass starts it once the run is recorded `Running`, reads its outcome when it
//! ends, and aborts it when the run is deleted or fails. The measurements live only in that
//! task: an operator that restarts mid-run finds a `Running` control-plane run with no task,
//! fails it (reason `OperatorRestarted`) and deletes what it had created ([`sweep`]), rather
//! than report figures with a gap in them.

pub mod figures;
mod lifecycle;
pub mod objects;
pub mod pace;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::children::{delete_owned, owned_by};
use crate::crd::control_plane::{CloneSource, ControlPlaneSpec, ControlPlaneStatus, DEFAULT_SIZE};
use crate::crd::BenchmarkRun;
use figures::{Figures, OPERATIONS};

/// What a control-plane run's task ends with.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// `status.controlPlane`.
    pub status: ControlPlaneStatus,
    /// Why the run failed as a whole (a lifecycle's error is in `status.firstError`).
    pub failure: Option<String>,
}

/// The control-plane runs this process is executing, by run UID.
#[derive(Default)]
pub struct Runs(Mutex<HashMap<String, Slot>>);

enum Slot {
    Running(JoinHandle<Outcome>),
    // Boxed: kept in the map for as long as the run is, beside small running slots.
    Done(Box<Outcome>),
}

/// Where a run's task is.
// A value returned and matched at once, never stored: boxing its large variant buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum Task {
    /// This process has none: it never started it (it restarted since), or forgot it.
    Missing,
    /// Still running.
    Running,
    /// Ended with this outcome (kept until [`Runs::forget`], so a pass whose status write
    /// fails reads it again).
    Done(Outcome),
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start run `uid`'s task, unless it has one.
    pub fn start(
        &self,
        uid: &str,
        task: impl std::future::Future<Output = Outcome> + Send + 'static,
    ) {
        self.lock()
            .entry(uid.to_string())
            .or_insert_with(|| Slot::Running(tokio::spawn(task)));
    }

    /// Where run `uid`'s task is.
    pub async fn task(&self, uid: &str) -> Task {
        let handle = {
            let mut runs = self.lock();
            match runs.get(uid) {
                None => return Task::Missing,
                Some(Slot::Done(o)) => return Task::Done((**o).clone()),
                Some(Slot::Running(h)) if !h.is_finished() => return Task::Running,
                Some(Slot::Running(_)) => {}
            }
            match runs.remove(uid) {
                Some(Slot::Running(h)) => h,
                _ => return Task::Missing,
            }
        };
        // Finished: awaiting it returns at once.
        let outcome = handle.await.unwrap_or_else(|e| Outcome {
            status: ControlPlaneStatus::default(),
            failure: Some(format!("the control-plane task ended abnormally: {e}")),
        });
        self.lock()
            .insert(uid.to_string(), Slot::Done(Box::new(outcome.clone())));
        Task::Done(outcome)
    }

    /// Abort run `uid`'s task, if any, and forget it.
    pub fn forget(&self, uid: &str) {
        if let Some(Slot::Running(h)) = self.lock().remove(uid) {
            h.abort();
        }
    }
}

/// What is wrong with a control-plane spec that the schema cannot say (or that a run
/// created without the schema, as in unit tests, would carry): each problem with its path.
pub fn check(cp: &ControlPlaneSpec) -> Vec<String> {
    let mut errs = vec![];
    let known = OPERATIONS.join(", ");
    for op in &cp.operations {
        if !OPERATIONS.contains(&op.as_str()) {
            errs.push(format!(
                "spec.controlPlane.operations: unknown operation `{op}` (known: {known})"
            ));
        }
    }
    if cp.operations.is_empty() {
        errs.push(format!(
            "spec.controlPlane.operations: give at least one of {known}"
        ));
    }
    if cp.max_late.is_some() && cp.rate_per_second.is_none() {
        errs.push("spec.controlPlane.maxLate limits late starts of an arrival rate: give ratePerSecond too".into());
    }
    if cp.busy && !cp.in_use {
        errs.push(
            "spec.controlPlane.busy keeps I/O running on a volume in use: set inUse too".into(),
        );
    }
    if cp.in_use
        && !["snapshot", "clone", "expand"]
            .iter()
            .any(|o| cp.measures(o))
    {
        errs.push("spec.controlPlane.inUse keeps the volume in use while it is snapshotted, cloned or expanded: list snapshot, clone or expand in operations, or leave inUse out".into());
    }
    if cp.expanded_size.is_some() && !cp.measures("expand") {
        errs.push("spec.controlPlane.expandedSize is the request after expand: list expand in operations, or leave expandedSize out".into());
    }
    if cp.busy_iops.is_some() && !cp.busy {
        errs.push("spec.controlPlane.busyIOPS caps the I/O of busy: set busy too".into());
    }
    if cp.busy && cp.measures("firstIO") {
        errs.push("spec.controlPlane.busy: the first I/O would be timed beside the pod's own I/O; measure firstIO in a run without busy".into());
    }
    if cp.clone_source() == CloneSource::Snapshot && !cp.measures("snapshot") {
        errs.push("spec.controlPlane.cloneSource: Snapshot clones from the lifecycle's VolumeSnapshot: list snapshot in operations too".into());
    }
    let mut seen = cp.operations.clone();
    seen.sort();
    seen.dedup();
    if seen.len() != cp.operations.len() {
        errs.push("spec.controlPlane.operations: an operation is listed twice".into());
    }
    if !(1..=crate::crd::control_plane::MAX_COUNT).contains(&cp.count) {
        errs.push(format!(
            "spec.controlPlane.count: from 1 to {} (got {})",
            crate::crd::control_plane::MAX_COUNT,
            cp.count
        ));
    }
    if let Some(c) = cp.concurrency {
        if !(1..=crate::crd::control_plane::MAX_CONCURRENCY).contains(&c) {
            errs.push(format!(
                "spec.controlPlane.concurrency: from 1 to {} (got {c})",
                crate::crd::control_plane::MAX_CONCURRENCY
            ));
        } else if c > cp.count {
            errs.push(format!(
                "spec.controlPlane.concurrency ({c}) may not exceed count ({})",
                cp.count
            ));
        }
    }
    if let Some(r) = cp.rate_per_second {
        use crate::crd::control_plane::{MAX_RATE, MIN_RATE};
        if !(MIN_RATE..=MAX_RATE).contains(&r) {
            errs.push(format!(
                "spec.controlPlane.ratePerSecond: from {MIN_RATE} to {MAX_RATE} (got {r})"
            ));
        }
    }
    if let Some(t) = cp.timeout {
        if t.0 < Duration::from_secs(1) {
            errs.push(format!("spec.controlPlane.timeout: at least 1s (got {t})"));
        }
    }
    if let Some(q) = &cp.size {
        match quantity_bytes(&q.0) {
            None => errs.push(format!(
                "spec.controlPlane.size: `{}` is not a positive quantity such as 1Gi or 500Mi",
                q.0
            )),
            Some(b) if b < 4096.0 && cp.measures("firstIO") => errs.push(format!(
                "spec.controlPlane.size: firstIO writes 4 KiB, more than a claim of `{}` holds: give at least 4Ki",
                q.0
            )),
            Some(_) => {}
        }
    }
    let size_q = cp.size.as_ref().map_or(DEFAULT_SIZE, |q| q.0.as_str());
    let size = quantity_bytes(size_q);
    if let Some(q) = &cp.expanded_size {
        match (quantity_bytes(&q.0), size) {
            (None, _) => errs.push(format!(
                "spec.controlPlane.expandedSize: `{}` is not a positive quantity such as 2Gi",
                q.0
            )),
            (Some(e), Some(s)) if e <= s => errs.push(format!(
                "spec.controlPlane.expandedSize: `{}` must be larger than size (`{size_q}`)",
                q.0
            )),
            _ => {}
        }
    }
    for (i, t) in cp.thresholds.iter().enumerate() {
        if !cp.measures(&t.operation) {
            errs.push(format!("spec.controlPlane.thresholds[{i}]: `{}` is not in operations, so it would have no result", t.operation));
        }
    }
    errs
}

/// The bytes of a positive Kubernetes quantity (the parser pod fields use); `None` when it is
/// not one. Checked here so a bad size fails the run at once, not each claim.
pub(crate) fn quantity_bytes(q: &str) -> Option<f64> {
    crate::podfields::parse_quantity(q).filter(|b| *b > 0.0)
}

/// Longest wait for the three watches' first lists before the run fails.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Run `run`'s control-plane benchmark to its end: every lifecycle, then the sweep. With
/// `not_before` (a run with workers: their start instant) the watches list first and the
/// first lifecycle starts at that instant, plus `startAfter`.
pub async fn execute(
    client: Client,
    run: BenchmarkRun,
    image: String,
    metrics: Arc<crate::metrics::Metrics>,
    not_before: Option<Instant>,
) -> Outcome {
    let Some(cp) = run.spec.control_plane.clone() else {
        return Outcome {
            status: ControlPlaneStatus::default(),
            failure: Some("the run has no controlPlane".into()),
        };
    };
    let ns = run.namespace().unwrap_or_default();
    if cp.measures("snapshot") {
        if let Err(e) = snapshot_api(&client, &ns).await {
            return Outcome {
                status: ControlPlaneStatus::default(),
                failure: Some(e),
            };
        }
    }
    let seen = watch::Seen::new(cp.measures("snapshot"), cp.measures("attach"));
    // A JoinSet aborts what it holds when dropped: the watches end with this task, also when
    // it is aborted (the run deleted).
    let mut watches = tokio::task::JoinSet::new();
    watches.spawn(seen.clone().follow(
        client.clone(),
        ns.clone(),
        objects::selector(&run.name_any()),
    ));
    if !seen.wait_listed(Instant::now() + LIST_TIMEOUT).await {
        return Outcome {
            status: ControlPlaneStatus::default(),
            failure: Some(format!(
                "the watches of claims, pods, PersistentVolumes (and VolumeSnapshots and VolumeAttachments, when measured) did not list within {LIST_TIMEOUT:?} (RBAC: list and watch on persistentvolumes, volumesnapshots and volumeattachments?)"
            )),
        };
    }
    if let Some(t) = not_before {
        let after = cp.start_after.map(|d| d.0).unwrap_or_default();
        tokio::time::sleep_until(t + after).await;
    }
    let shared = Arc::new(lifecycle::Shared {
        client: client.clone(),
        ns,
        run: run.clone(),
        cp: cp.clone(),
        image,
        seen,
        figures: Mutex::new(Figures::feeding(
            metrics.control_plane(cp.storage_class_name.as_deref()),
        )),
        wait_for_consumer: Default::default(),
    });
    let start = Instant::now();
    let start_time = chrono::Utc::now().to_rfc3339();
    // After the first failure no lifecycle starts: a class that cannot provision fails the
    // run within one timeout, not `count / concurrency` of them.
    let arrivals = pace::drive(
        usize::try_from(cp.count).unwrap_or(0),
        pace::Pace::new(cp.rate_per_second),
        cp.concurrency(),
        |i| {
            let sh = shared.clone();
            async move { sh.lifecycle(i).await }
        },
    )
    .await;
    let elapsed = start.elapsed();
    let swept = sweep(&client, &run, cp.timeout()).await;
    let figures = shared
        .figures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut status = figures.status(&cp, elapsed);
    status.arrivals = arrivals;
    status.start_time = Some(start_time);
    Outcome {
        status,
        failure: swept.err(),
    }
}

/// Whether the cluster serves VolumeSnapshots to this operator: a missing API (no snapshot
/// CRDs) or a refusal (RBAC) fails the run at once, with what to install or grant.
async fn snapshot_api(client: &Client, ns: &str) -> Result<(), String> {
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &watch::volume_snapshots());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Err("snapshot: this cluster does not serve VolumeSnapshots (snapshot.storage.k8s.io/v1): install the external-snapshotter CRDs and snapshot controller, and a CSI driver with the csi-snapshotter sidecar".into()),
        Err(e) => Err(format!("snapshot: cannot list VolumeSnapshots in {ns}: {e}")),
    }
}

/// Delete every claim, pod and VolumeSnapshot run `run` created (this run's: its UID among
/// their owners, so an earlier run's of the same name are left to their own), each by the UID
/// listed (an object that replaced it under its name is left alone), and wait up to `bound`
/// for them to be gone. Err names what is left.
pub async fn sweep(client: &Client, run: &BenchmarkRun, bound: Duration) -> Result<(), String> {
    let Some(ns) = run.namespace() else {
        return Ok(());
    };
    let lp = ListParams::default().labels(&objects::selector(&run.name_any()));
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let snapshots =
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &watch::volume_snapshots());
    let deadline = Instant::now() + bound;
    loop {
        let mut left = vec![];
        match pods.list_metadata(&lp).await {
            Ok(l) => {
                for p in l
                    .items
                    .iter()
                    .filter(|p| owned_by(run, p.owner_references()))
                {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        ..Default::default()
                    };
                    if p.metadata.deletion_timestamp.is_none() {
                        let _ = delete_owned(&pods, p, run, dp).await;
                    }
                    left.push(format!("pod {}", p.name_any()));
                }
            }
            Err(e) => left.push(format!("pods (list: {e})")),
        }
        if run
            .spec
            .control_plane
            .as_ref()
            .is_some_and(|cp| cp.measures("snapshot"))
        {
            match snapshots.list_metadata(&lp).await {
                Ok(l) => {
                    for v in l
                        .items
                        .iter()
                        .filter(|v| owned_by(run, v.owner_references()))
                    {
                        if v.metadata.deletion_timestamp.is_none() {
                            let _ = delete_owned(&snapshots, v, run, DeleteParams::default()).await;
                        }
                        left.push(format!("VolumeSnapshot {}", v.name_any()));
                    }
                }
                // No snapshot API: nothing of that kind can be left.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => left.push(format!("VolumeSnapshots (list: {e})")),
            }
        }
        match claims.list_metadata(&lp).await {
            Ok(l) => {
                for c in l
                    .items
                    .iter()
                    .filter(|c| owned_by(run, c.owner_references()))
                {
                    if c.metadata.deletion_timestamp.is_none() {
                        let _ = delete_owned(&claims, c, run, DeleteParams::default()).await;
                    }
                    left.push(format!("claim {}", c.name_any()));
                }
            }
            Err(e) => left.push(format!("claims (list: {e})")),
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not deleted within {bound:?}: {} (owned by the run: garbage collection removes them with it)",
                left.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ControlPlaneSpec {
        serde_yaml::from_str(yaml).expect("spec")
    }

    #[test]
    fn a_good_spec_passes() {
        let s = spec("{operations: [provision, attach, firstIO, delete], count: 20, concurrency: 5, size: 16Mi, timeout: 30s, thresholds: [{operation: provision, maxP99: 10s}]}");
        assert_eq!(check(&s), Vec::<String>::new());
        assert_eq!(s.concurrency(), 5);
        assert_eq!(s.timeout(), Duration::from_secs(30));
        // Open loop: the cap defaults to every lifecycle in flight.
        let s = spec("{operations: [provision], count: 40, ratePerSecond: 2.5}");
        assert_eq!(check(&s), Vec::<String>::new());
        assert_eq!(s.concurrency(), 40);
    }

    #[test]
    fn bad_values_are_named_with_their_path() {
        let s = spec("{operations: [provision, clone, resize, provision], count: 2, concurrency: 3, ratePerSecond: 5000, size: 1Gb, timeout: 10ms, cloneSource: Snapshot, expandedSize: 2Gb, thresholds: [{operation: attach, maxP99: 1s}]}");
        let errs = check(&s).join("\n");
        for want in [
            "unknown operation `resize` (known: provision, attach, firstIO, snapshot, clone, expand, delete)",
            "cloneSource: Snapshot clones from the lifecycle's VolumeSnapshot: list snapshot in operations too",
            "expandedSize: `2Gb` is not a positive quantity",
            "listed twice",
            "concurrency (3) may not exceed count (2)",
            "ratePerSecond: from 0.01 to 1000 (got 5000)",
            "timeout: at least 1s",
            "size: `1Gb` is not a positive quantity",
            "thresholds[0]: `attach` is not in operations",
        ] {
            assert!(errs.contains(want), "{want}\nin:\n{errs}");
        }
    }

    #[test]
    fn max_late_needs_an_arrival_rate() {
        let s = spec("{operations: [provision], count: 4, maxLate: 0}");
        assert_eq!(
            check(&s),
            vec!["spec.controlPlane.maxLate limits late starts of an arrival rate: give ratePerSecond too".to_string()]
        );
        let s = spec("{operations: [provision], count: 4, ratePerSecond: 2, maxLate: 0}");
        assert_eq!(check(&s), Vec::<String>::new());
    }

    #[test]
    fn busy_needs_in_use_and_leaves_first_io_alone() {
        let s = spec("{operations: [provision, attach, firstIO, snapshot], count: 1, busy: true}");
        assert_eq!(
            check(&s),
            [
                "spec.controlPlane.busy keeps I/O running on a volume in use: set inUse too",
                "spec.controlPlane.busy: the first I/O would be timed beside the pod's own I/O; measure firstIO in a run without busy",
            ]
        );
        let s =
            spec("{operations: [provision, attach, snapshot], count: 1, inUse: true, busy: true, busyIOPS: 200}");
        assert_eq!(check(&s), Vec::<String>::new());
        let s = spec(
            "{operations: [provision, attach, snapshot], count: 1, inUse: true, busyIOPS: 200}",
        );
        assert_eq!(
            check(&s),
            ["spec.controlPlane.busyIOPS caps the I/O of busy: set busy too"]
        );
    }

    #[test]
    fn expanded_size_must_grow_the_claim() {
        let s = spec("{operations: [provision, expand], count: 1, size: 2Gi, expandedSize: 2Gi}");
        assert_eq!(
            check(&s),
            ["spec.controlPlane.expandedSize: `2Gi` must be larger than size (`2Gi`)"]
        );
        // Against the default size (1Gi) when none is given.
        let s = spec("{operations: [expand], count: 1, expandedSize: 512Mi}");
        assert_eq!(
            check(&s),
            ["spec.controlPlane.expandedSize: `512Mi` must be larger than size (`1Gi`)"]
        );
        let s = spec("{operations: [snapshot, clone, expand], count: 1, size: 16Mi, expandedSize: 32Mi, cloneSource: Snapshot}");
        assert_eq!(check(&s), Vec::<String>::new());
        assert_eq!(objects::expanded_bytes(&s), Some(32 << 20));
        // Default: twice the size.
        let s = spec("{operations: [expand], count: 1, size: 16Mi}");
        assert_eq!(objects::expanded_bytes(&s), Some(32 << 20));
        let s = spec("{operations: [expand], count: 1}");
        assert_eq!(objects::expanded_bytes(&s), Some(2 << 30));
    }

    /// `inUse` and `expandedSize` are about operations: without one of them listed, they
    /// would change nothing measured, and are refused naming the field.
    #[test]
    fn in_use_and_expanded_size_need_their_operations() {
        let s = spec("{operations: [provision, attach, delete], count: 1, inUse: true}");
        assert_eq!(
            check(&s),
            ["spec.controlPlane.inUse keeps the volume in use while it is snapshotted, cloned or expanded: list snapshot, clone or expand in operations, or leave inUse out"]
        );
        for op in ["snapshot", "clone", "expand"] {
            let s = spec(&format!(
                "{{operations: [provision, {op}], count: 1, inUse: true}}"
            ));
            assert_eq!(check(&s), Vec::<String>::new(), "{op}");
        }
        let s = spec("{operations: [provision, snapshot], count: 1, expandedSize: 4Gi}");
        assert_eq!(
            check(&s),
            ["spec.controlPlane.expandedSize is the request after expand: list expand in operations, or leave expandedSize out"]
        );
    }

    #[test]
    fn quantities() {
        for (ok, bytes) in [
            ("1Gi", 1073741824.0),
            ("500Mi", 524288000.0),
            ("1.5G", 1.5e9),
            ("1024", 1024.0),
            ("4Ki", 4096.0),
        ] {
            assert_eq!(quantity_bytes(ok), Some(bytes), "{ok}");
        }
        for bad in ["", "0", "Gi", "1GB", "-1Gi", "1 Gi"] {
            assert_eq!(quantity_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn first_io_needs_room_for_its_4_kib_in_either_volume_mode() {
        for mode in ["Filesystem", "Block"] {
            let s = spec(&format!(
                "{{operations: [provision, firstIO], count: 1, size: 2Ki, volumeMode: {mode}}}"
            ));
            let errs = check(&s).join("\n");
            assert!(
                errs.contains("firstIO writes 4 KiB, more than a claim of `2Ki` holds"),
                "{mode}: {errs}"
            );
            // Without firstIO nothing is written: a tiny claim is the provisioner's business.
            let s = spec(&format!(
                "{{operations: [provision], count: 1, size: 2Ki, volumeMode: {mode}}}"
            ));
            assert_eq!(check(&s), Vec::<String>::new(), "{mode}");
        }
        let s = spec("{operations: [firstIO], count: 1, size: 4Ki, volumeMode: Block}");
        assert_eq!(check(&s), Vec::<String>::new());
        // An unknown mode is not a spec at all (the schema's enum refuses it too).
        assert!(serde_yaml::from_str::<ControlPlaneSpec>(
            "{operations: [firstIO], count: 1, volumeMode: block}"
        )
        .is_err());
    }
}
