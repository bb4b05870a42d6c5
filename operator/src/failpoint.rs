//! Crash points for tests: [`arm`] makes the next [`hit`] of that name panic, once, so a test
//! can stop the operator exactly between two steps, as a crash or a kill there would, and
//! then start a new one. A reconcile panic ends the controller (kube re-raises it), which is
//! what a crash is. Nothing arms a failpoint outside tests; an unarmed `hit` is one lock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::api::DynamicObject;
use kube::ResourceExt;

static ARMED: Mutex<Option<String>> = Mutex::new(None);

/// Runs (by name) whose passes are handed the first copy the controller ever gave them.
static STALE: Mutex<BTreeMap<String, Option<Arc<DynamicObject>>>> = Mutex::new(BTreeMap::new());

/// Make the next `hit(name)` panic.
pub fn arm(name: &str) {
    *ARMED.lock().unwrap_or_else(|e| e.into_inner()) = Some(name.to_string());
}

/// Panic here if `name` is armed (and disarm it).
pub fn hit(name: &str) {
    let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
    if armed.as_deref() == Some(name) {
        *armed = None;
        drop(armed);
        panic!("failpoint {name}");
    }
}

/// Hand every pass of run `name` the first copy of it the controller saw, as a watch cache
/// that never catches up would: the pass must not decide anything twice on it.
pub fn serve_stale(name: &str) {
    STALE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.to_string(), None);
}

/// `obj`, or the first copy of it seen if its name was given to [`serve_stale`].
pub fn stale(obj: Arc<DynamicObject>) -> Arc<DynamicObject> {
    let mut stale = STALE.lock().unwrap_or_else(|e| e.into_inner());
    match stale.get_mut(&obj.name_any()) {
        Some(first) => first.get_or_insert(obj).clone(),
        None => obj,
    }
}

/// Preparing: the worker pods are created and the pass has not written anything since.
pub const AFTER_PODS_CREATED: &str = "after-pods-created";
/// Every worker is Ready and the pass chose the start time; nothing is written or sent yet.
pub const START_DECIDED: &str = "start-decided";
/// Running: the common start time is in the status and no start request is sent yet.
pub const AFTER_START_WRITTEN: &str = "after-start-written";
/// Running: the first Ready worker's agent accepted the start time; the others' requests may
/// or may not have reached their agents (they are sent at once), and the status does not say
/// any worker started.
pub const A_START_SENT: &str = "a-start-sent";
/// Collecting: a summary is persisted and not yet counted in the status.
pub const AFTER_PERSIST: &str = "after-persist";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once_and_only_by_name() {
        hit("unit-test-point");
        arm("unit-test-point");
        hit("another-point");
        assert!(std::panic::catch_unwind(|| hit("unit-test-point")).is_err());
        hit("unit-test-point");
    }
}
