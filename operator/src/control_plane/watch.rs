//! What the watches saw: the instant each claim, pod and PersistentVolume of a control-plane
//! run reached each state, taken when the watch event arrived at the operator (so a latency
//! is the API request to the operator's sight of the new state: the event's delivery, a few
//! milliseconds on a healthy API server, is part of it; no poll interval is).
//!
//! One watch per kind per run: the run's claims, pods and (when `snapshot` is measured)
//! VolumeSnapshots by label, every PersistentVolume (provisioned volumes carry no label of
//! ours; they are matched by their `claimRef`) and (when `attach` is measured) every
//! VolumeAttachment (made by the attach/detach controller, matched by their volume's name).
//! Lifecycles wait on [`Seen::wait`] and read their claim's entry (a lifecycle's claim, pod and
//! snapshot share one name, so one entry; its clone has a name and an entry of its own).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use tokio::time::Instant;

/// The VolumeSnapshot API (external-snapshotter's CRD; not in k8s-openapi).
pub fn volume_snapshots() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshot"),
        "volumesnapshots",
    )
}

/// The states one lifecycle's objects reached, each when first seen.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    /// The claim's UID, once seen.
    pub claim_uid: Option<String>,
    /// A PersistentVolume naming the claim in its `claimRef`.
    pub pv_created: Option<Instant>,
    /// Its name.
    pub pv_name: Option<String>,
    /// The claim `Bound`.
    pub bound: Option<Instant>,
    /// The claim deleted (its delete event).
    pub claim_gone: Option<Instant>,
    /// The PersistentVolume deleted.
    pub pv_gone: Option<Instant>,
    /// The claim's node chosen: with `WaitForFirstConsumer` binding, the scheduler's
    /// `volume.kubernetes.io/selected-node` annotation on the claim (provisioning starts
    /// then; the pod is only `PodScheduled` once its claim is bound); otherwise the pod's
    /// `PodScheduled` condition True.
    pub scheduled: Option<Instant>,
    /// The pod's container running (or already terminated, when the watch skipped running).
    pub running: Option<Instant>,
    /// The container terminated: its exit code and termination message.
    pub terminated: Option<(i32, String)>,
    /// The pod deleted.
    pub pod_gone: Option<Instant>,
    /// With `inUse`: the container holding the volume ended (the volume is then unmounted).
    pub hold_ended: bool,
    /// With `busy`: the hold container's termination message (its I/O report), once it ended.
    pub hold_message: Option<String>,
    /// The claim's `status.capacity.storage` in bytes, and when it was first seen at that
    /// value (capacity only grows, so the first sight of a value at least the expanded size
    /// is when the expansion ended).
    pub capacity: Option<(f64, Instant)>,
    /// The PersistentVolume's `spec.capacity.storage` in bytes, and when first seen so.
    pub pv_capacity: Option<(f64, Instant)>,
    /// The VolumeSnapshot bound to its content (`status.boundVolumeSnapshotContentName`).
    pub snapshot_bound: Option<Instant>,
    /// The VolumeSnapshot `readyToUse`.
    pub snapshot_ready: Option<Instant>,
    /// The VolumeSnapshot's `status.error.message`, the latest.
    pub snapshot_error: Option<String>,
    /// The VolumeSnapshot deleted.
    pub snapshot_gone: Option<Instant>,
}

/// A PersistentVolume's VolumeAttachment (CSI drivers with `attachRequired`): the attach/detach
/// controller creates it once the pod is scheduled and the claim bound, the driver's
/// external-attacher sets `status.attached` after `ControllerPublishVolume`, and the kubelet
/// mounts only after that. Deleted (after `ControllerUnpublishVolume`) when the volume detaches.
#[derive(Clone, Debug)]
pub struct Attachment {
    /// First seen (its create event).
    pub requested: Instant,
    /// `status.attached` true.
    pub attached: Option<Instant>,
    /// `status.attachError.message`, the latest.
    pub error: Option<String>,
    /// Deleted: the volume detached.
    pub gone: Option<Instant>,
}

/// The annotation the scheduler puts on a `WaitForFirstConsumer` claim when it has chosen
/// the node of the claim's first pod.
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Every lifecycle's [`Marks`], by claim (and pod) name, and a signal on each change.
#[derive(Clone)]
pub struct Seen {
    marks: Arc<Mutex<HashMap<String, Marks>>>,
    tx: Arc<tokio::sync::watch::Sender<u64>>,
    /// Watches that finished their initial list: the lifecycles start once all have, so no
    /// state change is first seen in a list (late) rather than as an event.
    listed: Arc<std::sync::atomic::AtomicUsize>,
    /// How many watches there are: claims, pods, PersistentVolumes, and VolumeSnapshots and
    /// VolumeAttachments when they are measured.
    watches: usize,
    /// Whether the run's VolumeSnapshots are watched.
    snapshots: bool,
    /// VolumeAttachments by PersistentVolume name when watched (`None` otherwise); kept apart
    /// from [`Marks`] so that one seen before its volume's PersistentVolume is not lost.
    attachments: Option<Arc<Mutex<HashMap<String, Attachment>>>>,
}

impl Seen {
    /// The marks of a run that watches VolumeSnapshots too when `snapshots`, and
    /// VolumeAttachments when `attachments`.
    pub fn new(snapshots: bool, attachments: bool) -> Self {
        Self {
            marks: Arc::default(),
            tx: Arc::new(tokio::sync::watch::channel(0).0),
            listed: Arc::default(),
            watches: 3 + usize::from(snapshots) + usize::from(attachments),
            snapshots,
            attachments: attachments.then(Arc::default),
        }
    }

    /// The VolumeAttachment of PersistentVolume `pv`, if one was seen.
    pub fn attachment(&self, pv: &str) -> Option<Attachment> {
        let a = self.attachments.as_ref()?;
        a.lock().unwrap_or_else(|e| e.into_inner()).get(pv).cloned()
    }

    /// A copy of `name`'s marks.
    pub fn get(&self, name: &str) -> Marks {
        self.lock().get(name).cloned().unwrap_or_default()
    }

    /// Wait until every watch has listed, or `deadline`: whether they have.
    pub async fn wait_listed(&self, deadline: Instant) -> bool {
        let mut rx = self.subscribe();
        loop {
            if self.listed.load(std::sync::atomic::Ordering::SeqCst) >= self.watches {
                return true;
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    fn mark_listed(&self) {
        self.listed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.tx.send_modify(|g| *g += 1);
    }

    /// A receiver that wakes on every change (see [`Seen::wait`]).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tx.subscribe()
    }

    /// Wait until `done` holds for `name`'s marks, or `deadline`: the marks, if it held.
    pub async fn wait(
        &self,
        name: &str,
        deadline: Instant,
        done: impl Fn(&Marks) -> bool,
    ) -> Option<Marks> {
        let mut rx = self.subscribe();
        loop {
            let m = self.get(name);
            if done(&m) {
                return Some(m);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the watches ended (the run is over).
                _ => return None,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Marks>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn update(&self, name: &str, f: impl FnOnce(&mut Marks, Instant)) {
        let now = Instant::now();
        f(self.lock().entry(name.to_string()).or_default(), now);
        self.tx.send_modify(|g| *g += 1);
    }

    fn claim(&self, c: &PersistentVolumeClaim, deleted: bool) {
        let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let node_selected = c.annotations().contains_key(SELECTED_NODE);
        let capacity = c
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .and_then(|q| crate::podfields::parse_quantity(&q.0));
        self.update(&c.name_any(), |m, now| {
            m.claim_uid = m.claim_uid.take().or_else(|| c.uid());
            grew(&mut m.capacity, capacity, now);
            if node_selected {
                m.scheduled.get_or_insert(now);
            }
            if bound {
                m.bound.get_or_insert(now);
            }
            if deleted {
                m.claim_gone.get_or_insert(now);
            }
        });
    }

    fn pv(&self, pv: &PersistentVolume, ns: &str, deleted: bool) {
        let Some(claim) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            return;
        };
        if claim.namespace.as_deref() != Some(ns) {
            return;
        }
        let Some(name) = claim.name.as_deref() else {
            return;
        };
        if !self.lock().contains_key(name) {
            // Not one of this run's claims (or not yet created by it: a PV never precedes
            // its claim's create request, which registers the name first).
            return;
        }
        let uid = claim.uid.clone();
        let capacity = pv
            .spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .and_then(|q| crate::podfields::parse_quantity(&q.0));
        self.update(name, |m, now| {
            // A PV of an earlier claim of the same name (an earlier run's) is not this one's.
            if uid.is_some() && m.claim_uid.is_some() && uid != m.claim_uid {
                return;
            }
            grew(&mut m.pv_capacity, capacity, now);
            m.pv_created.get_or_insert(now);
            m.pv_name.get_or_insert_with(|| pv.name_any());
            if deleted {
                m.pv_gone.get_or_insert(now);
            }
        });
    }

    fn pod(&self, p: &Pod, deleted: bool) {
        let st = p.status.as_ref();
        let scheduled = st.and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True")
        });
        // Containers by name: with `inUse` the pod has a second one, the hold.
        let state_of = |name: &str| {
            st.and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == name))
                .and_then(|c| c.state.as_ref())
        };
        let state = state_of(super::objects::CONTAINER);
        let running = state.is_some_and(|s| s.running.is_some() || s.terminated.is_some());
        let terminated = state.and_then(|s| s.terminated.as_ref()).map(|t| {
            let message = t.message.as_ref().or(t.reason.as_ref());
            (t.exit_code, message.cloned().unwrap_or_default())
        });
        let hold = state_of(super::objects::HOLD_CONTAINER).and_then(|s| s.terminated.as_ref());
        let hold_ended = hold.is_some();
        let hold_message = hold.and_then(|t| t.message.clone());
        self.update(&p.name_any(), |m, now| {
            if scheduled {
                m.scheduled.get_or_insert(now);
            }
            if running {
                m.running.get_or_insert(now);
            }
            if m.terminated.is_none() {
                m.terminated = terminated;
            }
            m.hold_ended |= hold_ended;
            if m.hold_message.is_none() {
                m.hold_message = hold_message;
            }
            if deleted {
                m.pod_gone.get_or_insert(now);
            }
        });
    }

    fn snapshot(&self, v: &DynamicObject, deleted: bool) {
        let st = v.data.get("status");
        let bound = st
            .and_then(|s| s.get("boundVolumeSnapshotContentName"))
            .and_then(|n| n.as_str())
            .is_some_and(|n| !n.is_empty());
        let ready = st
            .and_then(|s| s.get("readyToUse"))
            .and_then(|r| r.as_bool())
            == Some(true);
        let error = st
            .and_then(|s| s.get("error"))
            .and_then(|e| e.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string);
        self.update(&v.name_any(), |m, now| {
            if bound {
                m.snapshot_bound.get_or_insert(now);
            }
            if ready {
                m.snapshot_ready.get_or_insert(now);
            }
            if error.is_some() {
                m.snapshot_error = error;
            }
            if deleted {
                m.snapshot_gone.get_or_insert(now);
            }
        });
    }

    fn attachment_event(&self, va: &VolumeAttachment, deleted: bool) {
        let Some(map) = &self.attachments else { return };
        let Some(pv) = va.spec.source.persistent_volume_name.clone() else {
            return; // an inline volume's: never a claim's
        };
        let st = va.status.as_ref();
        let attached = st.is_some_and(|s| s.attached);
        let error = st
            .and_then(|s| s.attach_error.as_ref())
            .and_then(|e| e.message.clone());
        let now = Instant::now();
        {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            let a = map.entry(pv).or_insert(Attachment {
                requested: now,
                attached: None,
                error: None,
                gone: None,
            });
            if attached {
                a.attached.get_or_insert(now);
            }
            if error.is_some() {
                a.error = error;
            }
            if deleted {
                a.gone.get_or_insert(now);
            }
        }
        self.tx.send_modify(|g| *g += 1);
    }

    /// Register `name` before its claim is created, so the PV watch knows it is ours.
    pub fn expect(&self, name: &str) {
        self.lock().entry(name.to_string()).or_default();
    }

    /// Follow the run's claims, pods and, if [`Seen::new`] said so, VolumeSnapshots (by
    /// `selector`) in `ns`, every PV and, if said so, every VolumeAttachment, until dropped.
    pub async fn follow(self, client: kube::Client, ns: String, selector: String) {
        let cfg = watcher::Config::default().labels(&selector);
        let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        let pods = Api::<Pod>::namespaced(client.clone(), &ns);
        let snaps = self.snapshots.then(|| {
            Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &volume_snapshots())
        });
        let vas = self
            .attachments
            .is_some()
            .then(|| Api::<VolumeAttachment>::all(client.clone()));
        let pvs = Api::<PersistentVolume>::all(client);
        let a = drive(&self, watcher::watcher(claims, cfg.clone()), {
            let s = self.clone();
            move |c: &PersistentVolumeClaim, del: bool| s.claim(c, del)
        });
        let b = drive(&self, watcher::watcher(pods, cfg.clone()), {
            let s = self.clone();
            move |p: &Pod, del: bool| s.pod(p, del)
        });
        let d = async {
            if let Some(snaps) = snaps {
                let s = self.clone();
                drive(&self, watcher::watcher(snaps, cfg), move |v, del| {
                    s.snapshot(v, del)
                })
                .await
            }
        };
        let e = async {
            if let Some(vas) = vas {
                let s = self.clone();
                drive(
                    &self,
                    watcher::watcher(vas, watcher::Config::default()),
                    move |va, del| s.attachment_event(va, del),
                )
                .await
            }
        };
        let c = drive(&self, watcher::watcher(pvs, watcher::Config::default()), {
            let s = self.clone();
            move |pv: &PersistentVolume, del: bool| s.pv(pv, &ns, del)
        });
        tokio::join!(a, b, c, d, e);
    }
}

/// Record a capacity when it differs from the last one seen, with the instant it was seen.
fn grew(mark: &mut Option<(f64, Instant)>, bytes: Option<f64>, now: Instant) {
    if let Some(b) = bytes {
        if mark.is_none_or(|(had, _)| had != b) {
            *mark = Some((b, now));
        }
    }
}

/// Feed every object of a watch to `f` (with whether it was deleted). Watch errors are
/// retried by the watcher itself after a pause (a gap in sight, never a lost run).
async fn drive<K>(
    seen: &Seen,
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    f: impl Fn(&K, bool),
) {
    let mut stream = std::pin::pin!(stream);
    let mut listed = false;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Apply(o) | Event::InitApply(o)) => f(&o, false),
            Ok(Event::Delete(o)) => f(&o, true),
            Ok(Event::InitDone) if !listed => {
                listed = true;
                seen.mark_listed();
            }
            Ok(Event::Init | Event::InitDone) => {}
            Err(e) => {
                tracing::debug!("control-plane watch: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(status: serde_json::Value) -> DynamicObject {
        let mut o = DynamicObject::new("cp-cp-0", &volume_snapshots());
        o.data = serde_json::json!({ "status": status });
        o
    }

    #[test]
    fn a_snapshot_is_marked_bound_then_ready_each_once_and_its_error_kept() {
        let seen = Seen::new(true, false);
        seen.snapshot(&snapshot(serde_json::json!({})), false);
        let m = seen.get("cp-cp-0");
        assert!(m.snapshot_bound.is_none() && m.snapshot_ready.is_none());
        seen.snapshot(
            &snapshot(serde_json::json!({"boundVolumeSnapshotContentName": "c-1", "readyToUse": false, "error": {"message": "driver busy"}})),
            false,
        );
        let m = seen.get("cp-cp-0");
        let bound = m.snapshot_bound.expect("bound");
        assert!(m.snapshot_ready.is_none());
        assert_eq!(m.snapshot_error.as_deref(), Some("driver busy"));
        seen.snapshot(
            &snapshot(
                serde_json::json!({"boundVolumeSnapshotContentName": "c-1", "readyToUse": true}),
            ),
            false,
        );
        let m = seen.get("cp-cp-0");
        assert_eq!(m.snapshot_bound, Some(bound), "first sight kept");
        assert!(m.snapshot_ready.is_some() && m.snapshot_gone.is_none());
        seen.snapshot(&snapshot(serde_json::json!({})), true);
        assert!(seen.get("cp-cp-0").snapshot_gone.is_some());
    }

    fn attachment(pv: Option<&str>, status: serde_json::Value) -> VolumeAttachment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "csi-0123"},
            "spec": {"attacher": "loop.csi.benchrun.dev", "nodeName": "vm",
                     "source": {"persistentVolumeName": pv}},
            "status": status,
        }))
        .expect("a VolumeAttachment")
    }

    #[test]
    fn a_volume_attachment_is_marked_by_its_volume_requested_attached_and_gone() {
        let seen = Seen::new(false, true);
        assert!(seen.attachment("pv-1").is_none());
        seen.attachment_event(
            &attachment(
                Some("pv-1"),
                serde_json::json!({"attached": false, "attachError": {"message": "node busy"}}),
            ),
            false,
        );
        let a = seen.attachment("pv-1").expect("seen");
        assert!(a.attached.is_none() && a.gone.is_none());
        assert_eq!(a.error.as_deref(), Some("node busy"));
        seen.attachment_event(
            &attachment(Some("pv-1"), serde_json::json!({"attached": true})),
            false,
        );
        let b = seen.attachment("pv-1").expect("seen");
        assert_eq!(b.requested, a.requested, "first sight kept");
        assert!(b.attached.is_some_and(|t| t >= b.requested));
        seen.attachment_event(
            &attachment(Some("pv-1"), serde_json::json!({"attached": true})),
            true,
        );
        assert!(seen.attachment("pv-1").expect("seen").gone.is_some());
        // An inline volume's attachment names no PersistentVolume: nothing of a claim's.
        seen.attachment_event(
            &attachment(None, serde_json::json!({"attached": true})),
            false,
        );
        assert!(seen.attachment("").is_none());
    }

    fn pod(statuses: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "cp-cp-0"},
            "status": {"containerStatuses": statuses},
        }))
        .expect("a pod")
    }

    fn status(name: &str, state: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"name": name, "image": "i", "imageID": "", "ready": false,
                           "restartCount": 0, "state": state})
    }

    #[test]
    fn the_probe_and_the_hold_container_are_told_apart_by_name() {
        let seen = Seen::new(false, false);
        let done = serde_json::json!({"terminated": {"exitCode": 0, "message": "{}"}});
        let running = serde_json::json!({"running": {}});
        // The hold container listed first: the probe's state is still the one read.
        seen.pod(
            &pod(serde_json::json!([
                status("hold", running.clone()),
                status("probe", done.clone())
            ])),
            false,
        );
        let m = seen.get("cp-cp-0");
        assert!(m.running.is_some() && !m.hold_ended);
        assert_eq!(m.terminated, Some((0, "{}".into())));
        seen.pod(
            &pod(serde_json::json!([
                status("probe", done),
                status(
                    "hold",
                    serde_json::json!({"terminated": {"exitCode": 0, "message": "{\"reads\":1}"}})
                )
            ])),
            true,
        );
        let m = seen.get("cp-cp-0");
        assert!(m.hold_ended && m.pod_gone.is_some());
        // A busy hold's report, from the deleted pod's last state.
        assert_eq!(m.hold_message.as_deref(), Some("{\"reads\":1}"));
    }

    #[test]
    fn attachments_not_watched_are_never_reported() {
        let seen = Seen::new(true, false);
        seen.attachment_event(
            &attachment(Some("pv-1"), serde_json::json!({"attached": true})),
            false,
        );
        assert!(seen.attachment("pv-1").is_none());
        assert_eq!(seen.watches, 4);
        assert_eq!(Seen::new(true, true).watches, 5);
    }

    #[test]
    fn a_capacity_keeps_the_instant_it_was_first_seen_at_its_value() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_millis(5);
        let t2 = t1 + std::time::Duration::from_millis(5);
        let mut mark = None;
        grew(&mut mark, None, t0);
        assert_eq!(mark, None);
        grew(&mut mark, Some(16.0), t0);
        grew(&mut mark, Some(16.0), t1);
        assert_eq!(
            mark,
            Some((16.0, t0)),
            "an unchanged value keeps its instant"
        );
        grew(&mut mark, Some(40.0), t2);
        assert_eq!(mark, Some((40.0, t2)));
    }
}
