//! One claim's lifecycle: created -> Bound (provision), its pod created -> the container
//! running (attach; with a driver that attaches, its VolumeAttachment's phases), the probe's
//! 4 KiB O_DIRECT write and read (firstIO), the pod deleted (with `inUse`: after the next
//! three; with `busy`, its I/O report read from its last state), a VolumeSnapshot of the claim -> readyToUse (snapshot), a claim cloned from it ->
//! Bound (clone), its request raised -> the new capacity (expand), claim deleted -> the
//! PersistentVolume gone (delete). Each wait ends on a watch event ([`Seen`]) or at the
//! operation's timeout; a timeout is reported with the last Event Kubernetes recorded on the
//! object (the provisioner's, snapshotter's or resizer's message).

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::figures::Figures;
use super::objects;
use super::watch::{volume_snapshots, Attachment, Marks, Seen};
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

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Figures> {
        self.figures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lifecycle `i`, start to end: whether it ran without an error. What it created is
    /// deleted whatever happened (not waited for on failure: the run's sweep does).
    pub(crate) async fn lifecycle(&self, i: usize) -> bool {
        let name = objects::name(&self.run.name_any(), i);
        self.seen.expect(&name);
        let result = self.steps(i, &name).await;
        let ok = result.is_ok();
        if let Err(f) = result {
            tracing::info!("{}/{name}: {} {}: {}", self.ns, f.op, f.kind, f.message);
            self.lock().error(f.op, f.kind, f.message);
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            };
            let _ = Api::<Pod>::namespaced(self.client.clone(), &self.ns)
                .delete(&name, &dp)
                .await;
            let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
            let clone = objects::clone_name(&self.run.name_any(), i);
            for c in [&name, &clone] {
                let _ = claims.delete(c, &DeleteParams::default()).await;
            }
            if self.cp.measures("snapshot") {
                let _ = self
                    .snapshots()
                    .delete(&name, &DeleteParams::default())
                    .await;
            }
        }
        self.lock().lifecycle_done(ok);
        ok
    }

    async fn steps(&self, i: usize, name: &str) -> Result<(), Failure> {
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let pods = Api::<Pod>::namespaced(self.client.clone(), &self.ns);
        let timeout = self.cp.timeout();
        let claim = objects::claim(&self.run, &self.cp, i)
            .map_err(|e| fail("provision", "invalid", e.to_string()))?;
        // provision: the create request -> the claim Bound.
        let t0 = Instant::now();
        let created = claims
            .create(&PostParams::default(), &claim)
            .await
            .map_err(api_failure("provision", "creating the claim"))?;
        let wffc = self.binds_on_consumer(&created).await;
        let need_pod =
            wffc || self.cp.in_use || self.cp.measures("attach") || self.cp.measures("firstIO");
        // The pod right after its claim, as a StatefulSet's: with WaitForFirstConsumer
        // binding, provisioning waits for it to be scheduled.
        let tp = if need_pod {
            let pod = objects::pod(&self.run, &self.image, i)
                .map_err(|e| fail("attach", "invalid", e.to_string()))?;
            let tp = Instant::now();
            pods.create(&PostParams::default(), &pod)
                .await
                .map_err(api_failure("attach", "creating the pod"))?;
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
        if tp.is_some() && !self.cp.in_use {
            self.delete_pod(name, timeout).await?;
        }
        if self.cp.measures("snapshot") {
            self.snapshot(i, name, timeout).await?;
        }
        let clone = objects::clone_name(&self.run.name_any(), i);
        if self.cp.measures("clone") {
            self.clone_claim(i, &clone, wffc, timeout).await?;
        }
        if self.cp.measures("expand") {
            self.expand(name, timeout).await?;
        }
        if tp.is_some() && self.cp.in_use {
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
            self.delete_pod(name, timeout).await?;
            if self.cp.busy {
                // Its last state, in the delete event, holds the hold's I/O report.
                let report = self.seen.get(name).hold_message;
                self.lock().busy(report.as_deref());
            }
        }
        // The clone and the snapshot go before the claim, so that its delete is timed alone.
        if self.cp.measures("clone") {
            self.delete_clone(&clone, timeout).await?;
        }
        if self.cp.measures("snapshot") {
            self.delete_snapshot(name, timeout).await?;
        }
        // delete: the claim's delete request -> its PersistentVolume gone.
        let td = Instant::now();
        claims
            .delete(name, &DeleteParams::default())
            .await
            .map_err(api_failure("delete", "deleting the claim"))?;
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
    async fn delete_pod(&self, name: &str, timeout: Duration) -> Result<(), Failure> {
        let grace = if self.cp.busy {
            objects::BUSY_GRACE_SECONDS
        } else {
            0
        };
        let dp = DeleteParams {
            grace_period_seconds: Some(grace as u32),
            ..Default::default()
        };
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .delete(name, &dp)
            .await
            .map_err(api_failure("delete", "deleting the pod"))?;
        if self
            .seen
            .wait(name, Instant::now() + timeout, |m| m.pod_gone.is_some())
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
    async fn snapshot(&self, i: usize, name: &str, timeout: Duration) -> Result<(), Failure> {
        let obj = objects::snapshot(&self.run, &self.cp, i)
            .map_err(|e| fail("snapshot", "invalid", e.to_string()))?;
        let t0 = Instant::now();
        self.snapshots()
            .create(&PostParams::default(), &obj)
            .await
            .map_err(api_failure("snapshot", "creating the VolumeSnapshot"))?;
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
        clone: &str,
        wffc: bool,
        timeout: Duration,
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
        self.seen.expect(clone);
        let claims = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns);
        let t0 = Instant::now();
        claims
            .create(&PostParams::default(), &claim)
            .await
            .map_err(api_failure("clone", "creating the clone claim"))?;
        let Some(m) = self
            .seen
            .wait(clone, t0 + timeout, |m| m.bound.is_some())
            .await
        else {
            return Err(self
                .timed_out("clone", "PersistentVolumeClaim", clone, timeout)
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
    async fn delete_clone(&self, clone: &str, timeout: Duration) -> Result<(), Failure> {
        Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &self.ns)
            .delete(clone, &DeleteParams::default())
            .await
            .map_err(api_failure("delete", "deleting the clone claim"))?;
        let gone =
            |m: &Marks| m.claim_gone.is_some() && (m.pv_name.is_none() || m.pv_gone.is_some());
        if self
            .seen
            .wait(clone, Instant::now() + timeout, gone)
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
    async fn delete_snapshot(&self, name: &str, timeout: Duration) -> Result<(), Failure> {
        self.snapshots()
            .delete(name, &DeleteParams::default())
            .await
            .map_err(api_failure("delete", "deleting the VolumeSnapshot"))?;
        if self
            .seen
            .wait(name, Instant::now() + timeout, |m| {
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
