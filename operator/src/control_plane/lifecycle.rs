//! One claim's lifecycle: created -> Bound (provision), its pod created -> the container
//! running (attach; with a driver that attaches, its VolumeAttachment's phases), the probe's
//! 4 KiB O_DIRECT write and read (firstIO), the pod deleted (with `inUse`: after the next
//! three; with `busy`, its I/O report read from its last state), a VolumeSnapshot of the claim -> readyToUse (snapshot), a claim cloned from it ->
//! Bound (clone), its request raised -> the new capacity (expand), claim deleted -> the
//! PersistentVolume gone (delete). Each wait ends on a watch event ([`Seen`]) or at the
//! operation's timeout; a timeout is reported with the last Event Kubernetes recorded on the
//! object (the provisioner's, snapshotter's or resizer's message).
//!
//! A lifecycle deletes only what it created, by the UID the create's answer carried (through
//! `children`, the operator's one deletion path): a name already taken (a user's pod
//! `<run>-cp-0`, an earlier run's claim still terminating) fails the lifecycle naming the
//! object's owner, and that object is left as it is.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::figures::Figures;
use super::objects;
use super::watch::{volume_snapshots, Attachment, Marks, Seen};
use crate::children::{delete_owned, owned_by, whose, Deleted};
use crate::crd::control_plane::ControlPlaneSpec;
use crate::crd::BenchmarkRun;

/// What every lifecycle of a run shares.
pub(crate) struct Shared {
    pub client: Client,
    pub ns: String,
    pub run: BenchmarkRun,
    pub cp: ControlPlaneSpec,
    pub image: String,
    pub seen: Seen,
    pub figures: Mutex<Figures>,
    /// Whether the claims' class binds on first consumer (read once, from the class the
    /// first claim was given: the default class is filled in by the API server's admission).
    pub wait_for_consumer: OnceCell<bool>,
}

/// Why a lifecycle stopped.
#[derive(Debug)]
pub(crate) struct Failure {
    pub op: &'static str,
    pub kind: &'static str,
    pub message: String,
}

fn fail(op: &'static str, kind: &'static str, message: impl Into<String>) -> Failure {
    Failure {
        op,
        kind,
        message: message.into(),
    }
}

fn api_failure<'a>(op: &'static str, what: &'a str) -> impl Fn(kube::Error) -> Failure + 'a {
    move |e| fail(op, "api", format!("{what}: {e}"))
}

/// What one lifecycle created, each as its create's answer returned it (with its UID): all
/// that it may delete.
#[derive(Default)]
struct Made {
    claim: Option<PersistentVolumeClaim>,
    pod: Option<Pod>,
    snapshot: Option<DynamicObject>,
    clone: Option<PersistentVolumeClaim>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Figures> {
        self.figures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lifecycle `i`, start to end: whether it ran without an error. What it created is
    /// deleted whatever happened (not waited for on failure: the run's sweep does).
    pub(crate) async fn lifecycle(&self, i: usize) -> bool {
        let name = objects::name(&self.run.name_any(), i);
        self.seen.expect(&name);
        let mut made = Made::default();
        let result = self.steps(i, &name, &mut made).await;
        let ok = result.is_ok();
        if let Err(f) = result {
            tracing::info!("{}/{name}: {} {}: {}", self.ns, f.op, f.kind, f.message);
            self.lock().error(f.op, f.kind, f.message);
            self.delete_made(&made).await;
        }
        self.lock().lifecycle_done(ok);
        ok
    }

    /// After a failure: delete what the lifecycle created, pod first (a claim in use waits
    /// for it), without waiting (the run's sweep waits). An object of one of its names that
    /// it did not create is not in `made`, so it is never touched.
    async fn delete_made(&self, made: &Made) {
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.ns);
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let at_once = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        let mut results = vec![];
        if let Some(p) = &made.pod {
            results.push(self.delete_created(&pods, p, at_once, "pod").await);
        }
        if let Some(c) = &made.clone {
            results.push(
                self.delete_created(&claims, c, DeleteParams::default(), "clone claim")
                    .await,
            );
        }
        if let Some(v) = &made.snapshot {
            let dp = DeleteParams::default();
            results.push(
                self.delete_created(&self.snapshots(), v, dp, "VolumeSnapshot")
                    .await,
            );
        }
        if let Some(c) = &made.claim {
            results.push(
                self.delete_created(&claims, c, DeleteParams::default(), "claim")
                    .await,
            );
        }
        for f in results.into_iter().filter_map(Result::err) {
            tracing::info!("{}: after the failure: {}", self.ns, f.message);
        }
    }

    /// Create `obj` (a `what`: claim, pod...) for operation `op`: the API server's answer,
    /// whose UID the lifecycle deletes it by. A name taken fails the lifecycle naming the
    /// object's owner.
    async fn create<K>(
        &self,
        api: &Api<K>,
        obj: &K,
        op: &'static str,
        what: &str,
    ) -> Result<K, Failure>
    where
        K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match api.create(&PostParams::default(), obj).await {
            Ok(created) => Ok(created),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                Err(self.name_taken(api, op, what, &obj.name_any()).await)
            }
            Err(e) => Err(fail(op, "api", format!("creating the {what}: {e}"))),
        }
    }

    /// The failure of a create whose name is taken, naming whose the object is. Read by a
    /// list of that one name: the verb the operator holds on all three kinds.
    async fn name_taken<K>(&self, api: &Api<K>, op: &'static str, what: &str, name: &str) -> Failure
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let lp = ListParams::default().fields(&format!("metadata.name={name}"));
        let owner = match api
            .list_metadata(&lp)
            .await
            .map(|l| l.items.into_iter().next())
        {
            // Made by a create of this run whose answer was lost: the sweep deletes it.
            Ok(Some(o)) if owned_by(&self.run, o.owner_references()) => {
                "it is this run's, from a create whose answer was lost".to_string()
            }
            Ok(Some(o)) => whose(&self.run, o.owner_references()),
            Ok(None) => "it was deleted since".to_string(),
            Err(e) => format!("its owner could not be read: {e}"),
        };
        fail(
            op,
            "nameTaken",
            format!("{what} {name} exists and is not this lifecycle's ({owner}): left alone; delete or rename it, or give the run another name"),
        )
    }

    /// Delete `obj`, which this lifecycle created (as its create answered): by its UID,
    /// through the operator's one deletion path. One replaced under its name since is left
    /// alone, and the lifecycle fails saying so.
    async fn delete_created<K>(
        &self,
        api: &Api<K>,
        obj: &K,
        dp: DeleteParams,
        what: &str,
    ) -> Result<(), Failure>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        match delete_owned(api, obj, &self.run, dp).await {
            Ok(Deleted::Yes | Deleted::Absent) => Ok(()),
            Ok(Deleted::NotOurs) => Err(fail(
                "delete",
                "nameTaken",
                format!(
                    "{what} {} was replaced under its name by another object: left alone",
                    obj.name_any()
                ),
            )),
            Err(e) => Err(fail("delete", "api", format!("deleting the {what}: {e}"))),
        }
    }

    async fn steps(&self, i: usize, name: &str, made: &mut Made) -> Result<(), Failure> {
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.ns);
        let timeout = self.cp.timeout();
        let claim = objects::claim(&self.run, &self.cp, i)
            .map_err(|e| fail("provision", "invalid", e.to_string()))?;
        // provision: the create request -> the claim Bound.
        let t0 = Instant::now();
        let created = self.create(&claims, &claim, "provision", "claim").await?;
        made.claim = Some(created.clone());
        let wffc = self.binds_on_consumer(&created).await;
        let need_pod =
            wffc || self.cp.in_use || self.cp.measures("attach") || self.cp.measures("firstIO");
        // The pod right after its claim, as a StatefulSet's: with WaitForFirstConsumer
        // binding, provisioning waits for it to be scheduled.
        let tp = if need_pod {
            let pod = objects::pod(&self.run, &self.image, i)
                .map_err(|e| fail("attach", "invalid", e.to_string()))?;
            let tp = Instant::now();
            made.pod = Some(self.create(&pods, &pod, "attach", "pod").await?);
            Some(tp)
        } else {
            None
        };
        let m = match self
            .seen
            .wait(name, t0 + timeout, |m| m.bound.is_some())
            .await
        {
            Some(m) => m,
            None => {
                return Err(self
                    .timed_out("provision", "PersistentVolumeClaim", name, timeout)
                    .await)
            }
        };
        let bound = m.bound.unwrap_or(t0);
        let mut phases = vec![("bound", bound - t0)];
        if let Some(pv) = m.pv_created {
            phases.push(("pvCreated", pv.saturating_duration_since(t0)));
        }
        if let Some(s) = m.scheduled.filter(|_| wffc) {
            phases.push(("scheduled", s.saturating_duration_since(t0)));
        }
        self.lock().ok("provision", bound - t0, &phases);

        if let Some(tp) = tp {
            // attach: from the later of the pod's create request and the claim's Bound (the
            // kubelet cannot mount before) -> the container running.
            let from = tp.max(bound);
            let m = match self
                .seen
                .wait(name, from + timeout, |m| m.running.is_some())
                .await
            {
                Some(m) => m,
                None => return Err(self.attach_timed_out(name, timeout).await),
            };
            let running = m.running.unwrap_or(from);
            let mut phases = vec![];
            if let Some(s) = m.scheduled.filter(|_| !wffc) {
                phases.push(("scheduled", s.saturating_duration_since(tp)));
            }
            // A driver that attaches: its VolumeAttachment created, then attached.
            if let Some(a) = self.attachment(&m) {
                phases.push(("vaCreated", a.requested.saturating_duration_since(from)));
                if let Some(t) = a.attached {
                    phases.push(("attached", t.saturating_duration_since(from)));
                }
            }
            self.lock()
                .ok("attach", running.saturating_duration_since(from), &phases);
            if self.cp.measures("firstIO") {
                let io = self.first_io(name, running + timeout).await?;
                // The claim's create request to the first I/O done: the pod running (as
                // watched) plus the probe's own I/O time.
                self.lock()
                    .to_first_io(running.saturating_duration_since(t0) + io);
            }
        }
        // Without `inUse` the pod goes before the snapshot, clone and expand (offline).
        if let (Some(pod), false) = (&made.pod, self.cp.in_use) {
            self.delete_pod(pod, timeout).await?;
        }
        if self.cp.measures("snapshot") {
            self.snapshot(i, name, timeout, &mut made.snapshot).await?;
        }
        if self.cp.measures("clone") {
            self.clone_claim(i, wffc, timeout, &mut made.clone).await?;
        }
        if self.cp.measures("expand") {
            self.expand(name, timeout).await?;
        }
        if let (Some(pod), true) = (&made.pod, self.cp.in_use) {
            // The pod still holds the volume now, so it did through all three (a pod never
            // comes back): else they were not measured in use, and the run must not say so.
            let m = self.seen.get(name);
            if m.pod_gone.is_some() || m.hold_ended {
                let op = ["expand", "clone", "snapshot"]
                    .into_iter()
                    .find(|o| self.cp.measures(o))
                    .unwrap_or("attach");
                return Err(fail(
                    op,
                    "notInUse",
                    format!("inUse: pod {name} stopped holding the volume before the snapshot, clone and expand ended (deleted or evicted, or its hold container exited)"),
                ));
            }
            // The pod goes before the claim: its protection finalizer holds it while in use.
            self.delete_pod(pod, timeout).await?;
            if self.cp.busy {
                // Its last state, in the delete event, holds the hold's I/O report.
                let report = self.seen.get(name).hold_message;
                self.lock().busy(report.as_deref());
            }
        }
        // The clone and the snapshot go before the claim, so that its delete is timed alone.
        if let Some(clone) = &made.clone {
            self.delete_clone(clone, timeout).await?;
        }
        if let Some(snapshot) = &made.snapshot {
            self.delete_snapshot(snapshot, timeout).await?;
        }
        // delete: the claim's delete request -> its PersistentVolume gone.
        let td = Instant::now();
        self.delete_created(&claims, &created, DeleteParams::default(), "claim")
            .await?;
        let Some(m) = self
            .seen
            .wait(name, td + timeout, |m| m.claim_gone.is_some())
            .await
        else {
            return Err(self
                .timed_out("delete", "PersistentVolumeClaim", name, timeout)
                .await);
        };
        let claim_gone = m.claim_gone.unwrap_or(td) - td;
        if !self.cp.measures("delete") {
            return Ok(());
        }
        let mut end = claim_gone;
        let mut phases = vec![("claimGone", claim_gone)];
        if m.pv_name.is_some() {
            let Some(m) = self
                .seen
                .wait(name, td + timeout, |m| m.pv_gone.is_some())
                .await
            else {
                let pv = m.pv_name.unwrap_or_default();
                return Err(fail(
                    "delete",
                    "timeout",
                    format!("PersistentVolume {pv} still there {timeout:?} after its claim's deletion (reclaimPolicy Retain?)"),
                ));
            };
            end = m.pv_gone.unwrap_or(td) - td;
            phases.push(("pvGone", end));
            // The volume detached after the delete request: a driver's DeleteVolume waits for
            // it (a detach finished before the request is no part of this figure).
            if let Some(gone) = self.attachment(&m).and_then(|a| a.gone).filter(|g| *g > td) {
                phases.push(("detached", gone - td));
            }
        }
        self.lock().ok("delete", end, &phases);
        Ok(())
    }

    /// The VolumeAttachment of the lifecycle's PersistentVolume, when attachments are watched
    /// and one was seen.
    fn attachment(&self, m: &Marks) -> Option<Attachment> {
        self.seen.attachment(m.pv_name.as_deref()?)
    }

    /// The pod not running within the timeout: the pod's last Event, and the attach error
    /// its VolumeAttachment reports, if any (then the error's kind is `attachFailed`).
    async fn attach_timed_out(&self, name: &str, timeout: Duration) -> Failure {
        let error = self.attachment(&self.seen.get(name)).and_then(|a| a.error);
        let mut f = self.timed_out("attach", "Pod", name, timeout).await;
        if let Some(e) = error {
            f.kind = "attachFailed";
            f.message = format!("{}; its VolumeAttachment's attachError: {e}", f.message);
        }
        f
    }

    /// Delete the lifecycle's pod and wait for it to be gone: at once (grace 0), or with
    /// `busy` gracefully, so that its hold stops its I/O and reports it.
    async fn delete_pod(&self, pod: &Pod, timeout: Duration) -> Result<(), Failure> {
        let grace = if self.cp.busy {
            objects::BUSY_GRACE_SECONDS
        } else {
            0
        };
        let dp = DeleteParams {
            grace_period_seconds: Some(grace as u32),
            ..Default::default()
        };
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.ns);
        self.delete_created(&pods, pod, dp, "pod").await?;
        let name = pod.name_any();
        if self
            .seen
            .wait(&name, Instant::now() + timeout, |m| m.pod_gone.is_some())
            .await
            .is_none()
        {
            return Err(fail(
                "delete",
                "timeout",
                format!("pod {name} still there after {timeout:?}"),
            ));
        }
        Ok(())
    }

    fn snapshots(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, &volume_snapshots())
    }

    /// snapshot: the VolumeSnapshot's create request -> `readyToUse` (phase `bound`: its
    /// content bound). An error the snapshot controller reports is waited past (it retries);
    /// the last one is named if the snapshot is not ready within the timeout.
    async fn snapshot(
        &self,
        i: usize,
        name: &str,
        timeout: Duration,
        made: &mut Option<DynamicObject>,
    ) -> Result<(), Failure> {
        let obj = objects::snapshot(&self.run, &self.cp, i)
            .map_err(|e| fail("snapshot", "invalid", e.to_string()))?;
        let t0 = Instant::now();
        let snapshots = self.snapshots();
        *made = Some(
            self.create(&snapshots, &obj, "snapshot", "VolumeSnapshot")
                .await?,
        );
        let Some(m) = self
            .seen
            .wait(name, t0 + timeout, |m| m.snapshot_ready.is_some())
            .await
        else {
            let error = self.seen.get(name).snapshot_error;
            let mut f = self
                .timed_out("snapshot", "VolumeSnapshot", name, timeout)
                .await;
            if let Some(e) = error {
                f.kind = "snapshotFailed";
                f.message = format!("{}; its status.error: {e}", f.message);
            }
            return Err(f);
        };
        let ready = m.snapshot_ready.unwrap_or(t0).saturating_duration_since(t0);
        let mut phases = vec![];
        if let Some(b) = m.snapshot_bound {
            phases.push(("bound", b.saturating_duration_since(t0)));
        }
        self.lock().ok("snapshot", ready, &phases);
        Ok(())
    }

    /// clone: the clone claim's create request -> Bound (phase `pvCreated`).
    async fn clone_claim(
        &self,
        i: usize,
        wffc: bool,
        timeout: Duration,
        made: &mut Option<PersistentVolumeClaim>,
    ) -> Result<(), Failure> {
        if wffc {
            // Bound only once a pod uses it: the figure would be the pod's, not the clone's.
            return Err(fail(
                "clone",
                "invalid",
                "the claims' StorageClass binds on first consumer (WaitForFirstConsumer): a clone would wait for a pod; clone needs a class with volumeBindingMode Immediate",
            ));
        }
        let claim = objects::clone_claim(&self.run, &self.cp, i)
            .map_err(|e| fail("clone", "invalid", e.to_string()))?;
        let clone = claim.name_any();
        self.seen.expect(&clone);
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let t0 = Instant::now();
        *made = Some(self.create(&claims, &claim, "clone", "clone claim").await?);
        let Some(m) = self
            .seen
            .wait(&clone, t0 + timeout, |m| m.bound.is_some())
            .await
        else {
            return Err(self
                .timed_out("clone", "PersistentVolumeClaim", &clone, timeout)
                .await);
        };
        let bound = m.bound.unwrap_or(t0).saturating_duration_since(t0);
        let mut phases = vec![("bound", bound)];
        if let Some(pv) = m.pv_created {
            phases.push(("pvCreated", pv.saturating_duration_since(t0)));
        }
        self.lock().ok("clone", bound, &phases);
        Ok(())
    }

    /// expand: the request raised to the expanded size -> the claim's `status.capacity` at
    /// least that (phase `pvResized`: the PersistentVolume's capacity at least that).
    async fn expand(&self, name: &str, timeout: Duration) -> Result<(), Failure> {
        let Some(want) = objects::expanded_bytes(&self.cp) else {
            return Err(fail(
                "expand",
                "invalid",
                "expandedSize (or twice size) is not a quantity",
            ));
        };
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let patch = serde_json::json!({
            "spec": {"resources": {"requests": {"storage": want.to_string()}}}
        });
        let t0 = Instant::now();
        claims
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_failure("expand", "raising the claim's request"))?;
        let reached = |c: Option<(f64, Instant)>| c.filter(|(b, _)| *b >= want as f64);
        let Some(m) = self
            .seen
            .wait(name, t0 + timeout, |m| reached(m.capacity).is_some())
            .await
        else {
            return Err(self
                .timed_out("expand", "PersistentVolumeClaim", name, timeout)
                .await);
        };
        let at = reached(m.capacity).map_or(t0, |(_, t)| t);
        let mut phases = vec![];
        if let Some((_, pv)) = reached(m.pv_capacity) {
            phases.push(("pvResized", pv.saturating_duration_since(t0)));
        }
        self.lock()
            .ok("expand", at.saturating_duration_since(t0), &phases);
        Ok(())
    }

    /// Delete the clone claim and wait for it and its PersistentVolume to be gone.
    async fn delete_clone(
        &self,
        made: &PersistentVolumeClaim,
        timeout: Duration,
    ) -> Result<(), Failure> {
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        self.delete_created(&claims, made, DeleteParams::default(), "clone claim")
            .await?;
        let clone = made.name_any();
        let gone =
            |m: &Marks| m.claim_gone.is_some() && (m.pv_name.is_none() || m.pv_gone.is_some());
        if self
            .seen
            .wait(&clone, Instant::now() + timeout, gone)
            .await
            .is_none()
        {
            return Err(fail(
                "delete",
                "timeout",
                format!(
                    "clone claim {clone} or its PersistentVolume still there after {timeout:?}"
                ),
            ));
        }
        Ok(())
    }

    /// Delete the VolumeSnapshot and wait for it to be gone (its content and the driver's
    /// snapshot go with it under the class's `deletionPolicy: Delete`).
    async fn delete_snapshot(
        &self,
        made: &DynamicObject,
        timeout: Duration,
    ) -> Result<(), Failure> {
        let dp = DeleteParams::default();
        self.delete_created(&self.snapshots(), made, dp, "VolumeSnapshot")
            .await?;
        let name = made.name_any();
        if self
            .seen
            .wait(&name, Instant::now() + timeout, |m| {
                m.snapshot_gone.is_some()
            })
            .await
            .is_none()
        {
            return Err(fail(
                "delete",
                "timeout",
                format!("VolumeSnapshot {name} still there after {timeout:?}"),
            ));
        }
        Ok(())
    }

    /// firstIO: the probe's own times, from its termination message; their sum.
    async fn first_io(&self, name: &str, deadline: Instant) -> Result<Duration, Failure> {
        let Some(m) = self
            .seen
            .wait(name, deadline, |m: &Marks| m.terminated.is_some())
            .await
        else {
            return Err(fail(
                "firstIO",
                "timeout",
                format!("pod {name}: the probe did not finish"),
            ));
        };
        let (code, message) = m.terminated.unwrap_or_default();
        if code != 0 {
            return Err(fail(
                "firstIO",
                "podFailed",
                format!("pod {name} exited {code}: {}", short(&message)),
            ));
        }
        let Some(r) = objects::probe_report(&message) else {
            return Err(fail(
                "firstIO",
                "badReport",
                format!("pod {name}: no report in {:?}", short(&message)),
            ));
        };
        let (w, rd) = (
            Duration::from_micros(r.write_us),
            Duration::from_micros(r.read_us),
        );
        self.lock()
            .ok("firstIO", w + rd, &[("write", w), ("read", rd)]);
        Ok(w + rd)
    }

    /// Whether the claim's class binds on first consumer (then a pod is needed to provision).
    /// A class that cannot be read counts as immediate: the claim then waits, and times out
    /// with the PV controller's Event (a missing class is named there).
    async fn binds_on_consumer(&self, claim: &PersistentVolumeClaim) -> bool {
        let class = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone());
        *self
            .wait_for_consumer
            .get_or_init(|| async {
                let Some(class) = class else { return false };
                Api::<StorageClass>::all(self.client.clone())
                    .get_opt(&class)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|c| c.volume_binding_mode)
                    .is_some_and(|m| m == "WaitForFirstConsumer")
            })
            .await
    }

    /// A wait past its timeout, with the last Event of the object (`kind` `name`): a
    /// `ProvisioningFailed` makes it that kind of error.
    async fn timed_out(
        &self,
        op: &'static str,
        kind: &str,
        name: &str,
        timeout: Duration,
    ) -> Failure {
        let events = Api::<Event>::namespaced(self.client.clone(), &self.ns);
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind={kind},involvedObject.name={name}"
        ));
        let mut items = events.list(&lp).await.map(|l| l.items).unwrap_or_default();
        items.sort_by_key(|e| {
            e.last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or(e.event_time.as_ref().map(|t| t.0))
        });
        let failed = items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ProvisioningFailed"));
        // A Warning says more than the Normal "waiting for ..." that follows it.
        let last = items
            .iter()
            .rev()
            .find(|e| e.type_.as_deref() == Some("Warning"))
            .or(items.last());
        let said = last.map_or("no Event recorded".into(), |e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("").trim()
            )
        });
        let kind_ = if failed {
            "provisioningFailed"
        } else {
            "timeout"
        };
        fail(
            op,
            kind_,
            format!("{kind} {name} not ready after {timeout:?}; last Event: {said}"),
        )
    }
}

/// A container's message cut to a status-sized line.
fn short(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;
    use serde_json::json;

    const PODS: &str = "/api/v1/namespaces/ns/pods";
    const CLAIMS: &str = "/api/v1/namespaces/ns/persistentvolumeclaims";

    /// Run `pg`'s lifecycles (provision, attach) against `fake`.
    fn shared(fake: &FakeApi) -> Shared {
        let run: BenchmarkRun = serde_json::from_value(json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "pg", "namespace": "ns", "uid": "run-uid"},
            "spec": {"controlPlane": {"operations": ["provision", "attach"], "count": 2}}
        }))
        .expect("run");
        let cp = run.spec.control_plane.clone().expect("controlPlane");
        Shared {
            client: fake.client(),
            ns: "ns".into(),
            run,
            cp,
            image: "probe".into(),
            seen: Seen::new(false, false),
            figures: Mutex::default(),
            wait_for_consumer: OnceCell::default(),
        }
    }

    /// A user's object: a StatefulSet's pod, or a claim of no owner.
    fn users(kind: &str, name: &str, owners: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}})
    }

    fn first_error(sh: &Shared) -> String {
        let st = sh.lock().status(&sh.cp, Duration::from_secs(1));
        st.first_error.unwrap_or_default()
    }

    #[tokio::test]
    async fn a_name_taken_fails_the_lifecycle_and_the_users_objects_are_left_alone() {
        let fake = FakeApi::default();
        let sts = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "pg-cp",
                          "uid": "sts-uid", "controller": true}]);
        let pod_uid = fake.seed(PODS, users("Pod", "pg-cp-0", sts));
        let claim_uid = fake.seed(CLAIMS, users("PersistentVolumeClaim", "pg-cp-1", json!([])));
        let sh = shared(&fake);

        // Lifecycle 0: its claim is created, its pod's name is the user's.
        assert!(!sh.lifecycle(0).await, "a name taken is a failure");
        let pod = fake
            .object(&format!("{PODS}/pg-cp-0"))
            .expect("the user's pod");
        assert_eq!(pod["metadata"]["uid"], pod_uid.as_str());
        let err = first_error(&sh);
        for want in [
            "nameTaken",
            "pod pg-cp-0",
            "owned by StatefulSet pg-cp",
            "left alone",
        ] {
            assert!(err.contains(want), "{want} in {err}");
        }
        // What it created, its claim, is deleted: by the UID the create answered with.
        let deletes = fake.deletes();
        assert_eq!(deletes.len(), 1, "{deletes:?}");
        assert_eq!(deletes[0].path, format!("{CLAIMS}/pg-cp-0"));
        assert!(
            deletes[0].body["preconditions"]["uid"].is_string(),
            "{deletes:?}"
        );
        assert!(fake.object(&format!("{CLAIMS}/pg-cp-0")).is_none());

        // Lifecycle 1: its claim's name is the user's; nothing was created, nothing deleted.
        let sh = shared(&fake);
        assert!(!sh.lifecycle(1).await);
        let err = first_error(&sh);
        for want in ["provision nameTaken", "claim pg-cp-1", "it has no owner"] {
            assert!(err.contains(want), "{want} in {err}");
        }
        let claim = fake
            .object(&format!("{CLAIMS}/pg-cp-1"))
            .expect("the user's claim");
        assert_eq!(claim["metadata"]["uid"], claim_uid.as_str());
        assert_eq!(fake.deletes().len(), 1, "{:?}", fake.deletes());
    }
}
