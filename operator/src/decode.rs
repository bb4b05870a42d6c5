//! Runs are watched as untyped objects and decoded one at a time.
//!
//! A typed watch decodes the whole list at once: one `BenchmarkRun` that the API server
//! accepted but the Rust type cannot read (a stored object from an older schema, a status
//! someone patched by hand) would fail every list and stall the controller for every run in
//! scope. Decoding per object confines the damage to that run, which is then reported on
//! itself: `Valid=False` and `Failed=True` with the field path, phase `Failed`, and a warning
//! event. Written by server-side apply like every status write, under a field manager of its
//! own ([`DECODE_MANAGER`]): applying only these fields as the operator's main manager would
//! remove every other status field that manager owns (workers, results). A run that cannot be
//! decoded and is being deleted loses the operator's finalizer, or `kubectl delete` (and its
//! namespace's deletion) would hang on it.

use chrono::{DateTime, Utc};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};

use crate::crd::BenchmarkRun;
use crate::reconcile::deletion::FINALIZER;
use crate::run_rules::cond;
use crate::Result;

/// Reason of the `Valid=False` condition on a run that cannot be decoded.
pub const UNDECODABLE: &str = "Undecodable";
/// The field manager of the report on an undecodable run.
pub const DECODE_MANAGER: &str = "benchrun-operator-decode";
/// Longest message written to a condition or event (an echoed bad value can be huge).
const MAX_MESSAGE: usize = 1000;

/// The BenchmarkRun kind, for the untyped API.
pub fn api_resource() -> ApiResource {
    ApiResource::erase::<BenchmarkRun>(&())
}

/// Decode one run, or say which field cannot be read and why.
pub fn decode(obj: &DynamicObject) -> std::result::Result<BenchmarkRun, String> {
    let value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    serde_path_to_error::deserialize::<_, BenchmarkRun>(value).map_err(|e| {
        let path = e.path().to_string();
        let mut msg = format!("{path}: {}", e.inner());
        truncate(&mut msg);
        msg
    })
}

fn truncate(s: &mut String) {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
}

/// The status merge patch that reports an undecodable run, or `None` when the run already
/// says so (writing again would change the object, wake the watch and loop).
pub fn report_patch(obj: &DynamicObject, message: &str, now: DateTime<Utc>) -> Option<Value> {
    let message = format!("the operator cannot read this BenchmarkRun: {message}");
    let current = obj
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(cond::VALID))
        });
    if current
        .and_then(|c| c.get("message"))
        .and_then(Value::as_str)
        == Some(message.as_str())
    {
        return None;
    }
    let condition = |type_: &str, status: &str| {
        json!({
            "type": type_,
            "status": status,
            "reason": UNDECODABLE,
            "message": message,
            "lastTransitionTime": now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "observedGeneration": obj.metadata.generation,
        })
    };
    Some(json!({
        "apiVersion": obj.types.as_ref().map(|t| t.api_version.as_str()).unwrap_or("benchrun.dev/v1alpha1"),
        "kind": "BenchmarkRun",
        "status": {
            "phase": "Failed",
            "conditions": [condition(cond::VALID, "False"), condition(cond::FAILED, "True")],
        },
    }))
}

/// The JSON patch that removes the operator's finalizer from a run being deleted, tested
/// against the list it read (a concurrent change fails the patch instead of being
/// overwritten); `None` when the run is not being deleted or does not carry it.
pub fn finalizer_release(obj: &DynamicObject) -> Option<Value> {
    obj.metadata.deletion_timestamp.as_ref()?;
    let f = obj.metadata.finalizers.as_deref().unwrap_or_default();
    if !f.iter().any(|x| x == FINALIZER) {
        return None;
    }
    let rest: Vec<&String> = f.iter().filter(|x| *x != FINALIZER).collect();
    Some(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": f},
        {"op": "replace", "path": "/metadata/finalizers", "value": rest},
    ]))
}

/// Report `message` on the run: status (merge patch, so no typed decode is needed) and event.
pub async fn report(
    obj: &DynamicObject,
    message: &str,
    client: &Client,
    recorder: &Recorder,
) -> Result<()> {
    let ar = api_resource();
    let (ns, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    if let Some(release) = finalizer_release(obj) {
        // Nothing the operator could clean up is known (the run cannot be read); its pods
        // are owned by it and go with it.
        tracing::warn!("{ns}/{name}: cannot decode, being deleted: releasing its finalizer");
        let patch: json_patch::Patch = serde_json::from_value(release)?;
        match api
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(());
    }
    let Some(patch) = report_patch(obj, message, Utc::now()) else {
        return Ok(());
    };
    tracing::warn!("{ns}/{name}: cannot decode: {message}");
    api.patch_status(
        &name,
        &PatchParams::apply(DECODE_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    let ev = Event {
        type_: EventType::Warning,
        reason: UNDECODABLE.into(),
        note: Some(message.chars().take(MAX_MESSAGE).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &obj.object_ref(&ar)).await {
        tracing::warn!("event {UNDECODABLE} for {ns}/{name}: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(spec: Value, status: Option<Value>) -> DynamicObject {
        let mut v = json!({
            "apiVersion": "benchrun.dev/v1alpha1",
            "kind": "BenchmarkRun",
            "metadata": {"name": "bad", "namespace": "ns", "generation": 3},
            "spec": spec,
        });
        if let Some(s) = status {
            v["status"] = s;
        }
        serde_json::from_value(v).expect("a DynamicObject takes any fields")
    }

    #[test]
    fn a_good_run_decodes() {
        let o = object(
            json!({"workload": {"target": "file:///data", "duration": "5s", "ops": [{"op": "get"}]}}),
            None,
        );
        let run = decode(&o).expect("decodes");
        assert_eq!(run.name_any(), "bad");
    }

    #[test]
    fn an_undecodable_run_names_the_field_and_is_reported_once() {
        let o = object(
            json!({"workload": {"target": "file:///data", "duration": "5s", "ops": [{"op": "get"}], "objectSize": "1MB2"}}),
            None,
        );
        let e = decode(&o).expect_err("1MB2 is not a size");
        assert!(e.starts_with("spec.workload.objectSize"), "{e}");
        let patch = report_patch(&o, &e, Utc::now()).expect("first report");
        assert_eq!(patch["status"]["phase"], "Failed");
        let c = &patch["status"]["conditions"][0];
        assert_eq!(c["type"], "Valid");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], UNDECODABLE);
        assert_eq!(c["observedGeneration"], 3);
        assert!(c["message"].as_str().unwrap().contains("objectSize"));
        let f = &patch["status"]["conditions"][1];
        assert_eq!(
            (&f["type"], &f["status"]),
            (&json!("Failed"), &json!("True"))
        );
        // A server-side apply body: it names its kind.
        assert_eq!(patch["kind"], "BenchmarkRun");
        assert_eq!(patch["apiVersion"], "benchrun.dev/v1alpha1");
        // Once the run carries the report, nothing more is written (no write loop).
        let reported = object(o.data["spec"].clone(), Some(patch["status"].clone()));
        assert_eq!(report_patch(&reported, &e, Utc::now()), None);
    }

    #[test]
    fn an_undecodable_run_being_deleted_releases_only_the_operators_finalizer() {
        let spec = json!({"workload": {"target": "file:///data", "duration": "5s", "ops": [{"op": "get"}]}});
        let mut o = object(spec, None);
        o.metadata.finalizers = Some(vec!["other.io/keep".into(), FINALIZER.into()]);
        // Not being deleted: kept.
        assert_eq!(finalizer_release(&o), None);
        o.metadata.deletion_timestamp = Some(crate::run_rules::to_time(Utc::now()));
        let patch = finalizer_release(&o).expect("released");
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/keep", FINALIZER]},
                {"op": "replace", "path": "/metadata/finalizers", "value": ["other.io/keep"]},
            ])
        );
        o.metadata.finalizers = Some(vec!["other.io/keep".into()]);
        assert_eq!(finalizer_release(&o), None);
    }

    #[test]
    fn a_broken_status_is_undecodable_too_and_messages_are_bounded() {
        let o = object(
            json!({"workload": {"target": "file:///data", "duration": "5s", "ops": [{"op": "get"}]}}),
            Some(json!({"phase": "x".repeat(100_000)})),
        );
        let e = decode(&o).expect_err("unknown phase");
        assert!(e.starts_with("status.phase"), "{e}");
        assert!(e.len() <= MAX_MESSAGE + 3, "{} bytes", e.len());
    }
}
